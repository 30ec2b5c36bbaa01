package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
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
		"### 8 rows per item", "### 24 rows per item", "| beam-adaptive | 4 |", "### Where branching did not help", "| accuracy |"} {
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
	if err != nil || len(rows) != 1+2*2*len(engine.Modes()) {
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
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Tasks) != 2 || len(rep.Tasks[0].Outputs) != 2*2*len(engine.Modes()) {
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
		"-csv", filepath.Join(dir, "no", "such", "dir.csv")}, tinyArgs...)...); code != exitUsage || !strings.Contains(errs, "-csv") {
		// Refused before the evaluation runs, not after it.
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
	if s.Speed == nil || s.Speed.Decode.TokensPerSec <= 0 || len(s.Overhead) != 15 { // 4 modes at width 1, 5 at 16 and 64, the default search
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

// synthGGUF writes a random model of stories260K's shape, with a
// synthetic vocabulary, as a GGUF file: a model that needs no ../shared.
func synthGGUF(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, synth.Shapes["stories260K"], kernels.F32, 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// arithFile writes three problems of the arith format.
func arithFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arith.jsonl")
	lines := `{"question": "Ben has 31 cards. He sells 4 cards. Then Ben doubles the cards. How many cards does Ben have now?", "answer": "Ben has 31 - 4 = 27 cards.\nBen has 2 * 27 = 54 cards.\n#### 54", "steps": 2}
{"question": "Fay has 75 eggs. She sells 67 eggs. She finds 3 more eggs. She loses 2 eggs. How many eggs does Fay have now?", "answer": "Fay has 75 - 67 = 8 eggs.\nFay has 8 + 3 = 11 eggs.\nFay has 11 - 2 = 9 eggs.\n#### 9", "steps": 3}
{"question": "Gus has 30 pens. He loses 22 pens. He finds 5 more pens. How many pens does Gus have now?", "answer": "Gus has 30 - 22 = 8 pens.\nGus has 8 + 5 = 13 pens.\n#### 13", "steps": 2}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvalArith runs -task arith end to end on a random model and a file
// of three problems: the random model answers nothing, so the test checks
// the plumbing (the tables, the groups, the outputs), not the accuracy.
func TestEvalArith(t *testing.T) {
	gguf, data := synthGGUF(t), arithFile(t)
	dir := t.TempDir()
	csvPath, jsonPath, svgPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	args := []string{"eval", "-m", gguf, "-task", "arith", "-data", data, "-modes", "greedy,beam,beam-adaptive",
		"-max-tokens", "8", "-budgets", "1x,2x", "-no-speed", "-no-timings", "-csv", csvPath, "-json", jsonPath, "-svg", svgPath}
	code, out, errs := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"## Task: arith", "3 items, up to 8 new tokens each; budgets of 8, 16 rows per item.",
		"| mode | K | accuracy [95% CI] | coverage [95% CI] | 2 steps | 3 steps | rows/problem | tokens/problem | forks | cut |",
		"| greedy | 1 | **0.0%** [0.0, 56.1] (0/3) | 0.0% [0.0, 56.1] | 0.0% (0/2) | 0.0% (0/1) |",
		"| beam | 2 | **0.0%** [0.0, 56.1] (0/3) |",
		"### Accuracy against rows spent", "| beam-adaptive | 0.0% (coverage 0.0%) at ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "wall s") {
		t.Errorf("-no-timings output has the wall column:\n%s", out)
	}
	rows, err := readCSV(csvPath)
	if err != nil || len(rows) != 1+2*3 {
		t.Errorf("CSV: %d rows, %v", len(rows), err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Tasks []struct {
			Task    string   `json:"task"`
			Groups  []string `json:"groups"`
			Results []struct {
				Rows         float64 `json:"rows"`
				AccuracyHigh float64 `json:"accuracy_high"`
				Groups       []struct {
					Group string `json:"group"`
					Items int    `json:"items"`
				} `json:"groups"`
			} `json:"results"`
			Outputs []struct {
				Group string `json:"group"`
			} `json:"outputs"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Tasks) != 1 {
		t.Fatalf("JSON: %v, %+v", err, rep)
	}
	tr := rep.Tasks[0]
	if tr.Task != "arith" || strings.Join(tr.Groups, ",") != "2 steps,3 steps" || len(tr.Results) != 6 || len(tr.Outputs) != 18 {
		t.Fatalf("JSON task %+v", tr)
	}
	for _, r := range tr.Results {
		if r.Rows <= 0 || r.AccuracyHigh <= 0.5 || len(r.Groups) != 2 || r.Groups[0].Items != 2 || r.Groups[1].Items != 1 {
			t.Errorf("JSON result %+v", r)
		}
	}
	if tr.Outputs[1].Group != "3 steps" {
		t.Errorf("output groups %+v", tr.Outputs[:3])
	}
	if b, err := os.ReadFile(svgPath); err != nil || !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("arith: accuracy vs compute")) {
		t.Errorf("SVG: %v", err)
	}

	// Without -max-tokens, the limit fits the longest worked answer.
	code, out, errs = runCmd(t, "eval", "-m", gguf, "-task", "arith", "-data", data, "-modes", "greedy", "-budgets", "1x", "-limit", "1", "-no-speed")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "arith: ") || !strings.Contains(errs, "new tokens per problem") || !strings.Contains(out, "1 items, up to ") {
		t.Errorf("token limit not reported:\n%s\n%s", errs, out)
	}
}

func TestEvalArithUsage(t *testing.T) {
	data := arithFile(t)
	empty := t.TempDir()
	t.Setenv("ENTROPIX_SHARED", empty) // a shared directory without the arith data
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "-data", data}, "-data is the arith task's file"},
		{[]string{"eval", "-task", "arith", "-data", filepath.Join(empty, "absent.jsonl")}, "absent.jsonl"},
		{[]string{"eval", "-task", "arith", "-data", empty}, "is a directory"},
		{[]string{"eval", "-task", "arith"}, "the default " + filepath.Join(empty, "data", "arith", "test.jsonl") + " is absent"},
		{[]string{"eval", "-task", "arithmetic"}, "want one of"},
	} {
		code, _, errs := runCmd(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.svg")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the old file and no temporary one.
	err := writeFile(path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("boom")
	})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left: %v", ents)
	}
	// A good write replaces it and keeps its mode.
	if err := writeFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("the file holds %q", b)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v", st.Mode(), err)
	}
	// A new file is 0644; a directory in the way is refused, untouched.
	fresh := filepath.Join(dir, "fresh.json")
	if err := writeFile(fresh, func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, %v", st.Mode(), err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(sub, func(w io.Writer) error { return nil }); err == nil {
		t.Error("wrote over a directory")
	}
	if st, err := os.Stat(sub); err != nil || !st.IsDir() {
		t.Errorf("the directory is gone: %v", err)
	}
}

// -html writes the viewer of one item's beam-adaptive search, run as the
// evaluation ran it.
func TestEvalHTML(t *testing.T) {
	needShared(t)
	page := filepath.Join(t.TempDir(), "item.html")
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	code, _, errs := runCmd(t, "eval", "-m", arith, "-task", "arith", "-no-speed", "-no-timings", "-modes", "greedy", "-budgets", "1x", "-limit", "3", "-html", page, "-html-item", "arith-0002")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte("arith-0002 · beam-adaptive")) || !bytes.Contains(b, []byte(`"nodes":[`)) {
		t.Fatalf("the page (%d bytes): %v", len(b), err)
	}
	if code, _, errs := runCmd(t, "eval", "-m", arith, "-task", "arith", "-no-speed", "-modes", "greedy", "-budgets", "1x", "-limit", "3", "-html", page, "-html-item", "nope"); code == exitOK {
		t.Errorf("an unknown item: exit %d, %s", code, errs)
	}
}
