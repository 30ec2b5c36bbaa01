package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
)

// TestCovered counts an item as covered when its check passes on the
// output or on any of the search's paths, and never without a check.
func TestCovered(t *testing.T) {
	check := func(s string) bool { return strings.HasSuffix(s, "#### 7") }
	for _, c := range []struct {
		res  SearchResult
		want bool
		n    int
	}{
		{SearchResult{Text: "#### 7"}, true, 1},
		{SearchResult{Text: "#### 8"}, false, 1},
		{SearchResult{Text: "#### 8", Paths: []string{"#### 8", "#### 9"}}, false, 2},
		{SearchResult{Text: "#### 8", Paths: []string{"#### 8", "#### 9", "#### 7"}}, true, 3},
		{SearchResult{Text: "#### 7", Paths: []string{"#### 7"}}, true, 1},
	} {
		got, n := covered(check, &c.res)
		if got != c.want || n != c.n {
			t.Errorf("%+v: covered %v over %d paths, want %v over %d", c.res, got, n, c.want, c.n)
		}
	}
	if got, _ := covered(nil, &SearchResult{Text: "#### 7", Paths: []string{"#### 7"}}); got {
		t.Error("covered without a check")
	}
}

// TestCoverageCounts sums covered outputs into a ModeResult with its
// interval, apart from accuracy: coverage is at least accuracy.
func TestCoverageCounts(t *testing.T) {
	a := modeAcc{checked: true}
	outs := []Output{
		{Correct: true, Covered: true},
		{Correct: false, Covered: true},
		{Correct: false, Covered: true},
		{Correct: false, Covered: false},
	}
	for i := range outs {
		a.add(&outs[i])
	}
	r := a.result(engine.BeamAdaptive, 100, 4)
	lo, hi := Wilson95(3, 4)
	if r.Correct != 1 || r.Covered != 3 || r.Coverage != 0.75 || r.CoverageLow != lo || r.CoverageHigh != hi {
		t.Errorf("%d correct, %d covered, coverage %v [%v, %v], want 1, 3, 0.75 [%v, %v]", r.Correct, r.Covered, r.Coverage, r.CoverageLow, r.CoverageHigh, lo, hi)
	}
}

// TestEvalCoverage checks that an evaluation reads the engine's paths:
// coverage is at least accuracy in every mode, the number of paths is that
// of the search (K samples for self-consistency), and a check that no
// output passes leaves coverage at 0.
func TestEvalCoverage(t *testing.T) {
	m := synthModel(t)
	items := []Item{
		{ID: "a", Prompt: "Question: one?\nAnswer:", Check: func(s string) bool { return strings.Contains(s, "a") }},
		{ID: "b", Prompt: "Question: two?\nAnswer:", Check: func(string) bool { return false }},
	}
	cfg := EvalConfig{Modes: []engine.Mode{engine.Greedy, engine.SelfConsistency, engine.BeamAdaptive}, MaxTokens: 6, Budgets: []int{24}, Seed: 1}
	tr, err := Eval(context.Background(), m, NewTask("cov", items), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range tr.Results {
		if r.Covered < r.Correct || r.Covered > 1 {
			t.Errorf("%s: %d covered, %d correct", r.Mode, r.Covered, r.Correct)
		}
	}
	for _, o := range tr.Outputs {
		if o.Item == "b" && o.Covered {
			t.Errorf("%s: item b covered", o.Mode)
		}
		if o.Mode == engine.SelfConsistency && o.Paths != 4 {
			t.Errorf("self-consistency with K=4: %d paths", o.Paths)
		}
		if o.Mode == engine.Greedy && o.Paths != 1 {
			t.Errorf("greedy: %d paths", o.Paths)
		}
	}
}

// TestCompare labels each report's modes with its suffix and writes one
// line per mode and budget with both intervals.
func TestCompare(t *testing.T) {
	mk := func(mode engine.Mode, budget int, acc, cov float64) ModeResult {
		return ModeResult{Mode: mode, Budget: budget, Width: 4, Rows: float64(budget) / 2, Accuracy: acc, AccuracyLow: acc - 0.1, AccuracyHigh: acc + 0.1,
			Coverage: cov, CoverageLow: cov - 0.1, CoverageHigh: cov + 0.1}
	}
	a := &Report{Tasks: []*TaskReport{{Checked: true, Results: []ModeResult{mk(engine.BeamAdaptive, 100, 0.5, 0.6), mk(engine.BeamAdaptive, 200, 0.5, 0.7)}}}}
	b := &Report{Tasks: []*TaskReport{{Checked: true, Results: []ModeResult{mk(engine.BeamAdaptive, 100, 0.6, 0.6)}}}}
	s := CompareSeries([]*Report{a, b}, []string{"", " + verifier"})
	if len(s) != 2 || s[0].Label != "beam-adaptive" || len(s[0].Points) != 2 || s[1].Label != "beam-adaptive + verifier" {
		t.Fatalf("series %+v", s)
	}
	var md strings.Builder
	if err := CompareMarkdown(&md, s); err != nil {
		t.Fatal(err)
	}
	if want := "| beam-adaptive + verifier | 100 | 4 | 50 | 60.0% [50.0, 70.0] | 60.0% [50.0, 70.0] |"; !strings.Contains(md.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, md.String())
	}
	var svg strings.Builder
	if err := CompareSVG(&svg, "t", s); err != nil || !strings.Contains(svg.String(), "<svg") {
		t.Errorf("svg: %v", err)
	}
}
