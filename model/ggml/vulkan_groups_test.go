package ggml_test

import (
	"os"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
)

// TestVulkanManyGroups reproduces the heap corruption seen on lavapipe in
// entropix-bench backends' server part, without the engine, the server or
// other backends: steps of 16 to 56 sequences that share no block (a
// group per sequence, as concurrent searches make), each sequence a
// prefill of about 40 positions and then three decoding steps of one row
// each. On ggml's CPU backend (which checks every get_rows and set_rows
// index) it passes; on lavapipe it aborts in glibc's malloc (or
// segfaults) within the first rounds, detected in lavapipe's threads.
// The number of groups is not the cause: the same sequences forked from
// one root block (one group) abort too. Narrowed since: it aborts with
// the attention, the mask, the KV writes and every layer switched off
// (tokens' embeddings, get_rows of the output rows, the norm, the output
// product and the lazy rows' set_rows alone abort in under a second, at
// steps that rebuild and reallocate the graph), and it needs the second
// get_rows fed by a small I32 input, whatever its indices; not lavapipe's
// threads (LP_NUM_THREADS=0 aborts too). It runs only with
// ENTROPIX_GGML_VULKAN_STRESS=1 (and the Vulkan tier's settings) until the
// cause is fixed, so that the Vulkan tier stays green;
// ENTROPIX_GGML_DEVICE=cpu runs it on the CPU.
func TestVulkanManyGroups(t *testing.T) {
	if os.Getenv("ENTROPIX_GGML_VULKAN_STRESS") == "" {
		t.Skip("skipped: the reproduction of the lavapipe crash runs with ENTROPIX_GGML_VULKAN_STRESS=1")
	}
	var o ggml.Options
	if os.Getenv("ENTROPIX_GGML_DEVICE") == "" {
		o = vulkanOptions(t)
	} else {
		o = options(t)
	}
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
		t.Logf("round %d: %d sequences, %d graphs built, %d reused", round, n, built, reused)
	}
	if n := p.Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks in use", n)
	}
}
