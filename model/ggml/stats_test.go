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
// logits row with model.RowStatsOf's of the row read back: the maximum,
// second, argmax and top K exactly, the moments Z, A and B to float
// rounding.
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
			p := b.Cache()
			s1, s2 := p.NewSeq(), p.NewSeq()
			var rows []model.Row
			for i := range 12 {
				rows = append(rows, model.Row{Seq: s1, Token: (i*13 + 5) % m.Config.Vocab, NoLogits: i%4 == 1})
				rows = append(rows, model.Row{Seq: s2, Token: (i*7 + 2) % m.Config.Vocab})
			}
			for _, k := range []int{64, 1, 0} {
				b.SetRowStats(k)
				for _, r := range rows {
					p.Truncate(r.Seq, 0)
				}
				out, err := b.Forward(rows)
				if err != nil {
					t.Fatal(err)
				}
				n, worst := 0, 0.0
				want := model.RowStats{Top: make([]int32, k), TopLogits: make([]float32, k)}
				for i, r := range rows {
					got := out.Stats(i)
					if r.NoLogits || k == 0 {
						if got != nil {
							t.Fatalf("row %d (no logits %v, k %d) has statistics", i, r.NoLogits, k)
						}
						continue
					}
					model.RowStatsOf(out.Logits(i), k, &want)
					rel := func(x, y float64) float64 { return math.Abs(x-y) / max(math.Abs(y), 1e-300) }
					d := max(rel(got.Z, want.Z), math.Abs(got.A-want.A)/want.Z, math.Abs(got.B-want.B)/want.Z)
					if got.Max != want.Max || got.Second != want.Second || got.Arg != want.Arg || got.NonFinite ||
						!slices.Equal(got.Top, want.Top) || !slices.Equal(got.TopLogits, want.TopLogits) || !(d <= 1e-5) {
						t.Fatalf("k %d row %d: got %+v\nwant %+v", k, i, *got, want)
					}
					worst = max(worst, d)
					n++
				}
				t.Logf("top %d: %d rows; moments within %.2g (relative to Z)", k, n, worst)
			}
		})
	}
}
