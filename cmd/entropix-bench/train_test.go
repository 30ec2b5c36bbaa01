package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
)

// arithLines are four problems of the arith task's format.
const arithLines = `{"question": "Hal has 82 toys. He gets 30 toys from Cal. Then Hal doubles the toys. How many toys does Hal have now?", "answer": "Hal has 82 + 30 = 112 toys.\nHal has 2 * 112 = 224 toys.\n#### 224", "steps": 2}
{"question": "Ben has 50 cookies. He sells 29 cookies. He finds 73 more cookies. How many cookies does Ben have now?", "answer": "Ben has 50 - 29 = 21 cookies.\nBen has 21 + 73 = 94 cookies.\n#### 94", "steps": 2}
{"question": "Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?", "answer": "Fay has 75 - 67 = 8 eggs.\nThe bags hold 4 * 9 = 36 eggs. Fay has 8 + 36 = 44 eggs.\n#### 44", "steps": 2}
{"question": "Ann has 31 pens. Then Ann doubles the pens. She loses 12 pens. How many pens does Ann have now?", "answer": "Ann has 2 * 31 = 62 pens.\nAnn has 62 - 12 = 50 pens.\n#### 50", "steps": 2}
`

// tinyTrain are the flags of a training run of a second or so.
var tinyTrain = []string{"-dim", "32", "-hidden", "64", "-layers", "2", "-heads", "2", "-batch", "4", "-warmup", "2", "-eval-every", "3", "-eval-n", "2"}

func writeArith(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrainTiny trains a tiny model, interrupts and resumes a run, and
// checks the exported GGUF loads and runs.
func TestTrainTiny(t *testing.T) {
	dir := t.TempDir()
	data := writeArith(t, dir, "train.jsonl", arithLines)
	out := filepath.Join(dir, "m.gguf")
	args := append([]string{"train", "-data", data, "-test", data, "-o", out, "-steps", "6"}, tinyTrain...)
	code, stdout, stderr := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"step 6/6 loss", "tok/s", "GFLOP/s", "ETA", "eval step 3: greedy accuracy", "checkpoint: step 6"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "wrote "+out) {
		t.Errorf("stdout: %q", stdout)
	}
	m, err := model.Load(out, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.Dim != 32 || m.Config.Layers != 2 || m.Tokenizer == nil {
		t.Errorf("exported model: %+v", m.Config)
	}
	ids := m.Tokenizer.Encode("Question: Hal has 82 toys.\nAnswer:", true)
	if m.Tokenizer.Decode(ids[1:]) != "Question: Hal has 82 toys.\nAnswer:" {
		t.Errorf("the embedded tokenizer does not round-trip: %v", ids)
	}

	// Interrupted: the checkpoint holds the steps done; -resume finishes.
	out2 := filepath.Join(dir, "m2.gguf")
	args2 := append([]string{"train", "-data", data, "-test", "none", "-o", out2, "-steps", "40"}, tinyTrain...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e strings.Builder
	if code := run(ctx, args2, &o, &e); code == exitOK {
		t.Fatalf("a cancelled run exited 0: %s", e.String())
	}
	if !strings.Contains(e.String(), "-resume") {
		t.Errorf("an interrupted run does not say how to go on:\n%s", e.String())
	}
	code, _, stderr = runCmd(t, append(args2, "-resume")...)
	if code != exitOK || !strings.Contains(stderr, "resumed from") {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	// -stop-at ends early with a checkpoint and the model then; -resume
	// finishes.
	out3 := filepath.Join(dir, "m3.gguf")
	args3 := append([]string{"train", "-data", data, "-test", "none", "-o", out3, "-steps", "8"}, tinyTrain...)
	code, _, stderr = runCmd(t, append(args3, "-stop-at", "3")...)
	if code != exitOK || !strings.Contains(stderr, "stopped at step 3 of 8") {
		t.Fatalf("-stop-at: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out3); err != nil {
		t.Errorf("-stop-at exported no model: %v", err)
	}
	if code, _, stderr = runCmd(t, append(args3, "-resume")...); code != exitOK || !strings.Contains(stderr, "at step 3") {
		t.Fatalf("resume after -stop-at: exit %d: %s", code, stderr)
	}
	// Other settings than the checkpoint's are refused.
	code, _, stderr = runCmd(t, append(args2, "-resume", "-lr", "0.01")...)
	if code == exitOK || !strings.Contains(stderr, "other settings") {
		t.Errorf("resume with another learning rate: exit %d: %s", code, stderr)
	}
}

// TestTrainBadInput checks the errors a user can cause.
func TestTrainBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeArith(t, dir, "ok.jsonl", arithLines)
	bad := writeArith(t, dir, "bad.jsonl", arithLines+"{\"question\": \"x\"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-data", filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{[]string{"-data", bad}, "line 5"},
		{[]string{"-data", good, "-lr", "NaN"}, "-lr"},
		{[]string{"-data", good, "-dim", "4096", "-hidden", "65536", "-layers", "64", "-max-mem-gib", "1"}, "GiB"},
		{[]string{"-data", good, "-heads", "3"}, "heads"},
		{[]string{"-data", good, "-o", filepath.Join(dir, "no", "such", "dir", "m.gguf")}, "cannot write"},
		{[]string{"-data", good, "-context", "16"}, "context"},
	} {
		args := append([]string{"train", "-test", "none", "-o", filepath.Join(dir, "m.gguf"), "-steps", "2"}, tinyTrain...)
		code, _, stderr := runCmd(t, append(args, c.args...)...)
		if code == exitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want an error naming %q", c.args, code, stderr, c.want)
		}
	}
}
