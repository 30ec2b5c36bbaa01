package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestGreedyMatchesRunC(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	code, out, errs := runCLI("-m", bin, "-z", tok, "-p", "Once upon a time", "-n", "60", "--greedy")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// run.c's text for the same 60 generated tokens.
	want := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\n"
	if out != want {
		t.Fatalf("stdout\n got %q\nwant %q", out, want)
	}
	gg := modeltest.Path(t, modeltest.Stories260KGGUF)
	if code, out2, errs := runCLI("--model", gg, "--prompt", "Once upon a time", "--max-tokens", "60", "--greedy"); code != 0 || out2 != want {
		t.Fatalf("GGUF: exit %d, stdout %q, stderr %s", code, out2, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-p", "hi"}, "no model"},
		{[]string{"-m", "/nonexistent/model.gguf", "-p", "hi"}, "no such file"},
		{[]string{"-m", bin, "-p", "hi"}, "tokenizer"},
		{[]string{"-m", bin, "-z", tok, "-p", ""}, "empty prompt"},
		{[]string{"-m", bin, "-z", tok, "-p", "hi", "-n", "0"}, "must be positive"},
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
