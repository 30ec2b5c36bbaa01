package cpu_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// logitsOf runs the tokens through a fresh cache and returns the last
// row's logits.
func logitsOf(t *testing.T, m *model.Model, toks []int) []float32 {
	t.Helper()
	kv, err := m.NewCache(64, kvcache.DefaultBlockSize, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	seq := kv.NewSeq()
	rows := make([]model.Row, len(toks))
	for i, tok := range toks {
		rows[i] = model.Row{Seq: seq, Token: tok, NoLogits: i < len(toks)-1}
	}
	out, err := r.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out.Logits(len(toks) - 1))
}

// A Q4_K_M file (Q4_K and Q6_K) runs on its own bytes: its matrices keep the file's size,
// and its logits agree with the same file re-quantized to Q8_0 (the two
// differ only in how the activations are quantized).
func TestQ4KFile(t *testing.T) {
	shape := synth.Shape{Name: "q4k-test", Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 300, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	path := filepath.Join(t.TempDir(), "q4k.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, shape, kernels.Q4_K, 3, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	native, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	if got := native.FileTypes(); !slices.Contains(got, "Q4_K") || !slices.Contains(got, "Q6_K") {
		t.Fatalf("file types %v", got)
	}
	nw, err := cpu.WeightsOf(native)
	if err != nil {
		t.Fatal(err)
	}
	l0 := nw.Layers[0]
	if l0.Wq.Type != kernels.Q4_K || l0.Wq.Bytes() != int64(256/8*256/256*1184) { // the q4k8 layout: 1184 bytes for 8 rows of a super-block
		t.Fatalf("Wq is %v of %d bytes", l0.Wq.Type, l0.Wq.Bytes())
	}
	// llama.cpp's Q4_K_M mix: attn_v and ffn_down in Q6_K in the last
	// eighth of the layers (here layer 1) and some others.
	if l1 := nw.Layers[1]; l0.Wv.Type != kernels.Q4_K || l1.Wv.Type != kernels.Q6_K || l1.W2.Type != kernels.Q6_K {
		t.Fatalf("Wv %v and %v, W2 %v: want Q4_K, Q6_K, Q6_K", l0.Wv.Type, l1.Wv.Type, l1.W2.Type)
	}
	requant, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer requant.Close()
	cpu.SetNativeQ4K(false)
	rw, err := cpu.WeightsOf(requant)
	cpu.SetNativeQ4K(true)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Layers[0].Wq.Type != kernels.Q8_0 {
		t.Fatalf("re-quantized Wq is %v", rw.Layers[0].Wq.Type)
	}
	toks := []int{1, 17, 42, 99, 7}
	a, b := logitsOf(t, native, toks), logitsOf(t, requant, toks)
	var diff, norm float64
	for i := range a {
		diff += math.Abs(float64(a[i] - b[i]))
		norm += math.Abs(float64(b[i]))
	}
	if diff > 0.05*norm {
		t.Errorf("native and re-quantized logits differ by %.3g of their size", diff/norm)
	}
	t.Logf("relative L1 difference %.2g", diff/norm)
}
