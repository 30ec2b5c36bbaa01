package ggml_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
)

// TestVulkan is the Vulkan tier: with ENTROPIX_GGML_VULKAN=1 and
// ENTROPIX_GGML_DIR naming the Vulkan package's libraries, it runs
// stories260K on the first Vulkan device (on a machine without a GPU,
// Mesa's lavapipe, which ggml-vulkan uses only with
// GGML_VK_VISIBLE_DEVICES=0) against model.Reference and against the CPU
// backend, with f16 tolerances: ggml-vulkan's products round to f16. The
// first run compiles the shaders (minutes on lavapipe); Mesa's shader
// cache makes later runs take seconds.
func TestVulkan(t *testing.T) {
	o := vulkanOptions(t)
	m := loadStories(t)
	newVK := func() *ggml.Backend {
		b, err := ggml.New(m, model.CacheConfig{Tokens: 256, BlockSize: 4, DType: kvcache.F16}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if !strings.EqualFold(b.DeviceName(), o.Device) {
			t.Fatalf("running on %s, asked for %s", b.DeviceName(), o.Device)
		}
		return b
	}

	// The reference: a prefill of 24 positions, then 8 decoding steps.
	prompt := make([]int, 32)
	for i := range prompt {
		prompt[i] = (7*i*i + 3*i + 1) % m.Config.Vocab
	}
	want, err := m.Reference(prompt)
	if err != nil {
		t.Fatal(err)
	}
	b := newVK()
	seq := b.Cache().NewSeq()
	var rows []model.Row
	for _, tok := range prompt[:24] {
		rows = append(rows, model.Row{Seq: seq, Token: tok})
	}
	out, err := b.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	check := func(pos int, got []float32) {
		d := spreadDiff(got, want[pos])
		if !(d <= 2e-3) {
			t.Fatalf("position %d: logits %.3g of the spread from the reference", pos, d)
		}
		worst = max(worst, d)
	}
	var want0 model.RowStats
	want0.Top, want0.TopLogits = make([]int32, ggml.DefaultStatsK), make([]float32, ggml.DefaultStatsK)
	zw := 0.0
	for i := range rows {
		check(i, out.Logits(i))
		// The statistics, from the device, against the row's.
		got := out.Stats(i)
		model.RowStatsOf(out.Logits(i), ggml.DefaultStatsK, &want0)
		if got == nil || got.Arg != want0.Arg || got.Max != want0.Max || got.Top[0] != want0.Top[0] || !(math.Abs(got.Z-want0.Z) <= 1e-4*want0.Z) {
			t.Fatalf("position %d: statistics %+v, from the row %+v", i, got, want0)
		}
		zw = max(zw, math.Abs(got.Z-want0.Z)/want0.Z)
	}
	t.Logf("on %s: the rows' statistics agree with theirs, Z within %.2g", o.Device, zw)
	for pos := 24; pos < len(prompt); pos++ {
		out, err := b.Forward([]model.Row{{Seq: seq, Token: prompt[pos]}})
		if err != nil {
			t.Fatal(err)
		}
		check(pos, out.Logits(0))
	}
	t.Logf("on %s: largest difference from the reference %.2g of the logit spread", o.Device, worst)

	// The tree (forks, copies on write, truncations, attention) against
	// the CPU backend.
	cb, err := model.NewBackend("cpu", m, model.CacheConfig{Tokens: 256, BlockSize: 4, DType: kvcache.F16})
	if err != nil {
		t.Fatal(err)
	}
	// As the backend chooses (here: spans in place, the branches in one
	// batch once they attend apart), every group its blocks gathered, the
	// branches attending one by one, the groups one by one, and every
	// step one batch.
	attn := []int{m.Config.Layers - 1}
	wl, wa := treeSteps(t, cb, m.Config.Vocab, attn)
	for _, way := range []string{"auto", "gather", "split", "groups", "gpu-batch-noflash", "flash", "gpu-batch"} {
		b := newVK()
		ggml.SetAttention(b, way)
		gl, ga := treeSteps(t, b, m.Config.Vocab, attn)
		lw, pw := 0.0, 0.0
		for i := range wl {
			lw = max(lw, spreadDiff(gl[i], wl[i]))
		}
		for i := range wa {
			for j := range wa[i].Probs {
				pw = max(pw, float64(abs32(ga[i].Probs[j]-wa[i].Probs[j])))
			}
		}
		if !(lw <= 2e-3) || !(pw <= 5e-3) {
			t.Fatalf("the tree on %s, attention %s: logits %.3g of the spread from the CPU backend's, attention probabilities %.3g", o.Device, way, lw, pw)
		}
		t.Logf("the tree on %s, attention %s: logits within %.2g of the spread of the CPU backend's, attention probabilities within %.2g", o.Device, way, lw, pw)
		// Every op ran on the device: a graph cut in pieces runs some on
		// the CPU, its tensors copied across each step.
		if gs := b.GraphStats(); gs.MaxSplits != 1 {
			t.Errorf("attention %s: a graph in %d pieces on %s and the CPU", way, gs.MaxSplits, o.Device)
		}
	}
	// The attention's sums on the device (the default on a GPU), against
	// the metrics of the CPU backend's attention.
	for _, way := range []string{"gpu-batch-noflash", "gpu-batch"} {
		b := newVK()
		ggml.SetAttention(b, way)
		ggml.SetAttentionSums(b, true)
		var got []policy.AttentionMetrics
		treeWalk(t, b, m.Config.Vocab, attn, func(out *model.Output, rows []model.Row) {
			got = keepSums(t, out, rows, len(attn), got)
		})
		if len(got) != len(wa) {
			t.Fatalf("attention %s: %d rows of sums, %d of attention", way, len(got), len(wa))
		}
		worst := 0.0
		for i, a := range wa {
			want, err := policy.MeasureAttention(policy.Attention{Heads: a.Heads, Len: a.Len, Scores: a.Scores, Probs: a.Probs})
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, metricsDiff(got[i], want))
		}
		if !(worst <= 0.02) {
			t.Fatalf("attention %s: the metrics of the sums on %s %.3g (relative) from the CPU backend's", way, o.Device, worst)
		}
		t.Logf("attention %s: the metrics of the sums on %s within %.2g (relative) of the CPU backend's", way, o.Device, worst)
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// vulkanOptions returns the test options (options) on the first Vulkan
// device, skipping the test unless ENTROPIX_GGML_VULKAN is set (the
// Vulkan tier) and failing it when there is no such device.
func vulkanOptions(t *testing.T) ggml.Options {
	t.Helper()
	if os.Getenv("ENTROPIX_GGML_VULKAN") == "" {
		t.Skip("skipped: the Vulkan tier runs with ENTROPIX_GGML_VULKAN=1")
	}
	o := options(t)
	o.Device = ""
	for _, d := range ggml.Devices() {
		if strings.HasPrefix(strings.ToLower(d.Name), "vulkan") {
			o.Device = d.Name
			break
		}
	}
	if o.Device == "" {
		t.Fatal("no Vulkan device: ENTROPIX_GGML_DIR must name the Vulkan package's libraries, and lavapipe needs GGML_VK_VISIBLE_DEVICES=0")
	}
	return o
}

// loadStories loads the bundled stories260K, closed at the end of the test.
func loadStories(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "stories260K.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestVulkanTooLarge checks that a tensor larger than the device holds as
// one (here a layer's keys, beyond lavapipe's 128 MiB binding) is an
// error at the start: ggml's scheduler aborts the process on a graph
// using one.
func TestVulkanTooLarge(t *testing.T) {
	o := vulkanOptions(t)
	m := loadStories(t)
	slots := 1<<30/(4*m.Config.KVDim()) + 1 // a layer's keys in F32: past 1 GiB
	b, err := ggml.New(m, model.CacheConfig{Tokens: slots, BlockSize: 16, DType: kvcache.F32}, o)
	if err == nil {
		b.Close()
		t.Skipf("%s holds a layer's keys of 1 GiB", o.Device)
	}
	if !strings.Contains(err.Error(), "cannot hold cache_k_l0") {
		t.Fatal(err)
	}
	t.Log(err)
}
