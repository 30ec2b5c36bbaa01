package cpu_test

import (
	"testing"

	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest/reftest"
)

// TestMatchesReference runs prompts through the CPU backend, as a prefill
// (every position's logits kept) and then decoding, and compares the
// logits at every position with model.Reference's (reftest.Run): the
// bundled models' float weights within float rounding (in both cache
// types), a synthetic Q8_0 and Q4_K model's within the activation
// quantization of their products (int8 and Q8_K blocks, as llama.cpp's).
func TestMatchesReference(t *testing.T) {
	reftest.Run(t, []reftest.Case{
		{Name: "stories260K", Model: reftest.Bundled("stories260K.gguf"), Tol: 1e-5},
		{Name: "arith", Model: reftest.Bundled("arith.gguf"), Tol: 1e-5},
		{Name: "synth-Q8_0", Model: reftest.Generate(kernels.Q8_0, nil), Tol: 0.02},
		{Name: "synth-Q4_K", Model: reftest.Generate(kernels.Q4_K, nil), Tol: 0.03},
	}, func(t *testing.T, m *model.Model, c model.CacheConfig) model.Backend {
		b, err := model.NewBackend("cpu", m, c) // cpu.New's Runner, as a model.Backend
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, nil)
}
