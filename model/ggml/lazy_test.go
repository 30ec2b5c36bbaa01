package ggml_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestLazyRows runs the device's store of logits rows (a GPU's way) on
// ggml's CPU device: each step's rows fetched on first use equal those
// read at once, a row of the step before stays readable after the next
// step (LogitsLater), a step with more rows than the store grows it, and
// the statistics do not need the rows. With restarts (Vulkan's way), the
// backend restarts when the store or the graph memory grows, and every
// row is the same.
func TestLazyRows(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) { lazyRows(t, restart) })
	}
}

func lazyRows(t *testing.T, restart bool) {
	options(t)
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	eager, lazy := newBackend(t, m, 2048, 4, kvcache.F32), newBackend(t, m, 2048, 4, kvcache.F32)
	ggml.SetLazyRows(lazy, true)
	ggml.SetRestartOnFree(lazy, restart)
	var last func() []float32
	var lastWant []float32
	for step, n := range []int{3, 1, 80, 5, 130, 2, 600, 3, 1} { // 80, 130 and 600 rows outgrow the store, 600 the graph memory too
		var re, rl []model.Row
		var seqs []*kvcache.Seq // eager's and lazy's, a pair per 200 rows (the context length is 256)
		var se, sl *kvcache.Seq
		for i := range n {
			if i%200 == 0 {
				se, sl = eager.Cache().NewSeq(), lazy.Cache().NewSeq()
				seqs = append(seqs, se, sl)
			}
			tok := (step*31 + i*7 + 1) % m.Config.Vocab
			re = append(re, model.Row{Seq: se, Token: tok, NoLogits: i%3 == 1})
			rl = append(rl, model.Row{Seq: sl, Token: tok, NoLogits: i%3 == 1})
		}
		oe, err := eager.Forward(re)
		if err != nil {
			t.Fatal(err)
		}
		ol, err := lazy.Forward(rl)
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && !slices.Equal(last(), lastWant) {
			t.Fatalf("step %d: the last step's row changed after this step", step)
		}
		for i := range rl {
			if ol.Stats(i) != nil && (ol.Stats(i).Arg != oe.Stats(i).Arg || ol.Stats(i).Z != oe.Stats(i).Z) {
				t.Fatalf("step %d row %d: statistics %+v, read at once %+v", step, i, *ol.Stats(i), *oe.Stats(i))
			}
		}
		for i := len(rl) - 1; i >= 0; i-- { // fetched out of order
			if !slices.Equal(ol.Logits(i), oe.Logits(i)) {
				t.Fatalf("step %d row %d: the fetched row differs from the row read at once", step, i)
			}
		}
		r := len(rl) - 1
		for rl[r].NoLogits {
			r--
		}
		last, lastWant = ol.LogitsLater(r), slices.Clone(oe.Logits(r))
		for k := 0; k < len(seqs); k += 2 {
			eager.Cache().Free(seqs[k])
			lazy.Cache().Free(seqs[k+1])
		}
	}
	if n := ggml.Restarts(lazy); (n > 0) != restart {
		t.Fatalf("%d restarts", n)
	}
	// A row first read after Close reads as zeros: nothing is left on the
	// device.
	out, err := lazy.Forward([]model.Row{{Seq: lazy.Cache().NewSeq(), Token: 1}})
	if err != nil {
		t.Fatal(err)
	}
	last = out.LogitsLater(0)
	lazy.Close()
	if row := last(); len(row) != m.Config.Vocab || slices.ContainsFunc(row, func(x float32) bool { return x != 0 }) {
		t.Fatal("a row fetched after Close is not zeros")
	}
	if err := lazy.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := lazy.Forward([]model.Row{{Seq: lazy.Cache().NewSeq(), Token: 1}}); err == nil {
		t.Fatal("Forward after Close did not fail")
	}
}

// TestLazyRowsEngine runs greedy and beam-adaptive searches with the
// rows on the device's store: the same text as the CPU backend's.
func TestLazyRowsEngine(t *testing.T) {
	ggml.SetDefaults(options(t))
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	model.RegisterBackend("ggml-lazy", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
		b, err := ggml.New(m, c, ggml.Defaults())
		if err == nil {
			ggml.SetLazyRows(b, true)
		}
		return b, err
	})
	prompt := "Question: Ben has 31 cards. He sells 4 cards. How many cards does Ben have now?\nAnswer:"
	for _, mode := range []engine.Mode{engine.Greedy, engine.BeamAdaptive, engine.Sample} {
		var texts []string
		for _, be := range []string{"cpu", "ggml-lazy"} {
			e, err := engine.New(m, engine.WithBackend(be), engine.WithMode(mode), engine.WithSeed(5), engine.WithKVType(kvcache.F32), engine.WithCacheTokens(4096))
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Search(context.Background(), prompt, engine.Budget{MaxTokens: 40})
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
			texts = append(texts, res.Text)
		}
		if texts[0] != texts[1] {
			t.Errorf("%v: the CPU backend says %q, ggml with lazy rows %q", mode, texts[0], texts[1])
		}
	}
}
