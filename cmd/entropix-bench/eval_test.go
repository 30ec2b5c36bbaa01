package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// needShared skips when ../shared (the default model) is absent.
func needShared(t *testing.T) {
	t.Helper()
	if findShared() == "" {
		t.Skip("../shared (stories260K, GSM8K) is absent next to the repository; skipping")
	}
}

// tinyArgs make eval take well under a second: two items a task, eight
// tokens, budgets of 1x and 3x, no speed section.
var tinyArgs = []string{"-limit", "2", "-max-tokens", "8", "-budgets", "1x,3x", "-no-speed"}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestEvalTiny(t *testing.T) {
	needShared(t)
	dir := t.TempDir()
	csvPath, jsonPath, svgPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	args := append([]string{"eval", "-no-timings", "-csv", csvPath, "-json", jsonPath, "-svg", svgPath}, tinyArgs...)
	code, out, errs := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"# Quality versus compute", "## Task: stories", "## Task: name-recall",
		"### 8 rows per item", "### 24 rows per item", "| beam-adaptive | 3 |", "### Where branching did not help", "| accuracy |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " ms |") || strings.Contains(out, "# Speed") {
		t.Errorf("-no-timings output holds timings:\n%s", out)
	}
	// Determinism: the same seed gives the same report.
	_, again, _ := runCmd(t, args...)
	if again != out {
		t.Errorf("a second run differs:\n%s\n----\n%s", out, again)
	}
	rows, err := readCSV(csvPath)
	if err != nil || len(rows) != 1+2*2*6 {
		t.Errorf("CSV: %d rows, %v", len(rows), err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Tasks []struct {
			Task    string            `json:"task"`
			Outputs []json.RawMessage `json:"outputs"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Tasks) != 2 || len(rep.Tasks[0].Outputs) != 2*2*6 {
		t.Errorf("JSON: %v, %+v", err, rep)
	}
	if b, err := os.ReadFile(svgPath); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("SVG: %v", err)
	}
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return csv.NewReader(f).ReadAll()
}

func TestEvalGSM8KAndFlags(t *testing.T) {
	needShared(t)
	code, out, errs := runCmd(t, append([]string{"eval", "-task", "gsm8k", "-modes", "greedy,beam-adaptive", "-thresholds", "smollm2",
		"-template", "Q: {{.Question}}\nA:"}, tinyArgs...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"## Task: gsm8k", "thresholds smollm2", "| greedy | 1 |", "(0/2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| sample |") {
		t.Error("-modes greedy,beam-adaptive ran sample")
	}
}

func TestEvalUsage(t *testing.T) {
	for _, args := range [][]string{
		{"eval", "-task", "poetry"},
		{"eval", "-modes", "greedy,magic"},
		{"eval", "-budgets", "4y"},
		{"eval", "-budgets", "0"},
		{"eval", "-max-width", "65"},
		{"eval", "-kv", "q4"},
		{"eval", "-max-tokens", "-1"},
		{"eval", "-thresholds", "/nonexistent.json"},
		{"eval", "-template", "{{.Nope", "-task", "gsm8k"},
		{"eval", "extra"},
		{"eval", "-nosuchflag"},
	} {
		code, _, errs := runCmd(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errs)
		}
	}
	if code, _, _ := runCmd(t, "eval", "-h"); code != exitOK {
		t.Errorf("eval -h: exit %d", code)
	}
	if code, _, errs := runCmd(t, append([]string{"eval", "-m", "/nonexistent/model.bin"}, tinyArgs...)...); code != exitFailure {
		t.Errorf("absent model: exit %d (%s)", code, errs)
	}
	dir := t.TempDir()
	if code, _, errs := runCmd(t, append([]string{"eval", "-m", modeltest.Path(t, modeltest.Stories260KBin), "-z", modeltest.Path(t, modeltest.Tok512),
		"-csv", filepath.Join(dir, "no", "such", "dir.csv")}, tinyArgs...)...); code != exitFailure {
		t.Errorf("unwritable CSV: exit %d (%s)", code, errs)
	}
}

func TestParseBudgets(t *testing.T) {
	s, err := parseBudgets("1x, 256,4x")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.rows(64); len(got) != 3 || got[0] != 64 || got[1] != 256 || got[2] != 256 {
		t.Errorf("rows(64) = %v", got)
	}
	for _, bad := range []string{"", "x", "-1x", "1.5x", "2X", "99999999"} {
		if _, err := parseBudgets(bad); err == nil {
			t.Errorf("parseBudgets(%q): no error", bad)
		}
	}
}

func TestSameModel(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	gguf := modeltest.Path(t, modeltest.Stories260KGGUF)
	for _, c := range []struct {
		path string
		gguf bool
		want string
	}{
		{bin, false, bin}, {bin, true, gguf}, {gguf, true, gguf}, {gguf, false, bin},
		{modeltest.Path(t, modeltest.Tok512), true, ""},
		{"/nonexistent/m.bin", false, ""},
	} {
		if got := sameModel(c.path, c.gguf); got != c.want {
			t.Errorf("sameModel(%s, gguf %v) = %q, want %q", c.path, c.gguf, got, c.want)
		}
	}
}

// TestEvalSpeed runs the quick speed section once, without baselines.
func TestEvalSpeed(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	m, err := model.Load(bin, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	t.Setenv("LLAMA_BENCH", "")
	t.Setenv("LLAMA2C_RUN", "")
	var errb bytes.Buffer
	s := measureEvalSpeed(context.Background(), m, bin, tok, true, &errb)
	if s.Speed == nil || s.Speed.Decode.TokensPerSec <= 0 || len(s.Overhead) != 6 {
		t.Fatalf("speed section %+v; notes %v", s, s.Notes)
	}
	if s.Speed.Llama != nil || s.Llama2C != nil || len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "LLAMA_BENCH") {
		t.Errorf("baselines without the variables: %+v", s.Notes)
	}
}

// TestBaselines runs fake llama-bench and llama2.c binaries and checks
// that each gets the right file and that their speeds are kept.
func TestBaselines(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// llama-bench must get the GGUF beside the .bin; llama2.c the .bin.
	t.Setenv("LLAMA_BENCH", script("llama-bench", `case "$2" in *.gguf) ;; *) exit 3;; esac
echo '[{"n_gen": 32, "n_threads": 2, "avg_ts": 1000.0, "stddev_ts": 5.0}]'`))
	t.Setenv("LLAMA2C_RUN", script("run", `case "$1" in *.bin) ;; *) exit 3;; esac
echo "achieved tok/s: 2000.0" >&2`))
	s := &bench.SpeedSection{Speed: &bench.SpeedReport{Threads: 2, Decode: bench.DecodeResult{Tokens: 32, TokensPerSec: 500}}}
	var errb bytes.Buffer
	addBaselines(context.Background(), s, 512, bin, tok, &errb)
	if s.Speed.Llama == nil || s.Speed.Llama.TokensPerSec != 1000 || s.Llama2C == nil || s.Llama2C.TokensPerSec != 2000 || s.Llama2C.Steps != 32 {
		t.Fatalf("baselines %+v %+v; notes %v; stderr %s", s.Speed.Llama, s.Llama2C, s.Notes, errb.String())
	}
	rep := &bench.Report{Speed: s}
	var out bytes.Buffer
	if err := rep.Markdown(&out, bench.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| llama.cpp llama-bench (2 threads) | 1000.0 | 0.50 |", "| llama2.c run (32 steps) | 2000.0 | 0.25 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}

	// A failing binary and a model with no file of the other format
	// become notes.
	t.Setenv("LLAMA_BENCH", script("bad", "echo broken >&2; exit 1"))
	t.Setenv("LLAMA2C_RUN", script("run2", "exit 0"))
	lone := filepath.Join(dir, "lone.bin")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s = &bench.SpeedSection{Speed: &bench.SpeedReport{Threads: 2, Decode: bench.DecodeResult{Tokens: 32, TokensPerSec: 500}}}
	addBaselines(context.Background(), s, 512, lone, tok, &errb)
	if s.Speed.Llama != nil || s.Llama2C != nil || len(s.Notes) != 2 ||
		!strings.Contains(s.Notes[0], "no .gguf") || !strings.Contains(s.Notes[1], "llama2.c failed") {
		t.Errorf("notes %q", s.Notes)
	}
}
