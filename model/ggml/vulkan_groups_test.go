package ggml_test

import (
	"os"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
)

// TestVulkanManyGroups is the stress test of the heap corruption once
// seen on lavapipe in entropix-bench backends' server part, without the
// engine, the server or other backends: steps of 16 to 56 sequences that
// share no block (a group per sequence, as concurrent searches make), each
// sequence a prefill of about 40 positions and then three decoding steps
// of one row each, the prefills in one graph (no chunks). Its cause:
// lavapipe binds every binding of ggml-vulkan's descriptor sets, those a
// kernel leaves to buffers freed since too, and the scheduler freed its
// compute buffer when a step outgrew it (restart.go); it aborted in
// glibc's malloc, or segfaulted in lavapipe's thread, within the first
// rounds. Now the backend restarts instead. It takes minutes on lavapipe,
// so it runs only with ENTROPIX_GGML_VULKAN_STRESS=1 (and the Vulkan
// tier's settings); TestVulkanGrowth is the tier's test of the same cause.
// ENTROPIX_GGML_DEVICE=cpu runs it on the CPU.
func TestVulkanManyGroups(t *testing.T) {
	if os.Getenv("ENTROPIX_GGML_VULKAN_STRESS") == "" {
		t.Skip("skipped: the Vulkan stress test runs with ENTROPIX_GGML_VULKAN_STRESS=1")
	}
	var o ggml.Options
	if os.Getenv("ENTROPIX_GGML_DEVICE") == "" {
		o = vulkanOptions(t)
	} else {
		o = options(t)
	}
	o.Chunk = 4096 // each step one graph: the largest outgrow the graph memory
	m := loadStories(t)
	b, err := ggml.New(m, model.CacheConfig{Tokens: 8192, BlockSize: 16, DType: kvcache.F16}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := b.Cache()
	for round := range 6 {
		var seqs []*kvcache.Seq
		var rows []model.Row
		n := 16 + 8*round
		for s := range n {
			seq := p.NewSeq()
			seqs = append(seqs, seq)
			for i := range 40 + s%7 {
				rows = append(rows, model.Row{Seq: seq, Token: (7*i + s) % m.Config.Vocab, NoLogits: i < 39})
			}
		}
		if _, err := b.Forward(rows); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			rows = rows[:0]
			for s, seq := range seqs {
				rows = append(rows, model.Row{Seq: seq, Token: s % m.Config.Vocab})
			}
			out, err := b.Forward(rows)
			if err != nil {
				t.Fatal(err)
			}
			_ = out.Logits(len(rows) - 1)
		}
		for _, s := range seqs {
			p.Free(s)
		}
		built, reused := b.Graphs()
		t.Logf("round %d: %d sequences, %d graphs built, %d reused, %d restarts", round, n, built, reused, ggml.Restarts(b))
	}
	if n := p.Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks in use", n)
	}
}

// TestVulkanGrowth is the Vulkan tier's test of the lavapipe crash's
// cause: steps that outgrow the graph memory after graphs ran (prefills,
// each larger than any before, between decoding steps of every sequence),
// so that the scheduler frees the memory earlier graphs ran in. The
// backend restarts instead of running on with descriptor sets bound to
// freed memory (restart.go), and the first sequence's logits still match
// the reference. Without the restarts it aborts on lavapipe in glibc's
// malloc, most runs.
func TestVulkanGrowth(t *testing.T) {
	o := vulkanOptions(t)
	m := loadStories(t)
	b, err := ggml.New(m, model.CacheConfig{Tokens: 512, BlockSize: 16, DType: kvcache.F16}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := b.Cache()
	var seqs []*kvcache.Seq
	var toks [][]int
	worst := 0.0
	for round, n := range []int{8, 150, 300} { // a prefill of n rows, then two decoding steps
		var rows []model.Row
		seq := p.NewSeq()
		seqs, toks = append(seqs, seq), append(toks, nil)
		for i := range n {
			tok := (7*i + 3*round) % m.Config.Vocab
			rows = append(rows, model.Row{Seq: seq, Token: tok, NoLogits: i < n-1})
			toks[round] = append(toks[round], tok)
		}
		if _, err := b.Forward(rows); err != nil {
			t.Fatal(err)
		}
		for step := range 2 {
			rows = rows[:0]
			for s, seq := range seqs {
				tok := (5*s + step + round) % m.Config.Vocab
				rows = append(rows, model.Row{Seq: seq, Token: tok})
				toks[s] = append(toks[s], tok)
			}
			out, err := b.Forward(rows)
			if err != nil {
				t.Fatal(err)
			}
			if step == 1 { // the first sequence against the reference
				want, err := m.Reference(toks[0])
				if err != nil {
					t.Fatal(err)
				}
				d := spreadDiff(out.Logits(0), want[len(want)-1])
				if !(d <= 2e-3) {
					t.Fatalf("round %d: logits %.3g of the spread from the reference", round, d)
				}
				worst = max(worst, d)
			}
		}
	}
	built, reused := b.Graphs()
	t.Logf("%d graphs built, %d reused, %d restarts; logits within %.2g of the spread from the reference", built, reused, ggml.Restarts(b), worst)
	if ggml.Restarts(b) == 0 {
		t.Fatal("no restart: the steps did not outgrow the graph memory")
	}
}
