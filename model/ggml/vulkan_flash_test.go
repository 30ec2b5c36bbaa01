package ggml_test

import (
	"os"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// TestVulkanFlashCopies runs flash attention on lavapipe across a copy
// on write (a fork of a sequence ending mid-block, after single-row
// steps), against the same steps without flash attention. Without the
// backend's restart before every graph (restart.go) this corrupted the
// heap in 4 runs of 5 (glibc's "double free or corruption", or a
// segmentation fault): ENTROPIX_GGML_VULKAN_FLASH_CRASH=1 runs it so, to
// reproduce that, and may crash the test binary.
func TestVulkanFlashCopies(t *testing.T) {
	o := vulkanOptions(t)
	crash := os.Getenv("ENTROPIX_GGML_VULKAN_FLASH_CRASH") != ""
	sh, err := synth.Lookup("stories15M")
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.Generate(sh, kernels.Q8_0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// steps runs the steps, returning the last one's logits rows.
	steps := func(flash string) (logits [][]float32, restarts int) {
		o.FlashAttn = flash
		b, err := ggml.New(m, model.CacheConfig{Tokens: 104, BlockSize: 16, DType: kvcache.F16}, o)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if crash {
			ggml.SetLavapipe(b, false)
		}
		p := b.Cache()
		seq := p.NewSeq()
		var rows []model.Row
		for i := range 32 {
			rows = append(rows, model.Row{Seq: seq, Token: (i*7 + 3) % m.Config.Vocab, NoLogits: i < 31})
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
			out, err := b.Forward(rows) // the first copies the fork's half block
			if err != nil {
				t.Fatal(err)
			}
			if step == 1 {
				for i := range rows {
					logits = append(logits, slices.Clone(out.Logits(i)))
				}
			}
		}
		return logits, ggml.Restarts(b)
	}
	want, _ := steps(ggml.FlashOff)
	for run := range 2 {
		got, restarts := steps(ggml.FlashOn)
		for i := range want {
			if d := spreadDiff(got[i], want[i]); !(d <= 2e-3) {
				t.Fatalf("run %d, row %d: flash attention's logits %.3g of the spread from those without", run, i, d)
			}
		}
		if restarts == 0 && !crash {
			t.Fatalf("run %d: no restart of the backend under flash attention on %s", run, o.Device)
		}
		t.Logf("run %d: flash attention's logits as without it, %d restarts", run, restarts)
	}
}
