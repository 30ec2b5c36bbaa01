package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// runCLI runs the real binary (built once by TestMain) with args and an
// empty standard input.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	cmd := exec.Command(builtExe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return -1, "", err.Error()
	}
	return code, out.String(), errb.String()
}

// stories returns the -m (and -z) arguments that load stories260K: the
// shared llama2.c checkpoint and tok512.bin, or the bundled GGUF when
// ../shared is absent (the same logits).
func stories(t *testing.T) []string {
	t.Helper()
	path, tok := modeltest.Stories260K(t)
	if tok == "" {
		return []string{"-m", path}
	}
	return []string{"-m", path, "-z", tok}
}

// cli runs the command with args after the model's.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLI(append(stories(t), args...)...)
}

// run.c's text for 60 greedy tokens after "Once upon a time".
const runCText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\n"

func TestGreedyMatchesRunC(t *testing.T) {
	t.Run("llama2.c", func(t *testing.T) {
		bin := modeltest.Path(t, modeltest.Stories260KBin)
		tok := modeltest.Path(t, modeltest.Tok512)
		code, out, errs := runCLI("-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "60", "--greedy", "--quiet")
		if code != 0 || out != runCText {
			t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
		}
	})
	t.Run("GGUF", func(t *testing.T) {
		gg := modeltest.Stories260KGGUFPath(t)
		if code, out, errs := runCLI("--model", gg, "--prompt", "Once upon a time", "--max-tokens", "60", "--greedy"); code != 0 || out != runCText {
			t.Fatalf("GGUF: exit %d, stdout %q, stderr %s", code, out, errs)
		}
	})
}

func checkUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}

type usageCase struct {
	args []string
	want string
}

func TestUsageErrors(t *testing.T) {
	m := stories(t)
	gg := modeltest.Stories260KGGUFPath(t)
	junk := filepath.Join(t.TempDir(), "junk.gguf")
	os.WriteFile(junk, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	emptyJSON := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(emptyJSON, []byte("{}"), 0o644)
	with := func(args ...string) []string { return append(slices.Clone(m), args...) }
	checkUsageErrors(t, []usageCase{
		{[]string{"-p", "hi"}, "no model"},
		{[]string{"-m", "/nonexistent/model.gguf", "-p", "hi"}, "no such file"},
		{[]string{"-m", junk, "-p", "hi"}, "gguf"},
		{with(), "empty prompt"},
		{with("-p", "hi", "-n", "0"), "must be positive"},
		{with("-p", "hi", "--greedy", "--beam", "4"), "choose one mode"},
		{with("-p", "hi", "--beam", "100"), "1..64"},
		{with("-p", "hi", "--thresholds", "no-such-preset"), "neither a preset"},
		{with("-p", "hi", "--log-format", "xml"), "log-format"},
		{with("-p", "hi", "--kv-type", "q4"), "kv-type"},
		{[]string{"-m", gg, "-p", "hi", "--chat"}, "no chat template"},
		{with("-p", "hi", "-f", "x.txt"), "not both"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{with("stray"), "unexpected argument"},
		// Values that must be refused (issue 19, defect 7).
		{with("-p", "hi", "--temp", "NaN"), "--temp"},
		{with("-p", "hi", "--temp", "Inf"), "--temp"},
		{with("-p", "hi", "--top-p", "NaN"), "--top-p"},
		{with("-p", "hi", "--min-p", "NaN"), "--min-p"},
		{with("-p", "hi", "--beam", "0"), "1..64"},
		{with("-p", "hi", "--cot-decoding", "0"), "1..64"},
		{with("-p", "hi", "--self-consistency", "0"), "1..64"},
		{with("-p", "hi", "--max-width", "100000"), "at most 64"},
		{with("-p", strings.Repeat("a b ", 100), "-c", "64"), "does not fit the context"},
		{with("-p", "hi", "--thresholds", emptyJSON), "missing"},
	})
	// A bad flag value is one line and a hint, not the whole usage.
	code, _, errs := runCLI("--temp", "warm")
	if code != exitUsage || strings.Count(errs, "\n") > 3 || !strings.Contains(errs, "-h lists the flags") {
		t.Errorf("bad value: exit %d, %d lines:\n%s", code, strings.Count(errs, "\n"), errs)
	}
	// -h lists the flags and the threshold presets it promises.
	if code, _, errs := runCLI("-h"); code != 0 || !strings.Contains(errs, "budget-rows") || !strings.Contains(errs, "entropix-70b") {
		t.Errorf("-h: exit %d:\n%s", code, errs)
	}
}

// Greedy decoding stops at end of text: the committed path ends with the
// stop token (stories260K ends a story with BOS, as llama2.c's run.c
// expects), which is neither printed nor in the result's tokens, and
// nothing is printed after it but the closing newline.
func TestGreedyStopsAtEndOfText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	const prompt = "Once upon a time"
	code, out, errs := cli(t, "-p", prompt, "-n", "500", "--greedy", "--quiet", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result struct {
			Text    string `json:"text"`
			Tokens  []int  `json:"tokens"`
			Stopped string `json:"stopped"`
			Tree    struct {
				Nodes []struct {
					ID        int    `json:"id"`
					Token     int    `json:"token"`
					Text      string `json:"text"`
					Depth     int    `json:"depth"`
					Reason    string `json:"reason"`
					Committed bool   `json:"committed"`
				} `json:"nodes"`
			} `json:"tree"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	res := r.Result
	if res.Stopped != "eos" || len(res.Tokens) >= 500 {
		t.Fatalf("stopped %q after %d tokens; want end of text before the limit", res.Stopped, len(res.Tokens))
	}
	if want := prompt + res.Text + "\n"; out != want {
		t.Fatalf("stdout %q, want the prompt, the text and a newline %q", out, want)
	}
	if !strings.HasSuffix(res.Text, `friend."`) {
		t.Errorf("text ends %q", res.Text[max(len(res.Text)-40, 0):])
	}
	var text string
	deepest, last := -1, 0
	for i, n := range res.Tree.Nodes {
		if n.Committed && n.ID != 0 && n.Depth > deepest {
			deepest, last = n.Depth, i
		}
	}
	for _, n := range res.Tree.Nodes {
		if n.Committed && n.ID != 0 && n.Depth < deepest {
			text += n.Text
		}
	}
	end := res.Tree.Nodes[last]
	if end.Reason != "eos" || slices.Contains(res.Tokens, end.Token) || deepest != len(res.Tokens)+1 {
		t.Fatalf("the committed path ends at depth %d with token %d (reason %q); %d tokens %v",
			deepest, end.Token, end.Reason, len(res.Tokens), res.Tokens[max(len(res.Tokens)-5, 0):])
	}
	if text != res.Text {
		t.Fatalf("the committed path before the stop token reads %q, the result %q", text, res.Text)
	}
}

// A llama2.c checkpoint without its tokenizer, or with the wrong one.
func TestUsageErrorsLlama2C(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	checkUsageErrors(t, []usageCase{
		{[]string{"-m", bin, "-p", "hi"}, "tokenizer"},
		{[]string{"-m", bin, "-z", modeltest.Path(t, modeltest.Llama2Tokenizer), "-p", "hi"}, "32000"},
	})
}

func TestUnescape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{`a\nb`, "a\nb"},
		{`a\r\nb`, "a\r\nb"},
		{`col1\tcol2`, "col1\tcol2"},
		{`say \"hi\" and \'bye\'`, `say "hi" and 'bye'`},
		{`back\\slash`, `back\slash`},
		{`\\n`, `\n`},        // an escaped backslash, then a plain n
		{`\\\n`, "\\\n"},     // an escaped backslash, then a newline
		{`\x41\x62c`, "Abc"}, // hex bytes, at the end too
		{`\x0a`, "\n"},
		{`\xe2\x9c\x93`, "✓"}, // the UTF-8 bytes of one character
		{`\xZZ`, `\xZZ`},      // not hex: literal
		{`\x4`, `\x4`},        // one digit: literal
		{`\x`, `\x`},
		{`\x\n`, "\\x\n"},          // a bad \x, then a newline
		{`C:\path\q`, `C:\path\q`}, // unknown escapes stay
		{`ends with \`, `ends with \`},
		{`\`, `\`},
		{"ü\\nß", "ü\nß"},
	} {
		if got := unescape(c.in); got != c.want {
			t.Errorf("unescape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// -p "a\nb" reaches the engine with a newline, as the same prompt read
// from a file does; --no-escape keeps the backslash.
func TestPromptEscapes(t *testing.T) {
	dir := t.TempDir()
	run := func(prompt []string) (string, tinyReport) {
		t.Helper()
		path := filepath.Join(dir, "r.json")
		args := append(prompt, "-n", "12", "--greedy", "--quiet", "--json", path)
		code, out, errs := cli(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", prompt, code, errs)
		}
		return out, readReport(t, path)
	}
	const text = "Once upon a time\nthere was"
	file := filepath.Join(dir, "prompt.txt")
	if err := os.WriteFile(file, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, rf := run([]string{"-f", file})
	escaped, re := run([]string{"-p", `Once upon a time\nthere was`})
	if re.Prompt != text || !strings.HasPrefix(escaped, text) {
		t.Fatalf(`-p with \n: prompt %q, stdout %q; want a newline`, re.Prompt, escaped)
	}
	if escaped != fromFile || re.Result.Text != rf.Result.Text {
		t.Errorf("-p with \\n continues as %q, the same prompt from -f as %q", escaped, fromFile)
	}
	literal, rl := run([]string{"-p", `Once upon a time\nthere was`, "--no-escape"})
	if rl.Prompt != `Once upon a time\nthere was` || !strings.HasPrefix(literal, `Once upon a time\nthere was`) {
		t.Fatalf("--no-escape: prompt %q, stdout %q; want the backslash kept", rl.Prompt, literal)
	}
	// -f is read as it is: a backslash in the file stays.
	if err := os.WriteFile(file, []byte(`Once upon a time\nthere was`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, r := run([]string{"-f", file}); r.Prompt != `Once upon a time\nthere was` {
		t.Errorf("-f: prompt %q, want the file's backslash kept", r.Prompt)
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
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtExe
}

// build builds the command into a temporary folder (builtExe).
func build() {
	dir, err := os.MkdirTemp("", "entropix-cli-test")
	if err != nil {
		buildErr = err
		return
	}
	builtExe = filepath.Join(dir, "entropix-search")
	if out, err := exec.Command("go", "build", "-o", builtExe, ".").CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
	}
}

func TestMain(m *testing.M) {
	buildOnce.Do(build)
	if buildErr != nil {
		fmt.Fprintln(os.Stderr, buildErr)
		os.Exit(1)
	}
	code := m.Run()
	if builtExe != "" {
		os.RemoveAll(filepath.Dir(builtExe))
	}
	os.Exit(code)
}

// tinyReport is the part of --json's report the tests read.
type tinyReport struct {
	Prompt string `json:"prompt"`
	Result struct {
		Mode    string          `json:"mode"`
		Text    string          `json:"text"`
		Stopped string          `json:"stopped"`
		Tree    json.RawMessage `json:"tree"`
		Stats   struct {
			Rows      int `json:"rows"`
			MaxLive   int `json:"max_live"`
			Forks     int `json:"forks"`
			Generated int `json:"generated"`
		} `json:"stats"`
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
	// Graphviz's parser alone (nop -p): laying out a tree of thousands of
	// nodes takes dot half a minute, and the layout is tree's own tests'.
	if nop, err := exec.LookPath("nop"); err == nil {
		cmd := exec.Command(nop, "-p", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nop -p %s: %v\n%.500s", path, err, out)
		}
	}
}

// Must-show 1: the binary in several modes, its text, exit codes and files.
func TestEndToEnd(t *testing.T) {
	m := stories(t)
	exe := buildCLI(t)
	dir := t.TempDir()
	for _, mode := range [][]string{{"--greedy"}, {"--sample"}, {"--entropix"}, {"--beam", "3"}, {"--cot-decoding", "3"}, {"--beam-adaptive"}, {}} {
		name := strings.Join(mode, "")
		dotPath, jsonPath := filepath.Join(dir, name+".dot"), filepath.Join(dir, name+".json")
		args := append(slices.Concat(m, []string{"-p", "Once upon a time", "-n", "40", "--dot", dotPath, "--json", jsonPath}), mode...)
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
	cmd = exec.Command(exe, append(m, "-n", "5", "--greedy", "--quiet")...)
	cmd.Stdin = strings.NewReader("Once upon a time\n")
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "Once upon a time, there") {
		t.Errorf("prompt on stdin: %q %v", out, err)
	}
}

// Must-show 2: SIGINT during a long search leaves a valid JSON and DOT of
// the partial tree, the partial text, and exit code 130.
func TestInterrupt(t *testing.T) {
	m := stories(t)
	exe := buildCLI(t)
	// SIGINT, and what timeout, systemd, Docker and Kubernetes send
	// (SIGTERM) and a closed terminal (SIGHUP): the partial text, the JSON
	// and the DOT are written, and the exit code is 128 + the signal.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		dir := t.TempDir()
		dotPath, jsonPath := filepath.Join(dir, "t.dot"), filepath.Join(dir, "t.json")
		// Beam search of width 64 over 450 tokens streams nothing until
		// the end and takes seconds: interrupt it midway.
		cmd := exec.Command(exe, append(m, "-p", "Once upon a time", "-n", "450", "--beam", "64", "--dot", dotPath, "--json", jsonPath)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
			t.Fatalf("%v: exit: %v, want %d\nstderr: %s", sig, err, 128+int(sig), stderr.String())
		}
		r := readReport(t, jsonPath)
		if r.Result.Stopped != "canceled" || !strings.HasPrefix(stdout.String(), "Once upon a time") {
			t.Fatalf("%v: partial result: stopped %q, stdout %q", sig, r.Result.Stopped, stdout.String())
		}
		checkDOT(t, dotPath)
	}
}

// On a terminal the progress line never overwrites the streamed text
// (issue 19: it erased the line stdout was writing), and NO_COLOR turns
// the summary's styles off. script(1) gives the run a terminal.
func TestTerminalOutput(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1)")
	}
	exe := buildCLI(t)
	args := append([]string{exe}, stories(t)...)
	args = append(args, "-p", "Lily wanted to", "-n", "300", "--max-width", "64", "--budget-rows", "4000")
	var quoted []string
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	cmd := exec.Command(script, "-qec", strings.Join(quoted, " "), "/dev/null")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("\x1b[2K")) || bytes.Contains(out, []byte("\x1b[1m")) {
		t.Errorf("terminal output holds line erasures or styles:\n%q", out)
	}
	if !bytes.Contains(out, []byte("Lily wanted to")) || !bytes.Contains(out, []byte("stopped:")) {
		t.Errorf("terminal output lacks the text or the summary:\n%q", out)
	}
}

// Inputs that would never end or never open are refused at once: a
// device as a model, tokenizer, prompt file or calibration file, and a
// FIFO nobody writes to.
func TestBoundedInputs(t *testing.T) {
	exe := buildCLI(t)
	m := stories(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFO:", err)
	}
	cases := [][]string{
		{"-m", "/dev/zero", "-p", "hi"},
		{"-m", fifo, "-p", "hi"},
		append(slices.Clone(m), "-f", "/dev/zero"),
		append(slices.Clone(m), "-f", fifo),
		append(slices.Clone(m), "--calibrate", "/dev/zero"),
	}
	if bin, err := os.Stat(filepath.Join(modeltest.RepoRoot(), "..", "shared", "models", "stories260K", "stories260K.bin")); err == nil && bin.Mode().IsRegular() {
		cases = append(cases, []string{"-m", modeltest.Path(t, modeltest.Stories260KBin), "-z", "/dev/zero", "-p", "hi"})
	}
	for _, args := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, exe, args...).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !bytes.Contains(out, []byte("not a regular file")) {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

// A second signal stops at once, even while Graphviz lays out a big tree
// (it ran 67 s after a Ctrl-C), and leaves no partial file.
func TestSecondSignal(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("no Graphviz")
	}
	exe := buildCLI(t)
	dir := t.TempDir()
	svg := filepath.Join(dir, "t.svg")
	os.WriteFile(svg, []byte("old"), 0o644)
	cmd := exec.Command(exe, append(stories(t), "-p", "Once upon a time", "-n", "450", "--beam", "64", "--svg", svg, "--quiet")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT) // stop the search: dot starts on its tree
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT) // stop dot
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the second signal took %v to stop the run", d)
	}
	if b, _ := os.ReadFile(svg); string(b) != "old" {
		t.Errorf("the old SVG became %d bytes", len(b))
	}
}

// A closed standard output (| head -c 30) stops the search like a signal:
// the JSON is still written, and the exit code is 141 (SIGPIPE).
func TestClosedStdout(t *testing.T) {
	exe := buildCLI(t)
	jsonPath := filepath.Join(t.TempDir(), "t.json")
	cmd := exec.Command(exe, append(stories(t), "-p", "Once upon a time", "-n", "400", "--greedy", "--json", jsonPath)...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 30)
	io.ReadFull(pipe, buf)
	pipe.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 141 {
		t.Fatalf("exit: %v, want 141\nstderr: %s", err, stderr.String())
	}
	if r := readReport(t, jsonPath); r.Result.Stopped != "canceled" {
		t.Fatalf("stopped %q", r.Result.Stopped)
	}
}

// Outputs never lose what was at their path, and are checked before the
// model is even loaded.
func TestOutputsLoseNothing(t *testing.T) {
	exe := buildCLI(t)
	m := stories(t)
	dir := t.TempDir()
	prev := filepath.Join(dir, "prev.svg")
	os.WriteFile(prev, []byte("old"), 0o644)
	// No Graphviz: refused at once, prev.svg untouched.
	cmd := exec.Command(exe, append(m, "-p", "Once", "-n", "10", "--svg", prev)...)
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "Graphviz") {
		t.Errorf("--svg without dot: %v, %s", err, out)
	}
	if b, _ := os.ReadFile(prev); string(b) != "old" {
		t.Errorf("prev.svg became %q", b)
	}
	// A folder that does not exist: refused before the model loads (the
	// model path is wrong too, and the message is about --json).
	code, _, errs := runCLI("-m", filepath.Join(dir, "no-model.gguf"), "-p", "Once", "--json", filepath.Join(dir, "no", "dir", "t.json"))
	if code != exitUsage || !strings.Contains(errs, "--json") || strings.Contains(errs, "no-model") {
		t.Errorf("--json into a missing folder: exit %d, %s", code, errs)
	}
	// A link to a full device: the write fails, the link stays.
	if _, err := os.Stat("/dev/full"); err == nil {
		link := filepath.Join(dir, "link.json")
		if err := os.Symlink("/dev/full", link); err == nil {
			code, _, errs := runCLI(append(m, "-p", "Once", "-n", "5", "--json", link, "--quiet")...)
			if code != exitFailure || !strings.Contains(errs, "link.json") {
				t.Errorf("--json to /dev/full: exit %d, %s", code, errs)
			}
			if _, err := os.Lstat(link); err != nil {
				t.Errorf("the link is gone: %v", err)
			}
		}
	}
	// --json - is standard output, and then the only thing on it.
	code, stdout, errs := runCLI(append(m, "-p", "Once", "-n", "5", "--greedy", "--json", "-", "--quiet")...)
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep["schema"] != 1.0 {
		t.Errorf("--json -: exit %d, stdout %q, %s", code, stdout, errs)
	}
	if code, _, errs := runCLI(append(m, "-p", "Once", "--json", "-", "--dot", "-")...); code != exitUsage {
		t.Errorf("two outputs on stdout: exit %d, %s", code, errs)
	}
}

// --calibrate prints a policy fitted to the search's own rows; --policy
// reads it back and --print-policy shows it.
func TestCalibrateThenUse(t *testing.T) {
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte("Once upon a time\nThe little dog\n\nLily wanted to\nTom and his mom\n"), 0o644)
	code, out, errs := cli(t, "--calibrate", prompts, "-n", "128")
	if code != 0 {
		t.Fatalf("--calibrate: exit %d: %s", code, errs)
	}
	var pol map[string]any
	if err := json.Unmarshal([]byte(out), &pol); err != nil {
		t.Fatalf("--calibrate printed no JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"thresholds", "fork", "backspace_below", "score"} {
		if _, ok := pol[k]; !ok {
			t.Errorf("the calibrated policy lacks %q: %s", k, out)
		}
	}
	if !strings.Contains(errs, "4 prompts") {
		t.Errorf("stderr %q does not report the prompts", errs)
	}
	path := filepath.Join(dir, "policy.json")
	os.WriteFile(path, []byte(out), 0o644)
	code, out2, errs := cli(t, "-p", "Once upon a time", "-n", "20", "--policy", path, "--quiet")
	if code != 0 || !strings.HasPrefix(out2, "Once upon a time") {
		t.Fatalf("--policy %s: exit %d, %q, %s", path, code, out2, errs)
	}
	// --print-policy shows the file back, with --score applied on top.
	code, out2, errs = cli(t, "--policy", path, "--score", "margin", "--print-policy")
	var back map[string]any
	if code != 0 || json.Unmarshal([]byte(out2), &back) != nil || back["score"] != "margin" || fmt.Sprint(back["fork"]) != fmt.Sprint(pol["fork"]) {
		t.Fatalf("--print-policy: exit %d, %s, %s", code, out2, errs)
	}
	// No model is needed to print the defaults.
	if code, out, errs := runCLI("--print-policy"); code != 0 || !strings.Contains(out, `"score": "logprob"`) {
		t.Errorf("--print-policy alone: exit %d, %s, %s", code, out, errs)
	}
	if code, _, errs := cli(t, "-p", "x", "--score", "best"); code != exitUsage {
		t.Errorf("--score best: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, "-p", "x", "--policy", prompts); code != exitUsage {
		t.Errorf("--policy with a non-JSON file: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, "-p", "x", "--thresholds", prompts); code != exitUsage {
		t.Errorf("--thresholds with a non-JSON file: exit %d, %s", code, errs)
	}
}

// TestSamplingBaselines runs --self-consistency and --best-of on the
// arith model: N samples in one batch, the rows they spent in --json, and
// the usage errors.
func TestSamplingBaselines(t *testing.T) {
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	prompt := `Question: Ben has 31 cards. Then Ben doubles the cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\nAnswer:`
	for _, mode := range []string{"--self-consistency", "--best-of"} {
		out := filepath.Join(t.TempDir(), "r.json")
		code, stdout, stderr := runCLI("-m", arith, mode, "4", "-p", prompt, "--json", out)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, stderr)
		}
		if !strings.Contains(stdout, "#### ") {
			t.Errorf("%s: no answer in %q", mode, stdout)
		}
		r := readReport(t, out)
		if r.Result.Mode != strings.TrimPrefix(mode, "--") || r.Result.Stats.MaxLive != 4 || r.Result.Stats.Rows < 4*40 {
			t.Errorf("%s: JSON result %+v", mode, r.Result)
		}
	}
	// Beam-adaptive within a row budget: the rows it spent are in --json.
	out := filepath.Join(t.TempDir(), "r.json")
	fay := `Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\nAnswer:`
	code, stdout, stderr := runCLI("-m", arith, "--beam-adaptive", "--budget-rows", "200", "-p", fay, "--json", out)
	if code != 0 || !strings.Contains(stdout, "#### ") {
		t.Fatalf("--beam-adaptive: exit %d, %q: %s", code, stdout, stderr)
	}
	r := readReport(t, out)
	if r.Result.Mode != "beam-adaptive" || r.Result.Stats.Rows <= 48 || r.Result.Stats.Rows > 200 || r.Result.Stats.Forks == 0 {
		t.Errorf("--beam-adaptive --budget-rows 200: JSON result %+v", r.Result)
	}
	checkUsageErrors(t, []usageCase{
		{[]string{"-m", arith, "-p", "hi", "--self-consistency", "65"}, "1..64"},
		{[]string{"-m", arith, "-p", "hi", "--best-of", "-1"}, "1..64"},
		{[]string{"-m", arith, "-p", "hi", "--best-of", "2", "--greedy"}, "choose one mode"},
	})
}

// Flags llama.cpp users reach for (issue 19): --seed -1, -c, --ignore-eos,
// the penalties, -f -, and a note when sampling flags do nothing.
func TestLlamaCppHabits(t *testing.T) {
	m := stories(t)
	with := func(args ...string) []string { return append(slices.Clone(m), args...) }
	code, _, errs := runCLI(with("-p", "Once", "-n", "5", "--seed", "-1", "--quiet")...)
	if code != 0 || !regexp.MustCompile(`seed \d+`).MatchString(errs) {
		t.Errorf("--seed -1: exit %d, %s", code, errs)
	}
	checkUsageErrors(t, []usageCase{
		{with("-p", strings.Repeat("a b ", 20), "-c", "16"), "does not fit the context"},
		{with("-p", "hi", "-c", "100000"), "the model's context is"},
		{with("-p", "hi", "--seed", "-2"), "--seed -2"},
		{with("-p", "hi", "--repeat-penalty", "NaN"), "--repeat-penalty"},
	})
	// --ignore-eos: greedy arith stops at its end of text after about 50
	// tokens; with the flag it runs to -n.
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	prompt := `Question: Fay has 75 eggs. She sells 67 eggs. How many eggs does Fay have now?\nAnswer:`
	for _, c := range []struct {
		flag string
		want func(int) bool
	}{{"--greedy", func(n int) bool { return n < 100 }}, {"--ignore-eos", func(n int) bool { return n == 120 }}} {
		out := filepath.Join(t.TempDir(), "r.json")
		args := []string{"-m", arith, "-p", prompt, "-n", "120", "--greedy", "--json", out, "--quiet"}
		if c.flag != "--greedy" {
			args = append(args, c.flag)
		}
		if code, _, errs := runCLI(args...); code != 0 {
			t.Fatalf("%s: exit %d, %s", c.flag, code, errs)
		}
		if r := readReport(t, out); !c.want(r.Result.Stats.Generated) {
			t.Errorf("%s: %d tokens", c.flag, r.Result.Stats.Generated)
		}
	}
	// The penalties reach the sampler.
	_, plain, _ := runCLI(with("-p", "Once upon a time", "-n", "40", "--sample", "--quiet")...)
	_, penal, _ := runCLI(with("-p", "Once upon a time", "-n", "40", "--sample", "--quiet", "--repeat-penalty", "1.5", "--presence-penalty", "1")...)
	if plain == penal {
		t.Errorf("penalties changed nothing: %q", plain)
	}
	// -r/--stop: the text ends before the stop string, in streaming and in
	// branching modes alike, and the JSON says so.
	for _, mode := range []string{"--greedy", "--beam=4"} {
		out := filepath.Join(t.TempDir(), "r.json")
		code, stdout, errs := runCLI(with("-p", "Once upon a time", "-n", "60", mode, "-r", "Lily", "--stop", "\\n\\n", "--json", out, "--quiet")...)
		if code != 0 || !strings.HasPrefix(stdout, "Once upon a time") || strings.Contains(stdout, "Lily") {
			t.Errorf("%s -r Lily: exit %d, %q, %s", mode, code, stdout, errs)
		}
		if r := readReport(t, out); r.Result.Stopped != "stop" || strings.Contains(r.Result.Text, "Lily") {
			t.Errorf("%s -r Lily: stopped %q, text %q", mode, r.Result.Stopped, r.Result.Text)
		}
	}
	// --n-probs: each token with its probability and the top alternatives.
	code, _, errs = runCLI(with("-p", "Once upon a time", "-n", "5", "--greedy", "--n-probs", "3", "--quiet")...)
	if lines := strings.Count(errs, "p="); code != 0 || lines != 5 || strings.Count(strings.Split(errs, "\n")[0], ", ") != 2 {
		t.Errorf("--n-probs 3: exit %d, %d token lines:\n%s", code, lines, errs)
	}
	// Sampling flags on a mode that does not sample: a note, not silence.
	if _, _, errs := runCLI(with("-p", "Once", "-n", "3", "--temp", "1.2", "--quiet")...); !strings.Contains(errs, "does not use them") {
		t.Errorf("--temp with beam-adaptive: %q", errs)
	}
}

// --chat renders the GGUF's own Jinja template, with --system and a
// --messages conversation (issue 19, defect 11). stories260K carries no
// template: the test gives a copy of it one.
func TestChatTemplate(t *testing.T) {
	dir := t.TempDir()
	path := rewriteStories(t, dir, func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return append(kv, gguf.KV{Key: "tokenizer.chat_template",
			Value: gguf.String("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")}), ts
	})
	msgs := filepath.Join(dir, "msgs.json")
	os.WriteFile(msgs, []byte(`[{"role": "user", "content": "Tell me a story."}, {"role": "assistant", "content": "Once upon a time"}]`), 0o644)
	out := filepath.Join(dir, "r.json")
	code, _, errs := runCLI("-m", path, "--system", "You tell stories.", "--messages", msgs, "-p", "Go on.", "-n", "8", "--greedy", "--json", out, "--quiet")
	if code != 0 {
		t.Fatalf("--chat: exit %d, %s", code, errs)
	}
	if r := readReport(t, out); r.Prompt != "Go on." || r.Result.Text == "" {
		t.Errorf("--chat report: %+v", r)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"role": "wizard", "content": "x"}]`), 0o644)
	checkUsageErrors(t, []usageCase{
		{[]string{"-m", path, "--messages", bad}, "role \"wizard\""},
		{[]string{"-m", path, "--system", "only a system message"}, "no user message"},
	})
}

// rewriteStories writes an edited copy of the bundled stories260K GGUF
// into dir and returns its path.
func rewriteStories(t *testing.T, dir string, edit func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) string {
	t.Helper()
	f, err := gguf.Open(modeltest.Stories260KGGUFPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: bytes.Clone(f.TensorData(ti))})
	}
	kv, ts := edit(slices.Clone(f.KV), ts)
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "edited.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// NaN weights are one clear line and exit 2, in every mode (issue 19,
// defect 8: they exited 1, or printed arbitrary tokens).
func TestNaNWeights(t *testing.T) {
	path := rewriteStories(t, t.TempDir(), func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Name == "output_norm.weight" {
				binary.LittleEndian.PutUint32(ts[i].Data, math.Float32bits(float32(math.NaN())))
			}
		}
		return kv, ts
	})
	for _, mode := range []string{"--greedy", "--beam-adaptive", "--sample", "--beam=4"} {
		code, _, errs := runCLI("-m", path, "-p", "Once", "-n", "5", mode, "--quiet")
		if code != exitUsage || !strings.Contains(errs, "not finite") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s on NaN weights: exit %d, %q", mode, code, errs)
		}
	}
}

// --html writes the viewer; --dot-hide-pruned and --dot-max-depth shrink
// the DOT of a big tree.
func TestHTMLAndDOTOptions(t *testing.T) {
	dir := t.TempDir()
	page, full, cut := filepath.Join(dir, "t.html"), filepath.Join(dir, "full.dot"), filepath.Join(dir, "cut.dot")
	args := append(stories(t), "-p", "Once upon a time", "-n", "60", "--budget-rows", "240", "--quiet")
	if code, _, errs := runCLI(append(slices.Clone(args), "--html", page, "--dot", full)...); code != 0 {
		t.Fatalf("--html: exit %d, %s", code, errs)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte(`<script type="application/json" id="data">`)) || !bytes.Contains(b, []byte(`"nodes":[`)) {
		t.Fatalf("--html wrote %d bytes: %v", len(b), err)
	}
	if code, _, errs := runCLI(append(slices.Clone(args), "--dot", cut, "--dot-hide-pruned", "--dot-max-depth", "10")...); code != 0 {
		t.Fatalf("--dot-max-depth: exit %d, %s", code, errs)
	}
	fb, _ := os.ReadFile(full)
	cb, _ := os.ReadFile(cut)
	if n, m := bytes.Count(fb, []byte("->")), bytes.Count(cb, []byte("->")); m == 0 || m >= n {
		t.Errorf("the cut DOT has %d edges, the full one %d", m, n)
	}
	checkDOT(t, cut)
}

// The serve subcommand's usage errors and help (the server itself is
// tested in cmd/internal/serve).
func TestServeUsage(t *testing.T) {
	if code, _, errs := runCLI("serve", "-h"); code != 0 || !strings.Contains(errs, "/v1/chat/completions") {
		t.Errorf("serve -h: exit %d, %s", code, errs)
	}
	checkUsageErrors(t, []usageCase{
		{[]string{"serve"}, "no model"},
		{[]string{"serve", "-m", filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "--max-searches", "0"}, "must be positive"},
		{[]string{"serve", "-m", filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "--addr", "256.0.0.1:1"}, "--addr"},
	})
}

// The README's Kubernetes manifest starts the server: its args (the model
// and the address swapped for the test's) serve, its probes' paths answer
// 200, and SIGTERM drains and exits 0, as a pod's termination does.
func TestReadmeManifest(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(modeltest.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	manifest, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(manifest, "kind: Deployment") {
		t.Fatal("README has no Deployment manifest")
	}
	var args []string
	var probes []string
	for _, line := range strings.Split(manifest, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "args: "); ok {
			if err := json.Unmarshal([]byte(v), &args); err != nil {
				t.Fatalf("args %s: %v", v, err)
			}
		}
		if _, v, ok := strings.Cut(line, "httpGet: {path: "); ok {
			probes = append(probes, strings.TrimSuffix(strings.Fields(v)[0], ","))
		}
	}
	if len(args) < 3 || args[0] != "serve" || len(probes) != 2 {
		t.Fatalf("manifest args %q, probes %q", args, probes)
	}
	for i := range args {
		switch args[i] {
		case "-m":
			args[i+1] = filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
		case "--addr":
			args[i+1] = "127.0.0.1:0"
		}
	}
	cmd := exec.Command(builtExe, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	addr := ""
	for sc.Scan() {
		if _, v, ok := strings.Cut(sc.Text(), " on http://"); ok {
			addr, _, _ = strings.Cut(v, " ")
			break
		}
	}
	if addr == "" {
		t.Fatal("the server did not say where it listens")
	}
	go io.Copy(io.Discard, stderr)
	for _, p := range probes {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("probe %s: %s", p, resp.Status)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
}
