package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// The "broken" backend cannot be made, as a GPU backend without its
// device.
func init() {
	model.RegisterBackend("broken", func(*model.Model, model.CacheConfig) (model.Backend, error) {
		return nil, errors.New("no such device")
	})
}

// TestBackendsTiny runs the backend check, the CPU against itself, on a
// tiny generated model: the outputs agree exactly, every timing is there,
// and the JSON holds what the markdown shows.
func TestBackendsTiny(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "check.json")
	code, out, errs := runCmd(t, "backends", "-a", "cpu", "-b", "cpu", "-shape", "stories260K", "-dtype", "q8_0", "-quick",
		"-timings", "a,b", "-branches", "1,4", "-server-time", "150ms", "-clients", "4", "-bandwidth", "10", "-keep", dir, "-json", jsonPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"# Backend check: cpu against cpu", "## stories260K Q8_0", "| prefill | 32 | 0 | 0 |",
		"all 16 tokens identical", "| 4-branch step (forks of a 64-token prefix) |", "of 10 GB/s", "server, 4 concurrent clients, against 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stories260K-q8_0-seed1.gguf")); err != nil {
		t.Errorf("-keep: %v", err)
	}
	rep, b := readBackendsReport(t, jsonPath)
	if len(rep.Models) != 1 || rep.Machine.Cores == 0 {
		t.Fatalf("JSON: %s", b)
	}
	mr := rep.Models[0]
	if mr.Agreement == nil || mr.Agreement.Greedy.Same != 16 || len(mr.Timings) != 1 || mr.Timings[0].Server == nil || mr.Traffic.WeightBytes == 0 {
		t.Errorf("JSON model: %s", b)
	}
	if s := mr.Timings[0].Server; s.One.Requests == 0 || s.Many.Requests == 0 || s.Many.Clients != 4 || s.Ratio <= 0 {
		t.Errorf("server: %+v", s)
	}

	// -render prints the same markdown from the JSON.
	code, rendered, errs := runCmd(t, "backends", "-render", jsonPath)
	if code != exitOK || rendered != out {
		t.Errorf("-render: exit %d: %s\n%s\nwant\n%s", code, errs, rendered, out)
	}
	if code, _, _ := runCmd(t, "backends", "-render", filepath.Join(dir, "stories260K-q8_0-seed1.gguf")); code != exitFailure {
		t.Errorf("-render of a GGUF file: exit %d", code)
	}

	// The model kept by -keep is reused, and -m takes a file.
	code, out, errs = runCmd(t, "backends", "-b", "cpu", "-m", filepath.Join(dir, "stories260K-q8_0-seed1.gguf"), "-quick", "-timings", "none")
	if code != exitOK || !strings.Contains(out, "## stories260K-q8_0-seed1.gguf") || strings.Contains(out, "decode, 1 row") {
		t.Errorf("-m, -timings none: exit %d: %s\n%s", code, errs, out)
	}
}

// TestBackendsBroken checks that a backend that cannot be made is
// reported, the reference still timed, and the exit status says so.
func TestBackendsBroken(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "check.json")
	code, out, errs := runCmd(t, "backends", "-b", "broken", "-shape", "stories260K", "-dtype", "q8_0", "-quick",
		"-timings", "a,b", "-clients", "0", "-json", jsonPath)
	if code != exitFailure || !strings.Contains(errs, "no such device") {
		t.Errorf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Agreement not measured: bench: backend broken: no such device", "| measure | cpu | broken |", "- broken: no such device"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(jsonPath); err != nil || !strings.Contains(string(b), "no such device") {
		t.Errorf("JSON: %v: %s", err, b)
	}
}

// TestBackendsGGML checks ggml's CPU device against the CPU backend, when
// ggml's libraries are there (ENTROPIX_GGML_DIR, or model/ggml/getlibs.sh's
// .ggml/cpu): the two agree to quantization noise and choose the same
// greedy tokens.
func TestBackendsGGML(t *testing.T) {
	dir := os.Getenv("ENTROPIX_GGML_DIR")
	if dir == "" {
		dir = filepath.Join(modeltest.RepoRoot(), ".ggml", "cpu")
	}
	if _, err := os.Stat(filepath.Join(dir, "libggml-base.so")); err != nil {
		t.Skipf("skipped: no ggml libraries in %s (model/ggml/getlibs.sh cpu)", dir)
	}
	jsonPath := filepath.Join(t.TempDir(), "check.json")
	code, out, errs := runCmd(t, "backends", "-b", "ggml", "-ggml-dir", dir, "-device", "cpu", "-ggml-threads", "1", "-shape", "stories260K",
		"-dtype", "q8_0", "-quick", "-timings", "none", "-json", jsonPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "- ggml devices: CPU (") || !strings.Contains(out, "all 16 tokens identical") {
		t.Errorf("output:\n%s", out)
	}
	rep, _ := readBackendsReport(t, jsonPath)
	for _, p := range rep.Models[0].Agreement.Phases {
		if p.MaxRel > 0.05 || p.Argmax < 0.9 || p.Rows == 0 {
			t.Errorf("%s: %+v", p.Phase, p)
		}
	}
}

func TestBackendsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-b", "no-such-backend"},
		{"-b", "cpu", "-timings", "c"},
		{"-b", "cpu", "-dtype", "q3"},
		{"-b", "cpu", "-shape", "nope"},
		{"-b", "cpu", "-branches", "0"},
		{"-b", "cpu", "-kv", "f8"},
		{"-b", "cpu", "-json", filepath.Join(t.TempDir(), "no", "such", "dir", "x.json")},
		{"-b", "cpu", "extra"},
	} {
		code, _, errs := runCmd(t, append([]string{"backends"}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
	if code, _, errs := runCmd(t, "backends", "-h"); code != exitOK || !strings.Contains(errs, "registered: broken, cpu") {
		t.Errorf("-h: exit %d: %s", code, errs)
	}
}

// readBackendsReport reads the JSON report at path, and returns it with its
// bytes.
func readBackendsReport(t *testing.T, path string) (backendsReport, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep backendsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, b
}
