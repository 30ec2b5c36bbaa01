package cpu_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// TestMatchesReference runs prompts through the CPU backend, as a prefill
// (every position's logits kept) and then decoding, and compares the
// logits at every position with model.Reference's: the bundled models'
// float weights within float rounding (in both cache types), a synthetic
// Q8_0 and Q4_K model's within the activation quantization of their
// products (int8 and Q8_K blocks, as llama.cpp's).
func TestMatchesReference(t *testing.T) {
	root := modeltest.RepoRoot()
	type tc struct {
		name string
		m    func(t *testing.T) *model.Model
		tol  float64 // the largest logit difference, relative to the reference's logit spread
	}
	load := func(path string) func(t *testing.T) *model.Model {
		return func(t *testing.T) *model.Model {
			m, err := model.Load(path, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}
	}
	// A small shape whose rows are whole Q4_K super-blocks (256), with
	// grouped-query attention and an untied classifier.
	small := synth.Shape{Name: "small", Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 512, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	gen := func(dt kernels.DType) func(t *testing.T) *model.Model {
		return func(t *testing.T) *model.Model {
			m, err := synth.Generate(small, dt, 3)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, c := range []tc{
		{"stories260K", load(filepath.Join(root, "bench", "models", "stories260K.gguf")), 1e-5},
		{"arith", load(filepath.Join(root, "bench", "models", "arith.gguf")), 1e-5},
		{"synth-Q8_0", gen(kernels.Q8_0), 0.02},
		{"synth-Q4_K", gen(kernels.Q4_K), 0.03},
	} {
		for _, dt := range []kvcache.ElemType{kvcache.F32, kvcache.F16} {
			if strings.HasPrefix(c.name, "synth") && (dt == kvcache.F16 || testing.Short()) {
				continue // the bundled models check the F16 cache; -short (the race run) skips the slow ones
			}
			t.Run(fmt.Sprintf("%s/kv-%v", c.name, dt), func(t *testing.T) {
				m := c.m(t)
				tol := c.tol
				if dt == kvcache.F16 {
					tol = max(tol, 0.002) // keys and values rounded to 11 bits
				}
				prompt := make([]int, 0, 40)
				for i := range cap(prompt) {
					prompt = append(prompt, (7*i*i+3*i+1)%m.Config.Vocab)
				}
				want, err := m.Reference(prompt)
				if err != nil {
					t.Fatal(err)
				}
				r, err := cpu.New(m, model.CacheConfig{Tokens: 64, BlockSize: 4, DType: dt})
				if err != nil {
					t.Fatal(err)
				}
				seq := r.Cache().NewSeq()
				// The first 24 positions as one prefill, the others one by one.
				var rows []model.Row
				for _, tok := range prompt[:24] {
					rows = append(rows, model.Row{Seq: seq, Token: tok})
				}
				var got [][]float32
				out, err := r.Forward(rows)
				if err != nil {
					t.Fatal(err)
				}
				for i := range rows {
					got = append(got, append([]float32(nil), out.Logits(i)...))
				}
				for _, tok := range prompt[24:] {
					out, err := r.Forward([]model.Row{{Seq: seq, Token: tok}})
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, append([]float32(nil), out.Logits(0)...))
				}
				worst := 0.0
				for pos := range want {
					lo, hi := math.Inf(1), math.Inf(-1)
					for _, f := range want[pos] {
						lo, hi = min(lo, float64(f)), max(hi, float64(f))
					}
					for j, f := range want[pos] {
						d := math.Abs(float64(got[pos][j])-float64(f)) / (hi - lo)
						if !(d <= tol) {
							t.Fatalf("position %d, token %d: %g, reference %g (%.2g of the spread %g, tolerance %g)",
								pos, j, got[pos][j], f, d, hi-lo, tol)
						}
						worst = max(worst, d)
					}
				}
				t.Logf("largest difference %.2g of the logit spread (tolerance %g)", worst, tol)
			})
		}
	}
}
