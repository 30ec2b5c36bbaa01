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

// A Q8_0 file is resident once while it loads and the CPU converts its
// weights (cpu.WeightsOf, which the first backend on a model runs), and
// after: the panels take the file's bytes, and each piece of the mapping
// is released once unpacked (it once stayed resident beside them, twice
// the file's size). The peak resident set during the load and the
// conversion (VmHWM, reset before them) grows by
// at most 1.1 times the file's size and 8 MiB (the runtime's and the other
// tests' stray pages: 3-6 MB here, against 47 MB more for the doubled
// residency).
func TestQ8FileResidentOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and loads a 40 MB model")
	}
	shape := synth.Shape{Name: "q8-rss", Dim: 1024, HiddenDim: 2816, Layers: 3, Heads: 8, KVHeads: 4,
		Vocab: 4000, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	path := filepath.Join(t.TempDir(), "q8.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, shape, kernels.Q8_0, 7, nil); err != nil {
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
	now := procStatus(t, "VmRSS", "VmHWM", "RssFile")
	if l := w.Layers[0]; l.Wq.Type != kernels.Q8_0 || l.W1.Type != kernels.Q8_0 {
		t.Fatalf("weights converted to %v, %v", l.Wq.Type, l.W1.Type)
	}
	grew, peak := now[0]-before, now[1]-before
	t.Logf("file %.1f MB: resident +%.1f MB after the load, peak +%.1f MB, file pages %.1f MB",
		float64(size)/1e6, float64(grew)/1e6, float64(peak)/1e6, float64(now[2])/1e6)
	if limit := size + size/10 + 8<<20; peak > limit || grew > limit {
		t.Errorf("loading a %d-byte Q8_0 file grew the resident set by %d bytes (peak %d), more than 1.1 times the file and 8 MiB", size, grew, peak)
	}
	runtime.KeepAlive(m)
}
