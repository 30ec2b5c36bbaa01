package ggml_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest/reftest"
	"github.com/entropix-search/entropix-search/policy"
)

// chunkSteps runs steps of more rows than a small chunk on b: two
// prompts prefilled in one step (some rows without logits), a fork of
// the first advancing with a prefill of its own beside the others (its
// first append copies the shared partial block on write), then decoding
// steps of one row each; the attention of layers attn asked throughout.
// It returns every row's logits, statistics and attention, in order, and
// the metrics of the attention's sums when b gives them (per row and
// layer).
func chunkSteps(t *testing.T, b *ggml.Backend, vocab int, attn []int) (logits [][]float32, stats []model.RowStats, att []model.Attention, sums []policy.AttentionMetrics) {
	t.Helper()
	p := b.Cache()
	s1, s2 := p.NewSeq(), p.NewSeq()
	step := func(rows []model.Row) {
		t.Helper()
		out, err := b.Forward(rows, attn...)
		if err != nil {
			t.Fatal(err)
		}
		logits, att = keepOutputs(out, rows, len(attn), logits, att)
		sums = keepSums(t, out, rows, len(attn), sums)
		for i, r := range rows {
			if st := out.Stats(i); st != nil && !r.NoLogits {
				c := *st
				c.Top, c.TopLogits = append([]int32(nil), st.Top...), append([]float32(nil), st.TopLogits...)
				stats = append(stats, c)
			}
		}
	}
	var rows []model.Row
	for i := range 30 {
		rows = append(rows, model.Row{Seq: s1, Token: (7*i + 1) % vocab, NoLogits: i%4 == 1})
	}
	for i := range 13 {
		rows = append(rows, model.Row{Seq: s2, Token: (5*i + 2) % vocab, NoLogits: i < 12})
	}
	step(rows)
	s3 := p.Fork(s1)
	rows = rows[:0]
	for i := range 11 {
		rows = append(rows, model.Row{Seq: s3, Token: (3*i + 4) % vocab, NoLogits: i%3 == 0})
		if i%4 == 0 {
			rows = append(rows, model.Row{Seq: s2, Token: (11*i + 5) % vocab})
		}
	}
	rows = append(rows, model.Row{Seq: s1, Token: 9 % vocab})
	step(rows)
	for i := range 3 {
		step([]model.Row{{Seq: s1, Token: (i + 1) % vocab}, {Seq: s2, Token: (i + 2) % vocab}, {Seq: s3, Token: (i + 3) % vocab}})
	}
	for _, s := range []*kvcache.Seq{s1, s2, s3} {
		p.Free(s)
	}
	if n := p.Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks in use", n)
	}
	return logits, stats, att, sums
}

// TestChunks runs the same steps in one graph each and in chunks of 7
// and 16 rows, with the rows read at once and left on the device (lazy
// rows, a GPU's way), and compares every row's logits, statistics and
// attention.
func TestChunks(t *testing.T) {
	m := loadStories(t)
	attn := []int{0, m.Config.Layers - 1}
	newB := func(chunk int, lazy bool) *ggml.Backend {
		b := chunkedBackend(t, m, chunk)
		ggml.SetLazyRows(b, lazy)
		return b
	}
	for _, lazy := range []bool{false, true} {
		want, wantStats, wantAtt, _ := chunkSteps(t, newB(0, lazy), m.Config.Vocab, attn)
		for _, chunk := range []int{7, 16, -16} { // -16: chunks of 16 as on a GPU, one padded batch a step
			t.Run(fmt.Sprintf("lazy-%v/chunk%d", lazy, chunk), func(t *testing.T) {
				b := newB(max(chunk, -chunk), lazy)
				if chunk < 0 {
					ggml.SetAttention(b, "gpu-batch")
				}
				got, gotStats, gotAtt, _ := chunkSteps(t, b, m.Config.Vocab, attn)
				if len(got) != len(want) || len(gotStats) != len(wantStats) || len(gotAtt) != len(wantAtt) {
					t.Fatalf("%d logits rows, %d statistics, %d attention rows; in one graph %d, %d, %d",
						len(got), len(gotStats), len(gotAtt), len(want), len(wantStats), len(wantAtt))
				}
				worst, pworst := 0.0, 0.0
				for i := range want {
					worst = max(worst, spreadDiff(got[i], want[i]))
				}
				for i, w := range wantStats {
					g := gotStats[i]
					if g.Arg != w.Arg || g.Top[0] != w.Top[0] || !(math.Abs(g.Z-w.Z) <= 1e-5*w.Z) {
						t.Fatalf("statistics %d: %+v, in one graph %+v", i, g, w)
					}
				}
				for i, w := range wantAtt {
					g := gotAtt[i]
					if g.Heads != w.Heads || g.Len != w.Len {
						t.Fatalf("attention %d: %d x %d, in one graph %d x %d", i, g.Heads, g.Len, w.Heads, w.Len)
					}
					for j := range w.Probs {
						pworst = max(pworst, math.Abs(float64(g.Probs[j]-w.Probs[j])), math.Abs(float64(g.Scores[j]-w.Scores[j]))/max(1, math.Abs(float64(w.Scores[j]))))
					}
				}
				if !(worst <= 1e-5) || !(pworst <= 1e-5) {
					t.Fatalf("logits %.3g of the spread from one graph's, attention %.3g", worst, pworst)
				}
				built, reused := b.Graphs()
				t.Logf("%d logits rows within %.2g of the spread of one graph's, %d statistics, %d attention rows within %.2g; %d graphs built, %d reused",
					len(want), worst, len(wantStats), len(wantAtt), pworst, built, reused)
			})
		}
	}
}

// chunkedBackend is a backend on m running graphs of chunk rows at most
// (0: DefaultChunk), its cache 512 positions in F32, closed at the end.
func chunkedBackend(t *testing.T, m *model.Model, chunk int) *ggml.Backend {
	t.Helper()
	o := options(t)
	o.Chunk = chunk
	b, err := ggml.New(m, model.CacheConfig{Tokens: 512, BlockSize: 4, DType: kvcache.F32}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestChunkedReference is TestMatchesReference's comparison with prompts
// prefilled in chunks of 5 rows.
func TestChunkedReference(t *testing.T) {
	o := options(t)
	o.Chunk = 5
	reftest.Run(t, []reftest.Case{
		{Name: "stories260K", Model: reftest.Bundled("stories260K.gguf"), Tol: 1e-4},
		{Name: "synth-qwen2", Model: reftest.Generate(kernels.F32, qwen2), Tol: 1e-4, Short: true},
	}, func(t *testing.T, m *model.Model, c model.CacheConfig) model.Backend {
		b, err := ggml.New(m, c, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}, nil)
}
