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
