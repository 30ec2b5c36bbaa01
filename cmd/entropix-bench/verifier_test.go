package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// markedVerifier writes the model file src, marked as a verifier.
func markedVerifier(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := engine.MarkVerifier(&out, b, "Y", "N"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "verifier.gguf")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvalVerifier: eval -verifier names the verifier in the report and
// counts its rows; a verifier of another vocabulary is a usage error.
func TestEvalVerifier(t *testing.T) {
	arithModel := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	data := arithFile(t)
	base := []string{"eval", "-m", arithModel, "-task", "arith", "-data", data, "-modes", "greedy,self-consistency,beam-adaptive",
		"-budgets", "2x", "-no-speed", "-no-timings"}
	code, _, errs := runCmd(t, append(base, "-verifier", markedVerifier(t, modeltest.BundledStories260K()))...)
	if code != exitUsage || !strings.Contains(errs, "vocabulary") {
		t.Errorf("a stories260K verifier: exit %d, %s", code, errs)
	}
	code, out, errs := runCmd(t, append(base, "-verifier", markedVerifier(t, arithModel))...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "Verifier: ") || !strings.Contains(out, "coverage") {
		t.Errorf("the report does not name its verifier:\n%s", out)
	}
}

// TestTrainVerifier runs train-verifier end to end on three problems (as
// training and test problems) for two steps: it writes a verifier that
// loads, fits the task model, and reports its calibration.
func TestTrainVerifier(t *testing.T) {
	arithModel := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	data := arithFile(t)
	dir := t.TempDir()
	out, svg := filepath.Join(dir, "v.gguf"), filepath.Join(dir, "rel.svg")
	args := []string{"train-verifier", "-m", arithModel, "-data", data, "-test", data, "-test-from", "0", "-test-n", "3", "-n", "3",
		"-steps", "2", "-batch", "4", "-rows", "276", "-samples", "2", "-o", out, "-reliability-svg", svg, "-cache", filepath.Join(dir, "cache")}
	code, stdout, errs := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "verdict accuracy") || !strings.Contains(stdout, "| p(right) |") {
		t.Errorf("no calibration report:\n%s", stdout)
	}
	v, err := engine.LoadVerifier(out)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Model().Close()
	for _, p := range []string{svg, filepath.Join(dir, "cache", "train-paths.json.gz")} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	// A second run reads the cached answers; with -head (and no steps) the
	// verifier weighs in its model's log-probability of the answer.
	args = append(args, "-head", "-steps", "0", "-base", arithModel)
	if code, _, errs = runCmd(t, args...); code != exitOK || !strings.Contains(errs, "read from") || !strings.Contains(errs, "head fitted") {
		t.Errorf("second run: exit %d: %s", code, errs)
	}
	vh, err := engine.LoadVerifier(out)
	if err != nil {
		t.Fatal(err)
	}
	defer vh.Model().Close()
	if vh.Head() == nil {
		t.Error("-head wrote no head")
	}
	if code, _, errs := runCmd(t, "train-verifier", "-steps", "0", "-o", out); code != exitUsage {
		t.Errorf("-steps 0 without -head: exit %d, %s", code, errs)
	}
}
