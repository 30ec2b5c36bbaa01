package ggml_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestArithAccuracy evaluates beam-adaptive on arith test problems (the
// eval's prompts and checks, one search at a time, a budget of 4x the
// token limit) on the CPU backend and on the ggml backend, both as it runs
// on ggml's CPU device and shaped as on a GPU (slots padded, the
// attention's metrics made of sums on the device): each ggml way's
// accuracy must be within one point of the CPU backend's (one problem
// when fewer than 200 run). A minute on two cores: it runs when
// ENTROPIX_GGML_ACCURACY gives the number of problems (.ci/run's 200),
// and needs ../shared's arith problems.
func TestArithAccuracy(t *testing.T) {
	problems := envInt("ENTROPIX_GGML_ACCURACY", 0)
	if problems == 0 {
		t.Skip("skipped: ENTROPIX_GGML_ACCURACY=200 evaluates 200 arith problems on three backends (a minute)")
	}
	ggml.SetDefaults(options(t))
	registerSpans()
	root := modeltest.RepoRoot()
	data := filepath.Join(root, "..", "shared", "data", "arith", "test.jsonl")
	if _, err := os.Stat(data); err != nil {
		t.Skipf("skipped: the arith problems are not there: %v", err)
	}
	m, err := model.Load(filepath.Join(root, "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	task := bench.NewArith(data)
	maxTokens, err := task.AnswerTokenLimit(m)
	if err != nil {
		t.Fatal(err)
	}
	eval := func(backend string) *bench.TaskReport {
		rep, err := bench.Eval(context.Background(), m, task, bench.EvalConfig{Modes: []engine.Mode{engine.BeamAdaptive},
			MaxTokens: maxTokens, Budgets: []int{4 * maxTokens}, Limit: problems, Seed: 1, Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	want := eval("cpu")
	wr := want.Results[0]
	t.Logf("cpu: %d of %d correct (%.1f%%, 95%% %.1f-%.1f), %.0f rows a problem", wr.Correct, want.Items, 100*wr.Accuracy, 100*wr.AccuracyLow, 100*wr.AccuracyHigh, wr.Rows)
	for _, way := range []struct {
		name  string
		setup *spanSetup
	}{
		{"ggml's CPU device", nil},
		{"shaped as on a GPU", &spanSetup{way: "gpu", sums: true, split: -1}},
	} {
		backend := "ggml"
		if way.setup != nil {
			backend = "ggml-spans"
			for range problems {
				nextSpans(*way.setup)
			}
		}
		got := eval(backend)
		gr, same := got.Results[0], 0
		for i := range got.Outputs {
			if got.Outputs[i].Text == want.Outputs[i].Text {
				same++
			}
		}
		t.Logf("%s: %d of %d correct (%.1f%%, 95%% %.1f-%.1f), %.0f rows a problem; %d answers the same as the CPU's", way.name, gr.Correct, got.Items, 100*gr.Accuracy, 100*gr.AccuracyLow, 100*gr.AccuracyHigh, gr.Rows, same)
		if d := gr.Correct - wr.Correct; max(d, -d) > max(problems/100, 1) { // a point, or one problem of fewer than 200
			t.Errorf("%s: accuracy %.1f%%, the CPU backend's %.1f%%: more than a point apart", way.name, 100*gr.Accuracy, 100*wr.Accuracy)
		}
	}
}
