package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// run.c's text for 60 greedy tokens after "Once upon a time".
const runCText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\n"

func TestGreedyMatchesRunC(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	code, out, errs := runCLI("-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "60", "--greedy", "--quiet")
	if code != 0 || out != runCText {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	gg := modeltest.Path(t, modeltest.Stories260KGGUF)
	if code, out, errs := runCLI("--model", gg, "--prompt", "Once upon a time", "--max-tokens", "60", "--greedy"); code != 0 || out != runCText {
		t.Fatalf("GGUF: exit %d, stdout %q, stderr %s", code, out, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	gg := modeltest.Path(t, modeltest.Stories260KGGUF)
	junk := filepath.Join(t.TempDir(), "junk.gguf")
	os.WriteFile(junk, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-p", "hi"}, "no model"},
		{[]string{"-m", "/nonexistent/model.gguf", "-p", "hi"}, "no such file"},
		{[]string{"-m", junk, "-p", "hi"}, "gguf"},
		{[]string{"-m", bin, "-p", "hi"}, "tokenizer"},
		{[]string{"-m", bin, "-z", modeltest.Path(t, modeltest.Llama2Tokenizer), "-p", "hi"}, "32000"},
		{[]string{"-m", bin, "-z", tok}, "empty prompt"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "-n", "0"}, "must be positive"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "--greedy", "--beam", "4"}, "choose one mode"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "--beam", "100"}, "1..64"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "--thresholds", "no-such-preset"}, "neither a preset"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "--log-format", "xml"}, "log-format"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "--kv-type", "q4"}, "kv-type"},
		{[]string{"-m", gg, "-p", "hi", "--chat"}, "no chat template"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "-f", "x.txt"}, "not both"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"-m", bin, "stray"}, "unexpected argument"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}

var (
	buildOnce sync.Once
	builtExe  string
	buildErr  error
)

// buildCLI compiles the command once per test binary.
func buildCLI(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "entropix-cli-test")
		if err != nil {
			buildErr = err
			return
		}
		builtExe = filepath.Join(dir, "entropix-search")
		if out, err := exec.Command("go", "build", "-o", builtExe, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtExe
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtExe != "" {
		os.RemoveAll(filepath.Dir(builtExe))
	}
	os.Exit(code)
}

type tinyReport struct {
	Prompt string `json:"prompt"`
	Result struct {
		Mode    string          `json:"mode"`
		Text    string          `json:"text"`
		Stopped string          `json:"stopped"`
		Tree    json.RawMessage `json:"tree"`
	} `json:"result"`
}

func readReport(t *testing.T, path string) tinyReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r tinyReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s is not valid JSON: %v", path, err)
	}
	return r
}

func checkDOT(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("digraph")) || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("}")) {
		t.Fatalf("%s is not a DOT graph: %.80q", path, b)
	}
	if dot, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(dot, "-Tsvg", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dot -Tsvg %s: %v\n%.500s", path, err, out)
		}
	}
}

// Must-show 1: the binary in several modes, its text, exit codes and files.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	exe := buildCLI(t)
	dir := t.TempDir()
	for _, mode := range [][]string{{"--greedy"}, {"--sample"}, {"--entropix"}, {"--beam", "3"}, {"--cot-decoding", "3"}, {"--beam-adaptive"}, {}} {
		name := strings.Join(mode, "")
		dotPath, jsonPath := filepath.Join(dir, name+".dot"), filepath.Join(dir, name+".json")
		args := append([]string{"-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "40", "--dot", dotPath, "--json", jsonPath}, mode...)
		cmd := exec.Command(exe, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", mode, err, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "Once upon a time") || len(out) < 40 {
			t.Errorf("%v: stdout %q", mode, out)
		}
		if strings.Contains(stderr.String(), "\x1b[") {
			t.Errorf("%v: escape codes on a non-terminal stderr: %q", mode, stderr.String())
		}
		r := readReport(t, jsonPath)
		if r.Prompt != "Once upon a time" || "Once upon a time"+r.Result.Text+"\n" != out || len(r.Result.Tree) == 0 {
			t.Errorf("%v: JSON report %+v does not match stdout %q", mode, r.Result, out)
		}
		checkDOT(t, dotPath)
	}
	if out, err := exec.Command(exe, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "entropix-search") {
		t.Errorf("--version: %q %v", out, err)
	}
	cmd := exec.Command(exe, "-m", filepath.Join(dir, "missing.gguf"), "-p", "x")
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Errorf("missing model: %v, want exit %d", err, exitUsage)
	}
	// The prompt from standard input.
	cmd = exec.Command(exe, "-m", bin, "-z", tok, "-n", "5", "--greedy", "--quiet")
	cmd.Stdin = strings.NewReader("Once upon a time\n")
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "Once upon a time, there") {
		t.Errorf("prompt on stdin: %q %v", out, err)
	}
}

// Must-show 2: SIGINT during a long search leaves a valid JSON and DOT of
// the partial tree, the partial text, and exit code 130.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	exe := buildCLI(t)
	dir := t.TempDir()
	dotPath, jsonPath := filepath.Join(dir, "t.dot"), filepath.Join(dir, "t.json")
	// Beam search of width 64 over 450 tokens streams nothing until the
	// end and takes seconds: interrupt it midway.
	cmd := exec.Command(exe, "-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "450", "--beam", "64", "--dot", dotPath, "--json", jsonPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v, want %d\nstderr: %s", err, exitInterrupted, stderr.String())
	}
	r := readReport(t, jsonPath)
	if r.Result.Stopped != "canceled" || !strings.HasPrefix(stdout.String(), "Once upon a time") {
		t.Fatalf("partial result: stopped %q, stdout %q", r.Result.Stopped, stdout.String())
	}
	checkDOT(t, dotPath)
}

// --calibrate prints thresholds fitted to the model; --thresholds reads
// them back.
func TestCalibrateThenUse(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte("Once upon a time\nThe little dog\n\nLily wanted to\nTom and his mom\n"), 0o644)
	code, out, errs := runCLI("-m", bin, "-z", tok, "--calibrate", prompts, "-n", "128")
	if code != 0 {
		t.Fatalf("--calibrate: exit %d: %s", code, errs)
	}
	var th map[string]any
	if err := json.Unmarshal([]byte(out), &th); err != nil {
		t.Fatalf("--calibrate printed no JSON: %v\n%s", err, out)
	}
	if !strings.Contains(errs, "4 prompts") {
		t.Errorf("stderr %q does not report the prompts", errs)
	}
	path := filepath.Join(dir, "th.json")
	os.WriteFile(path, []byte(out), 0o644)
	code, out, errs = runCLI("-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "20", "--thresholds", path, "--quiet")
	if code != 0 || !strings.HasPrefix(out, "Once upon a time") {
		t.Fatalf("--thresholds %s: exit %d, %q, %s", path, code, out, errs)
	}
	if code, _, errs := runCLI("-m", bin, "-z", tok, "-p", "x", "--thresholds", prompts); code != exitUsage {
		t.Errorf("--thresholds with a non-JSON file: exit %d, %s", code, errs)
	}
}
