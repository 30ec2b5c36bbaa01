package ggml_test

import (
	"math/rand/v2"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest/reftest"
)

// small is the shared comparison's synthetic shape (reftest.Small).
var small = reftest.Small

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
// the logits at every position with model.Reference's (reftest.Run); the
// decoding steps must reuse the last step's graph.
func TestMatchesReference(t *testing.T) {
	reftest.Run(t, []reftest.Case{
		{Name: "stories260K", Model: reftest.Bundled("stories260K.gguf"), Tol: 1e-4},
		{Name: "arith", Model: reftest.Bundled("arith.gguf"), Tol: 1e-4},
		{Name: "arith-d40-seed2", Model: reftest.Shared("arith-d40-seed2.gguf"), Tol: 1e-4},
		{Name: "arith-routes-d48", Model: reftest.Shared("arith-routes-d48.gguf"), Tol: 1e-4},
		{Name: "synth-F32", Model: reftest.Generate(kernels.F32, nil), Tol: 1e-4},
		// Quantized products quantize their activations too, Q8_0's to
		// Q8_0 and the K-quants' to Q8_K, as the CPU backend's (see
		// TestMatchesCPU).
		{Name: "synth-Q4_K", Model: reftest.Generate(kernels.Q4_K, nil), Tol: 0.03},
		{Name: "synth-Q8_0", Model: reftest.Generate(kernels.Q8_0, nil), Tol: 0.02},
		{Name: "synth-qwen2", Model: reftest.Generate(kernels.F32, qwen2), Tol: 1e-4, Short: true},
		{Name: "synth-rope-factors", Model: reftest.Generate(kernels.F32, ropeFactors), Tol: 1e-4},
	}, func(t *testing.T, m *model.Model, c model.CacheConfig) model.Backend {
		return newBackend(t, m, c.Tokens, c.BlockSize, c.DType)
	}, func(t *testing.T, b model.Backend) {
		built, reused := b.(*ggml.Backend).Graphs()
		if reused == 0 {
			t.Errorf("no step reused the last one's graph (%d built)", built)
		}
		t.Logf("%d graphs built, %d reused", built, reused)
	})
}
