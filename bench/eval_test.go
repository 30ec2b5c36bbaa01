package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/tree"
)

var (
	evalModelOnce sync.Once
	evalModelM    *model.Model
	evalModelErr  error
)

// evalModel loads stories260K once for the tests of this file.
func evalModel(t testing.TB) *model.Model {
	t.Helper()
	bin := modeltest.Path(t, modeltest.Stories260KBin)
	tok := modeltest.Path(t, modeltest.Tok512)
	evalModelOnce.Do(func() { evalModelM, evalModelErr = model.Load(bin, tok) })
	if evalModelErr != nil {
		t.Fatal(evalModelErr)
	}
	return evalModelM
}

// tinyEval is an evaluation small enough for CI: 2 items, 12 tokens, a
// budget of 1x and of 3x (K = 3).
func tinyEval() EvalConfig {
	return EvalConfig{MaxTokens: 12, Budgets: []int{12, 36}, Limit: 2, Seed: 7}
}

func TestLoopRule(t *testing.T) {
	r := DefaultLoopRule()
	seq := func(s string) []int { // one token per letter
		toks := make([]int, len(s))
		for i, c := range s {
			toks[i] = int(c)
		}
		return toks
	}
	for _, c := range []struct {
		name string
		s    string
		want bool
	}{
		{"empty", "", false},
		{"no repeat", "abcdefghijklmnopqrstuvwxyz", false},
		{"one token 7 times: span too short", "xyzaaaaaaab", false},
		{"one token 8 times", "xyzaaaaaaaab", true},
		{"pair 3 times but 6 tokens", "qwababab" + "zzxcvb", false},
		{"pair 4 times", "qwabababab" + "zxcvb", true},
		{"unit of 4, 3 times", "start" + "abcd" + "abcd" + "abcd" + "end", true},
		{"unit of 4, twice in the middle", "start" + "abcd" + "abcd" + "endxyz", false},
		{"unit of 8, twice at the end", "start" + "abcdefgh" + "abcdefgh", true},
		{"unit of 7, twice at the end: 14 < 16", "start" + "abcdefg" + "abcdefg", false},
		{"unit of 8, twice, then partial", "start" + "abcdefgh" + "abcdefgh" + "abc", true},
		{"unit of 33 is too long", "s" + strings.Repeat("0123456789ABCDEFGHIJKLMNOPQRSTUVW", 3), false},
	} {
		if got := r.Loops(seq(c.s)); got != c.want {
			t.Errorf("%s: Loops(%q) = %v, want %v", c.name, c.s, got, c.want)
		}
	}
	// The unit of 33 loops once MaxPeriod allows it.
	r.MaxPeriod = 33
	if !r.Loops(seq("s" + strings.Repeat("0123456789ABCDEFGHIJKLMNOPQRSTUVW", 3))) {
		t.Error("a unit of 33 repeated 3 times does not loop with MaxPeriod 33")
	}
}

func TestDistinct2(t *testing.T) {
	for _, c := range []struct {
		outs [][]int
		want float64
	}{
		{nil, 0},
		{[][]int{{1}}, 0},
		{[][]int{{1, 2, 3}}, 1},
		{[][]int{{1, 1, 1, 1, 1}}, 0.25},
		{[][]int{{1, 2}, {1, 2}}, 0.5},
		{[][]int{{1, 2}, {2, 1}}, 1},
		{[][]int{{1}, {2}}, 0}, // no bigram crosses outputs
	} {
		if got := Distinct2(c.outs); got != c.want {
			t.Errorf("Distinct2(%v) = %v, want %v", c.outs, got, c.want)
		}
	}
}

// TestScorerMatchesSearch checks the fresh-pass log-likelihood against the
// log-probabilities greedy search recorded while it decoded one token at
// a time, over more tokens than one scoring chunk.
func TestScorerMatchesSearch(t *testing.T) {
	m := evalModel(t)
	eng, err := engine.New(m, engine.WithMode(engine.Greedy))
	if err != nil {
		t.Fatal(err)
	}
	prompt := "Once upon a time, there was a little girl named Lily."
	res, err := eng.Search(context.Background(), prompt, engine.Budget{MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	n := 0
	for id, node := range res.Tree.All() {
		if id != tree.Root && node.Committed {
			want += node.LogProb
			n++
		}
	}
	if n != len(res.Tokens) || n <= scoreChunk {
		t.Fatalf("%d committed nodes for %d tokens; want more than %d", n, len(res.Tokens), scoreChunk)
	}
	s := NewScorer(m)
	ids := m.Tokenizer.Encode(prompt, m.Tokenizer.AddBOS())
	for range 2 { // a second call reuses the pool
		got, err := s.LogLik(ids, res.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-3*float64(n) {
			t.Errorf("LogLik = %v, greedy search recorded %v over %d tokens", got, want, n)
		}
	}
	if got, err := s.LogLik(ids, nil); err != nil || got != 0 {
		t.Errorf("LogLik of nothing = %v, %v; want 0, nil", got, err)
	}
	for _, c := range []struct {
		name         string
		prompt, cont []int
	}{
		{"empty prompt", nil, []int{1}},
		{"bad token", ids, []int{m.Config.Vocab}},
		{"past the context", ids, make([]int, m.Config.ContextLen)},
	} {
		if _, err := s.LogLik(c.prompt, c.cont); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestEvalDeterministic is must-show 2: two runs with the same seed give
// the same tables, timings aside.
func TestEvalDeterministic(t *testing.T) {
	m := evalModel(t)
	render := func() (string, *TaskReport) {
		tr, err := Eval(context.Background(), m, Stories(), tinyEval())
		if err != nil {
			t.Fatal(err)
		}
		rep := &Report{Model: "stories260K", Config: tinyEval(), Tasks: []*TaskReport{tr}}
		var b bytes.Buffer
		if err := rep.Markdown(&b, MarkdownOptions{NoTimings: true}); err != nil {
			t.Fatal(err)
		}
		return b.String(), tr
	}
	a, tr := render()
	b, _ := render()
	if a != b {
		t.Errorf("two runs with the same seed differ:\n%s\n----\n%s", a, b)
	}
	if strings.Contains(a, " ms |") || strings.Contains(a, "wall") {
		t.Errorf("NoTimings output holds timings:\n%s", a)
	}
	cfg, _ := tinyEval().withDefaults()
	if want := len(cfg.Budgets) * len(cfg.Modes); len(tr.Results) != want {
		t.Fatalf("%d results, want %d", len(tr.Results), want)
	}
	if want := len(tr.Results) * tr.Items; len(tr.Outputs) != want {
		t.Fatalf("%d outputs, want %d", len(tr.Outputs), want)
	}
	for _, o := range tr.Outputs {
		if o.Stats.Rows > o.Budget {
			t.Errorf("%s %s at %d rows spent %d rows", o.Item, o.Mode, o.Budget, o.Stats.Rows)
		}
		if len(o.Tokens) > 12 || o.LogLik > 0 {
			t.Errorf("%s %s: %d tokens, loglik %v", o.Item, o.Mode, len(o.Tokens), o.LogLik)
		}
	}
	for _, r := range tr.Results {
		want := 1
		switch {
		case r.Mode == engine.BeamAdaptive:
			want = 4 // admits branches by the rows left, at every budget
		case r.Budget == 36 && branching(r.Mode):
			want = 3
		}
		if r.Width != want {
			t.Errorf("%s at %d rows: width %d", r.Mode, r.Budget, r.Width)
		}
		if !(r.LogLik < 0) || r.Distinct2 <= 0 || r.Distinct2 > 1 || r.Tokens <= 0 {
			t.Errorf("%s at %d rows: implausible %+v", r.Mode, r.Budget, r)
		}
	}
	// A different seed changes the sampled modes.
	cfg2 := tinyEval()
	cfg2.Seed = 8
	tr2, err := Eval(context.Background(), m, Stories(), cfg2)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i, o := range tr.Outputs {
		if o.Mode == engine.Sample && o.Text != tr2.Outputs[i].Text {
			same = false
		}
	}
	if same {
		t.Error("sample mode gave the same outputs with seeds 7 and 8")
	}
}

func TestEvalChecked(t *testing.T) {
	m := evalModel(t)
	cfg := tinyEval()
	cfg.Modes = []engine.Mode{engine.Greedy, engine.BeamAdaptive}
	cfg.Limit = 6
	var progress []EvalProgress
	cfg.Progress = func(p EvalProgress) { progress = append(progress, p) }
	tr, err := Eval(context.Background(), m, NameRecall(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Checked || tr.Task != "name-recall" || tr.Items != 6 {
		t.Fatalf("report %q: checked %v, %d items", tr.Task, tr.Checked, tr.Items)
	}
	if len(progress) != 4 || progress[3].Done != 4 || progress[3].Total != 4 {
		t.Errorf("progress: %+v", progress)
	}
	for i, r := range tr.Results {
		correct := 0
		for _, o := range tr.Outputs[i*tr.Items : (i+1)*tr.Items] {
			if o.Correct {
				correct++
			}
		}
		if r.Correct != correct || r.Accuracy != float64(correct)/6 {
			t.Errorf("%s at %d: %d correct, accuracy %v; the outputs say %d", r.Mode, r.Budget, r.Correct, r.Accuracy, correct)
		}
	}
	var b bytes.Buffer
	rep := &Report{Config: cfg, Tasks: []*TaskReport{tr}}
	if err := rep.Markdown(&b, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| accuracy |") || !strings.Contains(b.String(), "/6)") {
		t.Errorf("no accuracy column:\n%s", b.String())
	}
}

func TestEvalErrors(t *testing.T) {
	m := evalModel(t)
	long := NewTask("long", []Item{{ID: "long", Prompt: strings.Repeat("Once upon a time, ", 400)}})
	for _, c := range []struct {
		name string
		task Task
		cfg  func(*EvalConfig)
		want string
	}{
		{"negative tokens", Stories(), func(c *EvalConfig) { c.MaxTokens = -1 }, "max tokens"},
		{"zero budget", Stories(), func(c *EvalConfig) { c.Budgets = []int{0} }, "budget"},
		{"wide", Stories(), func(c *EvalConfig) { c.MaxWidth = 65 }, "max width"},
		{"limit", Stories(), func(c *EvalConfig) { c.Limit = -1 }, "limit"},
		{"mode", Stories(), func(c *EvalConfig) { c.Modes = []engine.Mode{42} }, "mode"},
		{"loop rule", Stories(), func(c *EvalConfig) { c.Loop = LoopRule{MaxPeriod: 1, MinRepeats: 1} }, "loop rule"},
		{"no items", NewTask("none", nil), func(*EvalConfig) {}, "no items"},
		{"prompt too long", long, func(*EvalConfig) {}, "leaves no room"},
		{"chat without a template", Stories(), func(c *EvalConfig) { c.Chat = true }, "chat"},
	} {
		cfg := tinyEval()
		c.cfg(&cfg)
		_, err := Eval(context.Background(), m, c.task, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Eval(ctx, m, Stories(), tinyEval()); err == nil {
		t.Error("a canceled context gave no error")
	}
}

func TestWidth(t *testing.T) {
	c := EvalConfig{MaxTokens: 64, MaxWidth: 8}
	for budget, want := range map[int]int{1: 1, 64: 1, 127: 1, 128: 2, 256: 4, 512: 8, 4096: 8} {
		if got := c.Width(budget); got != want {
			t.Errorf("Width(%d) = %d, want %d", budget, got, want)
		}
	}
	if got := (EvalConfig{}).Width(512); got != 4 { // defaults: 128 tokens, width 8
		t.Errorf("zero config: Width(512) = %d, want 4", got)
	}
}

func TestMeasureSearchOverhead(t *testing.T) {
	m := evalModel(t)
	res, err := MeasureSearchOverhead(context.Background(), m, []int{1, 4}, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Every mode: four at width 1, five at width 4, the default search.
	if len(res) != 10 || res[0].Mode != engine.Greedy || res[2].Mode != engine.Entropix || !res[8].Forced || res[9].Forced {
		t.Fatalf("%d results %+v, want 10 (greedy, sample, entropix, beam at width 1 first)", len(res), res)
	}
	seen := map[engine.Mode]bool{}
	for _, r := range res {
		seen[r.Mode] = true
		if r.Rows <= 0 || r.Wall <= 0 || r.Forward > r.Wall || r.Share < 0 || r.Share > 1 || r.Width < 1 {
			t.Errorf("%s width %d: %+v", r.Mode, r.Width, r)
		}
	}
	if len(seen) != len(engine.Modes()) {
		t.Errorf("modes measured: %v, want all %d", seen, len(engine.Modes()))
	}
	if _, err := MeasureSearchOverhead(context.Background(), m, []int{65}, 8, 1); err == nil {
		t.Error("width 65: no error")
	}
	if _, err := MeasureSearchOverhead(context.Background(), m, []int{1}, 0, 1); err == nil {
		t.Error("0 tokens: no error")
	}
}

func TestParseLlama2C(t *testing.T) {
	for _, c := range []struct {
		out  string
		want float64
		ok   bool
	}{
		{"Once upon a time...\nachieved tok/s: 1234.5\n", 1234.5, true},
		{"achieved tok/s: 1\nachieved tok/s: 2.5", 2.5, true},
		{"achieved tok/s:", 0, false},
		{"achieved tok/s: nan", 0, false},
		{"achieved tok/s: -3", 0, false},
		{"no such line", 0, false},
	} {
		got, ok := parseLlama2C([]byte(c.out))
		if got != c.want || ok != c.ok {
			t.Errorf("parseLlama2C(%q) = %v, %v; want %v, %v", c.out, got, ok, c.want, c.ok)
		}
	}
}

func TestRunLlama2C(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The fake run checks its arguments as llama2.c's run would see them.
	ok := script("run", `[ "$1" = model.bin ] && [ "$2" = -z ] && [ "$3" = tok.bin ] && [ "$6" = -n ] && [ "$7" = 64 ] || exit 3
echo "Once upon a time"; echo "achieved tok/s: 321.5" >&2`)
	res, err := RunLlama2C(context.Background(), ok, "model.bin", "tok.bin", 64)
	if err != nil {
		t.Fatal(err)
	}
	if res.TokensPerSec != 321.5 || res.Steps != 64 {
		t.Errorf("got %+v", res)
	}
	if _, err := RunLlama2C(context.Background(), script("fail", "echo boom >&2; exit 1"), "m", "t", 8); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing binary: error %v, want one with its output", err)
	}
	if _, err := RunLlama2C(context.Background(), script("quiet", "echo hello"), "m", "t", 8); err == nil {
		t.Error("no tok/s line: no error")
	}
	if _, err := RunLlama2C(context.Background(), filepath.Join(dir, "absent"), "m", "t", 8); err == nil {
		t.Error("absent binary: no error")
	}
}
