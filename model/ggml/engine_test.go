package ggml_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
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

// TestConcurrentSearchesGPUShapes runs arith problems eight at once on
// one engine (the server's batching across searches) on the CPU backend
// and on the ggml backend shaped as on a GPU (ggml.SetAttention's "gpu":
// slots padded, logits rows lazy, the searches' groups in one padded
// batch, the attention's sums made on the device): greedy's answers must be identical, beam-adaptive's the same
// but for near ties (most must agree), every block freed, and most steps
// must run the last step's graph again.
func TestConcurrentSearchesGPUShapes(t *testing.T) {
	ggml.SetDefaults(options(t))
	registerSpans()
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompts := arithPrompts(t, 16)
	if testing.Short() {
		prompts = prompts[:8]
	}
	for _, mode := range []engine.Mode{engine.Greedy, engine.BeamAdaptive} {
		run := func(backend string) ([]string, *engine.Engine) {
			e, err := engine.New(m, engine.WithBackend(backend), engine.WithMode(mode), engine.WithSeed(1),
				engine.WithKVType(kvcache.F32), engine.WithCacheTokens(8*m.Config.ContextLen))
			if err != nil {
				t.Fatal(err)
			}
			texts := make([]string, len(prompts))
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := w; i < len(prompts); i += 8 {
						res, err := e.Search(context.Background(), prompts[i], engine.Budget{MaxTokens: 48})
						if err != nil {
							t.Error(err)
							return
						}
						texts[i] = res.Text
					}
				})
			}
			wg.Wait()
			if n := e.Cache().Stats().BlocksInUse; n != 0 {
				t.Fatalf("%v on %s: %d blocks in use after the searches", mode, backend, n)
			}
			return texts, e
		}
		want, ec := run("cpu")
		ec.Close()
		nextSpans(spanSetup{way: "gpu", sums: true, split: -1})
		got, eg := run("ggml-spans")
		gs := eg.Backend().(*ggml.Backend).GraphStats()
		eg.Close()
		same := 0
		for i := range want {
			if got[i] == want[i] {
				same++
			} else if mode == engine.Greedy {
				t.Errorf("problem %d, greedy: ggml as on a GPU says %q, the CPU %q", i, got[i], want[i])
			}
		}
		t.Logf("%v: %d of %d answers the same; %d graphs built, %d run again, %.0f nodes a step", mode, same, len(want), gs.Built, gs.Reused, float64(gs.Nodes)/float64(gs.Built+gs.Reused))
		if same < len(want)*3/4 {
			t.Errorf("%v: only %d of %d answers the same on both backends", mode, same, len(want))
		}
		if gs.Reused < gs.Built {
			t.Errorf("%v: %d graphs built, only %d steps ran the last one again", mode, gs.Built, gs.Reused)
		}
	}
}
