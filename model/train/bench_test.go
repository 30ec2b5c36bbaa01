package train

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/entropix-search/entropix-search/model/synth"
)

// BenchmarkForwardBackward times one training step's passes on packed
// batches of about 8k tokens, at a few shapes of the size the arith model
// is trained at, and reports tokens/s and the achieved GFLOP/s.
func BenchmarkForwardBackward(b *testing.B) {
	for _, sh := range []struct{ dim, hidden, layers, heads int }{{128, 352, 5, 4}, {192, 512, 4, 6}, {96, 256, 6, 4}} {
		s := synth.Shape{Name: "bench", Dim: sh.dim, HiddenDim: sh.hidden, Layers: sh.layers, Heads: sh.heads, KVHeads: sh.heads,
			Vocab: 512, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5, Tied: true}
		b.Run(fmt.Sprintf("d%d_h%d_l%d", sh.dim, sh.hidden, sh.layers), func(b *testing.B) {
			m, err := New(s, 1)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			var ex []Example
			for range 256 {
				n := 60 + r.IntN(70)
				e := Example{Tokens: make([]int32, n), PromptLen: 40}
				for i := range e.Tokens {
					e.Tokens[i] = int32(r.IntN(s.Vocab))
				}
				ex = append(ex, e)
			}
			l, _ := NewLoader(ex, 96, 256, 1)
			bt := l.Batch(0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.ForwardBackward(bt); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(l.tokens(0))/per, "tok/s")
			b.ReportMetric(m.FLOPs(bt)/per/1e9, "GFLOP/s")
			b.ReportMetric(float64(m.NumParams()), "params")
		})
	}
}
