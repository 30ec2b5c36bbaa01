package ggml_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestEngineMatchesCPU runs every mode of the engine on both backends, on
// stories260K and arith: greedy's tokens must be identical, and the other
// modes run to the end and free their blocks. (With float weights and an
// F32 cache the logits agree to some 1e-7 of their spread, so the other
// modes' trees agree too unless two choices tie that closely; the test
// logs how many did.)
func TestEngineMatchesCPU(t *testing.T) {
	ggml.SetDefaults(options(t))
	root := modeltest.RepoRoot()
	for _, c := range []struct{ name, file, prompt string }{
		{"stories260K", "stories260K.gguf", "Once upon a time"},
		{"arith", "arith.gguf", "Question: Ben has 31 cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\nAnswer:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := model.Load(filepath.Join(root, "bench", "models", c.file), "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			same := 0
			modes := engine.Modes()
			if testing.Short() {
				modes = []engine.Mode{engine.Greedy, engine.BeamAdaptive}
			}
			for _, mode := range modes {
				run := func(backend string) *engine.Result {
					e, err := engine.New(m, engine.WithBackend(backend), engine.WithMode(mode), engine.WithSeed(3),
						engine.WithKVType(kvcache.F32), engine.WithCacheTokens(4096))
					if err != nil {
						t.Fatal(err)
					}
					res, err := e.Search(context.Background(), c.prompt, engine.Budget{MaxTokens: 40})
					if err != nil {
						t.Fatalf("%v on %s: %v", mode, backend, err)
					}
					if n := e.Cache().Stats().BlocksInUse; n != 0 {
						t.Fatalf("%v on %s: %d blocks in use after the search", mode, backend, n)
					}
					return res
				}
				want, got := run("cpu"), run("ggml")
				if mode == engine.Greedy && !slices.Equal(got.Tokens, want.Tokens) {
					t.Fatalf("greedy on ggml: %q, on the CPU %q", got.Text, want.Text)
				}
				if got.Text == want.Text {
					same++
				} else {
					t.Logf("%v: ggml says %q, the CPU %q", mode, got.Text, want.Text)
				}
			}
			t.Logf("%d of %d modes gave the same text on both backends", same, len(modes))
		})
	}
}
