package ggml_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestRowStats compares the statistics the device computes for each
// logits row with the same computed here, in float64, from the row read
// back: the log-normalizer, entropy and varentropy, the argmax and the
// top 10 tokens in order.
func TestRowStats(t *testing.T) {
	options(t)
	for _, file := range []string{"stories260K.gguf", "arith.gguf"} {
		t.Run(file, func(t *testing.T) {
			m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", file), "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			b := newBackend(t, m, 256, 16, kvcache.F32)
			b.SetRowStats(10)
			p := b.Cache()
			s1, s2 := p.NewSeq(), p.NewSeq()
			var rows []model.Row
			for i := range 12 {
				rows = append(rows, model.Row{Seq: s1, Token: (i*13 + 5) % m.Config.Vocab, NoLogits: i%4 == 1})
				rows = append(rows, model.Row{Seq: s2, Token: (i*7 + 2) % m.Config.Vocab})
			}
			out, err := b.Forward(rows)
			if err != nil {
				t.Fatal(err)
			}
			stats := b.RowStats()
			j, worst := 0, [3]float64{}
			for i, r := range rows {
				if r.NoLogits {
					continue
				}
				got := stats[j]
				j++
				l := out.Logits(i)
				mx := math.Inf(-1)
				for _, v := range l {
					mx = max(mx, float64(v))
				}
				z := 0.0
				for _, v := range l {
					z += math.Exp(float64(v) - mx)
				}
				logZ := mx + math.Log(z)
				h, h2 := 0.0, 0.0
				for _, v := range l {
					lp := float64(v) - logZ
					h -= math.Exp(lp) * lp
					h2 += math.Exp(lp) * lp * lp
				}
				ve := h2 - h*h
				ids := make([]int32, len(l))
				for k := range ids {
					ids[k] = int32(k)
				}
				slices.SortStableFunc(ids, func(a, c int32) int {
					if l[a] != l[c] {
						if l[a] > l[c] {
							return -1
						}
						return 1
					}
					return int(a - c)
				})
				d := [3]float64{math.Abs(got.LogZ - logZ), math.Abs(got.Entropy - h), math.Abs(got.Varentropy-ve) / max(1, ve)}
				if !(d[0] <= 1e-5*max(1, math.Abs(logZ))) || !(d[1] <= 1e-5) || !(d[2] <= 1e-4) ||
					got.Argmax != int(ids[0]) || !slices.Equal(got.Top, ids[:10]) {
					t.Fatalf("row %d: got logZ %g entropy %g varentropy %g argmax %d top %v; want %g %g %g %d %v",
						i, got.LogZ, got.Entropy, got.Varentropy, got.Argmax, got.Top, logZ, h, ve, ids[0], ids[:10])
				}
				for k := range 10 {
					if got.TopLogits[k] != l[got.Top[k]] {
						t.Fatalf("row %d: top logit %d is %g, the row says %g", i, k, got.TopLogits[k], l[got.Top[k]])
					}
				}
				for k := range d {
					worst[k] = max(worst[k], d[k])
				}
			}
			if j != len(stats) {
				t.Fatalf("%d statistics for %d rows with logits", len(stats), j)
			}
			t.Logf("%d rows: log-normalizer within %.2g, entropy %.2g, varentropy %.2g (relative)", j, worst[0], worst[1], worst[2])
		})
	}
}
