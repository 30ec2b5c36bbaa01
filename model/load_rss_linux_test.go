package model_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// procStatus returns the named fields of /proc/self/status in bytes.
func procStatus(t *testing.T, keys ...string) []int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == k+":" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				out[i], found = kb<<10, true
			}
		}
		if !found {
			t.Skipf("no %s in /proc/self/status", k)
		}
	}
	return out
}

// A model file is resident once while it loads and the CPU converts its
// weights (cpu.WeightsOf, which the first backend on a model runs), and
// after, whatever its weight type: the converted matrices take about the
// file's bytes (Q4_K and Q5_K 2-3% more: their scales a byte each), each
// piece of the mapping is released once copied, and the float types are
// used in place, the mapping's pages. The peak resident set during the
// load, the conversion and one product with every matrix (which brings
// in every page of the weights, wherever they lie; VmHWM, reset before)
// grows by at most 1.1 times the file's size and 8 MiB (the runtime's and
// the other tests' stray pages: 3-6 MB here). It once was twice the
// file's size for Q8_0 (the mapping stayed resident beside the panels),
// and for F16 and BF16 (widened to float32).
func TestFileResidentOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and loads models of 24-77 MB")
	}
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.F16, kernels.BF16, kernels.F32, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.Q4_0} {
		t.Run(dt.String(), func(t *testing.T) { testResidentOnce(t, dt) })
	}
}

func testResidentOnce(t *testing.T, dt kernels.DType) {
	shape := synth.Shape{Name: "rss", Dim: 1024, HiddenDim: 2816, Layers: 3, Heads: 8, KVHeads: 4,
		Vocab: 4000, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	if dt == kernels.F32 || dt == kernels.F16 || dt == kernels.BF16 {
		shape.Dim, shape.HiddenDim, shape.Layers = 768, 2048, 2 // 38-77 MB
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, shape, dt, 7, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()
	runtime.GC()
	debug.FreeOSMemory()
	// Writing 5 to clear_refs resets the peak (VmHWM) to the current set.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skip("cannot reset the peak resident set:", err)
	}
	before := procStatus(t, "VmRSS")[0]
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, err := cpu.WeightsOf(m)
	if err != nil {
		t.Fatal(err)
	}
	if l := w.Layers[0]; l.Wq.Type != dt || l.W1.Type != dt {
		t.Fatalf("weights converted to %v, %v", l.Wq.Type, l.W1.Type)
	}
	mats := []*kernels.Mat{w.TokenEmbd, w.Output}
	for _, l := range w.Layers {
		mats = append(mats, l.Wq, l.Wk, l.Wv, l.Wo, l.W1, l.W2, l.W3)
	}
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for _, mat := range mats {
		mat.MatMul(make([]float32, mat.Rows), x[:mat.Cols], 1)
	}
	now := procStatus(t, "VmRSS", "VmHWM", "RssFile")
	grew, peak := now[0]-before, now[1]-before
	t.Logf("%v file %.1f MB: resident +%.1f MB after the load and a product with each matrix, peak +%.1f MB, file pages %.1f MB",
		dt, float64(size)/1e6, float64(grew)/1e6, float64(peak)/1e6, float64(now[2])/1e6)
	if limit := size + size/10 + 8<<20; peak > limit || grew > limit {
		t.Errorf("loading a %d-byte %v file grew the resident set by %d bytes (peak %d), more than 1.1 times the file and 8 MiB", size, dt, grew, peak)
	}
	runtime.KeepAlive(m)
}
