package ggml_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// small is a synthetic shape whose rows are whole Q4_K super-blocks
// (256), with grouped-query attention and an untied classifier.
var small = synth.Shape{Name: "small", Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2,
	Vocab: 512, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}

// qwen2 makes m a Qwen2: NeoX-style RoPE and q/k/v biases (random).
func qwen2(m *model.Model) *model.Model {
	c := m.Config
	c.Arch, c.RopeInterleaved, c.QKVBias = "qwen2", false, true
	r := rand.New(rand.NewPCG(9, 9))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 0.5
		}
		return v
	}
	for l := range m.Weights.Layers {
		lw := &m.Weights.Layers[l]
		lw.Bq, lw.Bk, lw.Bv = vec(c.QDim()), vec(c.KVDim()), vec(c.KVDim())
	}
	q, err := model.New(c, m.Weights, nil, "synth qwen2")
	if err != nil {
		panic(err)
	}
	return q
}

// ropeFactors gives m Llama-3.1's RoPE frequency factors.
func ropeFactors(m *model.Model) *model.Model {
	c := m.Config
	c.RopeFreqFactors = model.Llama3FreqFactors(c.HeadDim, c.RopeTheta, 8, 1, 4, 16)
	f, err := model.New(c, m.Weights, nil, "synth rope factors")
	if err != nil {
		panic(err)
	}
	return f
}

// TestMatchesReference runs a prompt through the ggml backend, as a
// prefill (every position's logits kept) and then decoding, and compares
// the logits at every position with model.Reference's.
func TestMatchesReference(t *testing.T) {
	root := modeltest.RepoRoot()
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
	type tc struct {
		name string
		m    func(t *testing.T) *model.Model
		tol  float64 // the largest logit difference, relative to the reference's logit spread
	}
	shared := func(name string) func(t *testing.T) *model.Model {
		return func(t *testing.T) *model.Model {
			d := modeltest.SharedDir()
			if d == "" {
				t.Skip("skipped: ../shared is absent")
			}
			return load(filepath.Join(d, "models", "task-models", name))(t)
		}
	}
	gen := func(dt kernels.DType, variant func(*model.Model) *model.Model) func(t *testing.T) *model.Model {
		return func(t *testing.T) *model.Model {
			m, err := synth.Generate(small, dt, 3)
			if err != nil {
				t.Fatal(err)
			}
			if variant != nil {
				m = variant(m)
			}
			return m
		}
	}
	for _, c := range []tc{
		{"stories260K", load(filepath.Join(root, "bench", "models", "stories260K.gguf")), 1e-4},
		{"arith", load(filepath.Join(root, "bench", "models", "arith.gguf")), 1e-4},
		{"arith-d40-seed2", shared("arith-d40-seed2.gguf"), 1e-4},
		{"arith-routes-d48", shared("arith-routes-d48.gguf"), 1e-4},
		{"synth-F32", gen(kernels.F32, nil), 1e-4},
		// Quantized products quantize their activations too, Q8_0's to
		// Q8_0 and the K-quants' to Q8_K, as the CPU backend's (see
		// TestMatchesCPU).
		{"synth-Q4_K", gen(kernels.Q4_K, nil), 0.03},
		{"synth-Q8_0", gen(kernels.Q8_0, nil), 0.02},
		{"synth-qwen2", gen(kernels.F32, qwen2), 1e-4},
		{"synth-rope-factors", gen(kernels.F32, ropeFactors), 1e-4},
	} {
		for _, dt := range []kvcache.ElemType{kvcache.F32, kvcache.F16} {
			if strings.HasPrefix(c.name, "synth") && dt == kvcache.F16 {
				continue // the file models check the F16 cache
			}
			if testing.Short() && strings.HasPrefix(c.name, "synth") && c.name != "synth-qwen2" {
				continue // -short (the race run) keeps the cases the reference is quick for
			}
			t.Run(fmt.Sprintf("%s/kv-%v", c.name, dt), func(t *testing.T) {
				options(t)
				m := c.m(t)
				tol := c.tol
				if dt == kvcache.F16 {
					tol = max(tol, 0.002)
				}
				prompt := make([]int, 0, 40)
				for i := range cap(prompt) {
					prompt = append(prompt, (7*i*i+3*i+1)%m.Config.Vocab)
				}
				want, err := m.Reference(prompt)
				if err != nil {
					t.Fatal(err)
				}
				b := newBackend(t, m, 64, 4, dt)
				seq := b.Cache().NewSeq()
				var rows []model.Row
				for _, tok := range prompt[:24] {
					rows = append(rows, model.Row{Seq: seq, Token: tok})
				}
				var got [][]float32
				out, err := b.Forward(rows)
				if err != nil {
					t.Fatal(err)
				}
				for i := range rows {
					got = append(got, append([]float32(nil), out.Logits(i)...))
				}
				for _, tok := range prompt[24:] {
					out, err := b.Forward([]model.Row{{Seq: seq, Token: tok}})
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, append([]float32(nil), out.Logits(0)...))
				}
				worst := 0.0
				for pos := range want {
					d := spreadDiff(got[pos], want[pos])
					if !(d <= tol) {
						t.Fatalf("position %d: logits %.3g of the spread from the reference (tolerance %g)", pos, d, tol)
					}
					worst = max(worst, d)
				}
				built, reused := b.Graphs()
				if reused == 0 {
					t.Errorf("no step reused the last one's graph (%d built)", built)
				}
				t.Logf("largest difference %.2g of the logit spread (tolerance %g); %d graphs built, %d reused", worst, tol, built, reused)
			})
		}
	}
}
