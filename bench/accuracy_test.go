package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// synthModel is a random model of stories260K's shape with a synthetic
// vocabulary: no ../shared needed.
func synthModel(t testing.TB) *model.Model {
	t.Helper()
	m, err := synth.Generate(synth.Shapes["stories260K"], kernels.F32, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWilson95(t *testing.T) {
	near := func(x, y float64) bool { return math.Abs(x-y) < 5e-5 }
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 0, 0, 1},
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
		{5, 10, 0.2366, 0.7634},
		{0, 5, 0, 0.4345},
		{1, 3, 0.0615, 0.7923},
	} {
		lo, hi := Wilson95(c.k, c.n)
		if !near(lo, c.lo) || !near(hi, c.hi) {
			t.Errorf("Wilson95(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	// The interval is the set of p whose normal test at p does not
	// reject k/n: |k/n - p| <= z sqrt(p(1-p)/n). Its bounds solve the
	// equality; check them against bisection on each side of k/n.
	for _, n := range []int{1, 7, 100, 500} {
		for _, k := range []int{0, 1, n / 3, n / 2, n - 1, n} {
			if k < 0 || k > n {
				continue
			}
			ph := float64(k) / float64(n)
			f := func(p float64) float64 { return math.Abs(ph-p) - z95*math.Sqrt(p*(1-p)/float64(n)) }
			solve := func(a, b float64) float64 { // f(a) > 0 >= f(b) or the reverse
				for range 200 {
					m := (a + b) / 2
					if (f(m) > 0) == (f(a) > 0) {
						a = m
					} else {
						b = m
					}
				}
				return (a + b) / 2
			}
			wantLo, wantHi := 0.0, 1.0
			if k > 0 {
				wantLo = solve(0, ph)
			}
			if k < n {
				wantHi = solve(1, ph)
			}
			lo, hi := Wilson95(k, n)
			if math.Abs(lo-wantLo) > 1e-9 || math.Abs(hi-wantHi) > 1e-9 {
				t.Errorf("Wilson95(%d, %d) = [%v, %v], bisection [%v, %v]", k, n, lo, hi, wantLo, wantHi)
			}
			if lo > ph || hi < ph {
				t.Errorf("Wilson95(%d, %d) = [%v, %v] leaves out %v", k, n, lo, hi, ph)
			}
		}
	}
}

func TestSortGroups(t *testing.T) {
	gs := []string{"other", "5 steps", "10 steps", "2 steps", "3 steps", "1 step", "abc"}
	SortGroups(gs)
	want := []string{"1 step", "2 steps", "3 steps", "5 steps", "10 steps", "abc", "other"}
	if !slices.Equal(gs, want) {
		t.Errorf("SortGroups = %q, want %q", gs, want)
	}
}

// arithLines are three problems of the arith format, the second without
// a step count.
const arithLines = `{"question": "Ben has 31 cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?", "answer": "Ben has 2 * 31 = 62 cards.\nBen has 62 - 34 = 28 cards.\n#### 28", "steps": 2}
{"question": "Fay has 75 eggs. She sells 67 eggs. How many eggs does Fay have now?", "answer": "Fay has 75 - 67 = 8 eggs.\n#### 8"}

{"question": "Gus has 30 pens. He loses 22 pens. Then Gus doubles the pens. He finds 7 more pens. How many pens does Gus have now?", "answer": "Gus has 30 - 22 = 8 pens.\nGus has 2 * 8 = 16 pens.\nGus has 16 + 7 = 23 pens.\n#### 23", "steps": 3}
`

func writeArith(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arith.jsonl")
	if err := os.WriteFile(path, []byte(arithLines), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestArithTask(t *testing.T) {
	path := writeArith(t)
	task := NewArith(path)
	if task.Name() != "arith" || task.Path() != path {
		t.Errorf("name %q, path %q", task.Name(), task.Path())
	}
	ps, err := task.Problems(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].Steps != 2 || ps[1].Steps != 0 || ps[2].Steps != 3 {
		t.Fatalf("problems %+v", ps)
	}
	items, err := task.Items(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("%d items", len(items))
	}
	first := items[0]
	if first.ID != "arith-0001" || first.Answer != "28" || first.Group != "2 steps" ||
		first.Prompt != "Question: Ben has 31 cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\nAnswer:" {
		t.Errorf("first item %+v", first)
	}
	if items[1].Group != "" || items[2].Group != "3 steps" {
		t.Errorf("groups %q, %q", items[1].Group, items[2].Group)
	}
	for i, it := range items {
		if !it.Check(" " + ps[i].Answer) {
			t.Errorf("%s: its own solution is not correct", it.ID)
		}
	}
	if items, err := task.Items(2); err != nil || len(items) != 2 {
		t.Errorf("limit 2: %d items, %v", len(items), err)
	}
	if _, err := NewArith(filepath.Join(t.TempDir(), "absent.jsonl")).Items(0); err == nil || !strings.Contains(err.Error(), "arith") {
		t.Errorf("absent file: %v", err)
	}
}

func TestArithCorrect(t *testing.T) {
	for _, c := range []struct {
		completion string
		want       bool
	}{
		{" Ben has 2 * 31 = 62 cards.\nBen has 62 - 34 = 28 cards.\n#### 28", true},
		{" #### 28.0", true},
		{" ####28\n", true},
		{" Ben has 62 - 34 = 28 cards.", false}, // the right number, but no answer line
		{" #### 27", false},
		{" #### 28 1", true},                             // the first number after ####
		{" #### 5\nBen has 28.\n#### 28", true},          // the last ####
		{" #### 28\nQuestion: Ann has 3.\n#### 3", true}, // cut at the next question
		{" #### 3\nQuestion: Ann has 28.\n#### 28", false},
		{" ####", false},
		{"", false},
	} {
		if got := ArithCorrect(c.completion, "28"); got != c.want {
			t.Errorf("ArithCorrect(%q) = %v, want %v", c.completion, got, c.want)
		}
	}
}

func TestAnswerTokenLimit(t *testing.T) {
	m := synthModel(t)
	task := NewArith(writeArith(t))
	n, err := task.AnswerTokenLimit(m)
	if err != nil {
		t.Fatal(err)
	}
	longest := len(m.Tokenizer.Encode(" Gus has 30 - 22 = 8 pens.\nGus has 2 * 8 = 16 pens.\nGus has 16 + 7 = 23 pens.\n#### 23", false))
	if n%16 != 0 || n < longest+longest/4+1 || n >= longest+longest/4+1+16 {
		t.Errorf("AnswerTokenLimit = %d for a longest answer of %d tokens", n, longest)
	}
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewArith(empty).AnswerTokenLimit(m); err == nil {
		t.Error("an empty file has a token limit")
	}
}

// TestEvalGroups runs a checked task with groups on a random model: the
// checks ignore the completion, so the accuracy per group is known.
func TestEvalGroups(t *testing.T) {
	m := synthModel(t)
	always := func(string) bool { return true }
	never := func(string) bool { return false }
	items := []Item{
		{ID: "a", Prompt: "Question: one?\nAnswer:", Check: always, Group: "3 steps"},
		{ID: "b", Prompt: "Question: two?\nAnswer:", Check: never, Group: "2 steps"},
		{ID: "c", Prompt: "Question: three?\nAnswer:", Check: always, Group: "2 steps"},
		{ID: "d", Prompt: "Question: four?\nAnswer:", Check: never},
		{ID: "e", Prompt: "Question: five?\nAnswer:", Check: always, Group: "10 steps"},
	}
	cfg := EvalConfig{Modes: []engine.Mode{engine.Greedy, engine.Beam}, MaxTokens: 4, Budgets: []int{4, 8}, Seed: 1}
	tr, err := Eval(context.Background(), m, NewTask("grouped", items), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2 steps", "3 steps", "10 steps", "other"}; !slices.Equal(tr.Groups, want) {
		t.Fatalf("groups %q, want %q", tr.Groups, want)
	}
	lo, hi := Wilson95(3, 5)
	for _, r := range tr.Results {
		if r.Correct != 3 || r.Accuracy != 0.6 || r.AccuracyLow != lo || r.AccuracyHigh != hi {
			t.Errorf("%s at %d: %d correct, %v [%v, %v]", r.Mode, r.Budget, r.Correct, r.Accuracy, r.AccuracyLow, r.AccuracyHigh)
		}
		want := []GroupResult{{"2 steps", 2, 1, 0.5, 0, 0}, {"3 steps", 1, 1, 1, 0, 0}, {"10 steps", 1, 1, 1, 0, 0}, {"other", 1, 0, 0, 0, 0}}
		for i := range want {
			want[i].Low, want[i].High = Wilson95(want[i].Correct, want[i].Items)
		}
		if !slices.Equal(r.Groups, want) {
			t.Errorf("%s at %d: groups %+v", r.Mode, r.Budget, r.Groups)
		}
		if r.Rows <= 0 || r.Rows > float64(r.Budget) || r.WallTotal <= 0 {
			t.Errorf("%s at %d: %v rows, wall %v", r.Mode, r.Budget, r.Rows, r.WallTotal)
		}
	}
	for _, o := range tr.Outputs {
		if want := map[string]string{"a": "3 steps", "d": "other"}[o.Item]; want != "" && o.Group != want {
			t.Errorf("output of %s in group %q", o.Item, o.Group)
		}
	}
	rep := &Report{Model: "synth", Config: cfg, Tasks: []*TaskReport{tr}}
	var b bytes.Buffer
	if err := rep.Markdown(&b, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| mode | K | accuracy [95% CI] | coverage [95% CI] | 2 steps | 3 steps | 10 steps | other | rows/problem | tokens/problem | forks | cut | wall s |",
		"| greedy | 1 | **60.0%** [23.1, 88.2] (3/5) | 60.0% [23.1, 88.2] | 50.0% (1/2) | 100.0% (1/1) | 100.0% (1/1) | 0.0% (0/1) |",
		"| beam | 2 | **60.0%** [23.1, 88.2] (3/5) | 60.0% [23.1, 88.2] |",
		"### Accuracy against rows spent",
		"| greedy | 60.0% (coverage 60.0%) at ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := rep.Markdown(&b, MarkdownOptions{NoTimings: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "wall") {
		t.Errorf("NoTimings markdown holds the wall column:\n%s", b.String())
	}
}

// fakeArith is a task report with groups and accuracies that vary with the
// budget, as a trained model's would.
func fakeArith() *TaskReport {
	t := &TaskReport{Task: "arith", Items: 100, Checked: true, MaxTokens: 128, Budgets: []int{128, 256, 512, 1024},
		Groups: []string{"2 steps", "3 steps", "4 steps", "5 steps"}}
	for bi, budget := range t.Budgets {
		for mi, mode := range engine.Modes() {
			width, rows := 1, 70.0
			if branching(mode) {
				width = budget / 128
				rows = 70 * float64(width) * (1 - 0.1*float64(mi-3))
			}
			correct := 20 + 3*mi
			if branching(mode) {
				correct += 5 * bi
			}
			r := ModeResult{Budget: budget, Mode: mode, Width: width, Correct: correct, Accuracy: float64(correct) / 100,
				Tokens: 70, Rows: rows, WallTotal: time.Duration(rows) * 10 * time.Millisecond}
			r.AccuracyLow, r.AccuracyHigh = Wilson95(correct, 100)
			for gi, g := range t.Groups {
				c := min(25, correct/4+2-gi)
				lo, hi := Wilson95(c, 25)
				r.Groups = append(r.Groups, GroupResult{Group: g, Items: 25, Correct: c, Accuracy: float64(c) / 25, Low: lo, High: hi})
			}
			t.Results = append(t.Results, r)
		}
	}
	return t
}

func TestAccuracySVG(t *testing.T) {
	rep := &Report{Model: "fake", Config: DefaultEvalConfig(), Tasks: []*TaskReport{fakeArith()}}
	var b bytes.Buffer
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	// A well-formed XML document whose root is an svg element.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	svg := b.String()
	if root != "svg" || !strings.Contains(svg, "arith: accuracy vs compute") || !strings.Contains(svg, "accuracy (%), 95% Wilson interval") ||
		!strings.Contains(svg, "beam-adaptive") || !strings.Contains(svg, "arith: log-likelihood per token vs compute") {
		t.Errorf("SVG (root %q) lacks its parts:\n%.500s", root, svg)
	}
	if os.Getenv("BENCH_SVG_OUT") != "" { // to look at it
		os.WriteFile(os.Getenv("BENCH_SVG_OUT"), b.Bytes(), 0o644)
	}
	// An unchecked task has no accuracy panel.
	tr := fakeArith()
	tr.Checked = false
	b.Reset()
	if err := (&Report{Config: DefaultEvalConfig(), Tasks: []*TaskReport{tr}}).WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "accuracy vs compute") {
		t.Error("an unchecked task has an accuracy panel")
	}
}
