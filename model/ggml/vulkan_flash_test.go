package ggml_test

import (
	"os"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// TestVulkanFlashCopies reproduces why flash attention is off by
// default: on ggml-vulkan (lavapipe, ggml 0.25.1) a step whose keys are
// copied on write (4 forks of a sequence ending mid-block) and which
// attends with ggml_flash_attn_ext corrupted the heap (glibc's "double
// free or corruption", or a segmentation fault, in 4 of 5 runs), with
// ggml-vulkan's reordering of the graph on; with
// GGML_VK_DISABLE_GRAPH_OPTIMIZE=1, without the copies, or without
// flash attention it passed. Gated: ENTROPIX_GGML_VULKAN_FLASH=1 (with
// the Vulkan tier's variables); it may crash the test binary.
func TestVulkanFlashCopies(t *testing.T) {
	if os.Getenv("ENTROPIX_GGML_VULKAN_FLASH") == "" {
		t.Skip("skipped: flash attention's copy-on-write crash on Vulkan is reproduced with ENTROPIX_GGML_VULKAN_FLASH=1")
	}
	o := vulkanOptions(t)
	o.FlashAttn = ggml.FlashOn
	sh, err := synth.Lookup("stories15M")
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.Generate(sh, kernels.Q8_0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for iter := range 6 {
		b, err := ggml.New(m, model.CacheConfig{Tokens: 104, BlockSize: 16, DType: kvcache.F16}, o)
		if err != nil {
			t.Fatal(err)
		}
		p := b.Cache()
		seq := p.NewSeq()
		var rows []model.Row
		for i := range 32 {
			rows = append(rows, model.Row{Seq: seq, Token: (i*7 + 3) % m.Config.Vocab})
		}
		if _, err := b.Forward(rows); err != nil {
			t.Fatal(err)
		}
		for i := range 8 { // 40 positions: the third block half full
			if _, err := b.Forward([]model.Row{{Seq: seq, Token: i + 5}}); err != nil {
				t.Fatal(err)
			}
		}
		seqs := []*kvcache.Seq{seq, p.Fork(seq)}
		for step := range 2 {
			rows = rows[:0]
			for j, s := range seqs {
				rows = append(rows, model.Row{Seq: s, Token: 10 + j + step})
			}
			if _, err := b.Forward(rows); err != nil { // the first copies the fork's half block
				t.Fatal(err)
			}
		}
		b.Close()
		t.Logf("run %d survived", iter)
	}
}
