package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// markedVerifier writes the model file src, marked as a verifier, into a
// temporary folder and returns its path.
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

// TestVerifierFlag: a verifier of another vocabulary, or a file that is
// not a verifier, is one clear line and exit code 2; a fitting one judges
// beam-adaptive's paths, its rows within the budget.
func TestVerifierFlag(t *testing.T) {
	root := modeltest.RepoRoot()
	arithModel := filepath.Join(root, "bench", "models", "arith.gguf")
	prompt := `Question: Hal has 82 toys. He gets 30 toys from Cal. How many toys does Hal have now?\nAnswer:`
	for _, c := range []struct{ verifier, want string }{
		{markedVerifier(t, modeltest.BundledStories260K()), "vocabulary"},
		{arithModel, "not a verifier"},
		{filepath.Join(t.TempDir(), "missing.gguf"), "--verifier"},
	} {
		code, _, errs := runCLI("-m", arithModel, "--verifier", c.verifier, "-p", prompt, "-n", "16")
		if code != 2 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "--verifier") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("--verifier %s: exit %d, stderr %q; want 2 and one line about %q", c.verifier, code, errs, c.want)
		}
	}
	out := filepath.Join(t.TempDir(), "out.json")
	code, _, errs := runCLI("-m", arithModel, "--verifier", markedVerifier(t, arithModel), "-p", prompt, "-n", "96",
		"--budget-rows", "400", "--json", out)
	if code != 0 {
		t.Fatalf("a fitting verifier: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Result struct {
			Stats engine.Stats  `json:"stats"`
			Paths []engine.Path `json:"paths"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, p := range doc.Result.Paths {
		if p.Verified > 0 && p.Verified < 1 {
			judged++
		}
	}
	if judged == 0 || doc.Result.Stats.Rows > 400 {
		t.Errorf("%d of %d paths judged, %d rows of 400", judged, len(doc.Result.Paths), doc.Result.Stats.Rows)
	}
}
