package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/engine"
)

// fakeTask builds a task report from (loglik, loop share, distinct-2,
// accuracy) per mode at two budgets: 64 rows (width 1) and 256 (width 4),
// for the modes at256 names.
func fakeTask(checked bool, at256 map[engine.Mode][4]float64) *TaskReport {
	t := &TaskReport{Task: "fake", Items: 10, Checked: checked, MaxTokens: 64, Budgets: []int{64, 256}}
	for _, budget := range t.Budgets {
		for _, mode := range engine.Modes() {
			if _, ok := at256[mode]; !ok {
				continue // the report holds the modes the test names
			}
			v := [4]float64{-1, 0.1, 0.3, 0.5}
			width := 1
			if budget == 256 {
				v = at256[mode]
				if branching(mode) {
					width = 4
				}
			}
			t.Results = append(t.Results, ModeResult{Budget: budget, Mode: mode, Width: width,
				LogLik: v[0], LoopShare: v[1], Distinct2: v[2], Accuracy: v[3], Correct: int(10 * v[3]),
				Tokens: 64, Rows: float64(63 * width), Wall: time.Duration(width) * time.Millisecond})
		}
	}
	return t
}

func TestNoGain(t *testing.T) {
	// At 256 rows beam-adaptive loses on loglik to beam, ties on loops
	// with sample, and wins distinct-2 and accuracy.
	lose := fakeTask(true, map[engine.Mode][4]float64{
		engine.Greedy:       {-0.5, 0.3, 0.1, 0.2},
		engine.Sample:       {-0.9, 0.0, 0.4, 0.3},
		engine.Entropix:     {-1.2, 0.0, 0.45, 0.3},
		engine.Beam:         {-0.4, 0.2, 0.1, 0.4},
		engine.CoTDecoding:  {-0.5, 0.3, 0.1, 0.1},
		engine.BeamAdaptive: {-1.0, 0.0, 0.5, 0.6},
	})
	ng := lose.NoGain()
	want := []string{
		"At 64 rows every branching mode has width 1",
		"At 256 rows, beam-adaptive was worse than the best other mode on loglik/token (-1.000, against beam -0.400); beam-adaptive only tied with the best other mode on loop share (0%, like sample, entropix).",
		"At 256 rows, the best branching mode only tied with the best single-path mode on loop share (0%, like sample, entropix).",
	}
	if len(ng) != len(want) {
		t.Fatalf("NoGain:\n%s", strings.Join(ng, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(ng[i], want[i]) {
			t.Errorf("NoGain[%d] = %q\nwant       %q", i, ng[i], want[i])
		}
	}
	f := lose.Findings()
	if len(f) != 2 ||
		!strings.Contains(f[1], "best loglik/token: beam (-0.400)") ||
		!strings.Contains(f[1], "best accuracy: beam-adaptive (60%)") ||
		!strings.Contains(f[1], "Among the modes with the fewest loops (0%), the most probable text came from sample (-0.900)") ||
		!strings.Contains(f[1], "Against the entropix sampler (the same quadrants on one path, sampling where the search branches): loglik/token -1.000 against -1.200") ||
		!strings.Contains(f[0], "best loglik/token: every mode (-1.000)") {
		t.Errorf("Findings:\n%s", strings.Join(f, "\n"))
	}

	// Beam-adaptive wins everything at 256 rows: only the width-1 budget
	// is listed.
	win := fakeTask(true, map[engine.Mode][4]float64{
		engine.Greedy:       {-0.5, 0.3, 0.1, 0.2},
		engine.Sample:       {-0.9, 0.1, 0.4, 0.3},
		engine.Entropix:     {-1.2, 0.1, 0.45, 0.3},
		engine.Beam:         {-0.4, 0.2, 0.1, 0.4},
		engine.CoTDecoding:  {-0.5, 0.3, 0.1, 0.1},
		engine.BeamAdaptive: {-0.3, 0.0, 0.5, 0.6},
	})
	if ng := win.NoGain(); len(ng) != 1 || !strings.Contains(ng[0], "width 1") {
		t.Errorf("NoGain when beam-adaptive wins:\n%s", strings.Join(ng, "\n"))
	}
	win.Results = win.Results[6:] // drop the width-1 budget
	var b bytes.Buffer
	if err := (&Report{Tasks: []*TaskReport{win}, Config: DefaultEvalConfig()}).Markdown(&b, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Nowhere among the modes run (greedy, sample, entropix, beam, cot-decoding, beam-adaptive): at every budget, on every metric, beam-adaptive beat every other mode and some branching mode beat every single-path mode.") {
		t.Errorf("no 'Nowhere' when branching always helped:\n%s", b.String())
	}
}

// TestNoGainClaimsOnlyWhatRan: a report of modes without beam-adaptive
// (here self-consistency and best-of) claims nothing of beam-adaptive, and
// one of a single mode claims nothing at all.
func TestNoGainClaimsOnlyWhatRan(t *testing.T) {
	for _, c := range []struct {
		modes map[engine.Mode][4]float64
		want  string
	}{
		{map[engine.Mode][4]float64{
			engine.SelfConsistency: {-0.5, 0.0, 0.5, 0.6},
			engine.BestOfN:         {-0.6, 0.1, 0.4, 0.5},
		}, "Nothing to compare: the modes run (self-consistency, best-of) hold neither beam-adaptive and another mode nor a branching and a single-path mode."},
		{map[engine.Mode][4]float64{
			engine.Greedy:          {-0.7, 0.1, 0.4, 0.3},
			engine.SelfConsistency: {-0.5, 0.0, 0.5, 0.6},
		}, "Nowhere among the modes run (greedy, self-consistency): at every budget, on every metric, some branching mode beat every single-path mode."},
		{map[engine.Mode][4]float64{
			engine.BeamAdaptive: {-0.5, 0.0, 0.5, 0.6},
		}, "Nothing to compare: the modes run (beam-adaptive)"},
	} {
		tr := fakeTask(true, c.modes)
		tr.Results = slices.DeleteFunc(tr.Results, func(r ModeResult) bool { return r.Budget == 64 })
		var b bytes.Buffer
		if err := (&Report{Tasks: []*TaskReport{tr}, Config: DefaultEvalConfig()}).Markdown(&b, MarkdownOptions{}); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !strings.Contains(out, c.want) || strings.Contains(out, "beam-adaptive beat") {
			t.Errorf("want %q in:\n%s", c.want, out)
		}
	}
}

func TestMarkdown(t *testing.T) {
	tr := fakeTask(false, map[engine.Mode][4]float64{
		engine.Greedy: {-0.5, 0.3, 0.1, 0}, engine.Sample: {math.NaN(), 0, 0, 0}, engine.Entropix: {-1.2, 0, 0.45, 0},
		engine.Beam: {-0.4, 0.2, 0.1, 0}, engine.CoTDecoding: {-0.5, 0.3, 0.1, 0}, engine.BeamAdaptive: {-1.0, 0, 0.5, 0},
	})
	rep := &Report{Model: "fake.bin", Params: 260_000, Threads: 2, Config: DefaultEvalConfig(), Tasks: []*TaskReport{tr},
		Speed: &SpeedSection{Overhead: []OverheadResult{{Mode: engine.Beam, Width: 16, Rows: 100, Wall: time.Millisecond, Share: 0.25}},
			Notes: []string{"External baselines skipped."}}}
	var full, quiet bytes.Buffer
	if err := rep.Markdown(&full, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rep.Markdown(&quiet, MarkdownOptions{NoTimings: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Model: fake.bin, 260K parameters, 2 threads",
		"### 256 rows per item",
		"| mode | K | loglik/token | loop share | distinct-2 | tokens | rows | forks | prunes | cut | wall |",
		"| beam | 4 | **-0.400** | 20% | 0.100 |",
		"| sample | 1 | - | **0%** |",
		"| beam-adaptive | 4 | -1.000 | **0%** | **0.500** | 64.0 | 252 |",
		"### Where branching did not help",
		"# Speed",
		"| beam | 16 | 100 | 1.0 ms |",
		"- External baselines skipped.",
	} {
		if !strings.Contains(full.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, full.String())
		}
	}
	for _, bad := range []string{"wall", " ms", "# Speed", "threads"} {
		if strings.Contains(quiet.String(), bad) {
			t.Errorf("NoTimings markdown holds %q:\n%s", bad, quiet.String())
		}
	}
	if strings.Contains(full.String(), "accuracy") {
		t.Error("an unchecked task shows accuracy")
	}
}

func TestWriteCSVJSONSVG(t *testing.T) {
	tr := fakeTask(true, map[engine.Mode][4]float64{
		engine.Greedy: {-0.5, 0.3, 0.1, 0.2}, engine.Sample: {math.NaN(), 0, 0, 0}, engine.Entropix: {-1.2, 0, 0.45, 0.3},
		engine.Beam: {-0.4, 0.2, 0.1, 0.4}, engine.CoTDecoding: {-0.5, 0.3, 0.1, 0.1}, engine.BeamAdaptive: {-1.0, 0, 0.5, 0.6},
	})
	rep := &Report{Model: "fake", Config: DefaultEvalConfig(), Tasks: []*TaskReport{tr}}

	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(tr.Results) || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("%d CSV rows, header %v", len(rows), rows[0])
	}
	if r := rows[len(rows)-1]; r[0] != "fake" || r[1] != "256" || r[2] != "beam-adaptive" || r[3] != "4" || r[5] != "-1" || r[9] != "0.6" {
		t.Errorf("last CSV row %v", r)
	}

	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Tasks []struct {
			Results []struct {
				Mode   string   `json:"mode"`
				LogLik *float64 `json:"loglik_per_token"`
			} `json:"results"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b.String())
	}
	res := back.Tasks[0].Results
	if res[7].Mode != "sample" || res[7].LogLik != nil || res[6].LogLik == nil || *res[6].LogLik != -0.5 {
		t.Errorf("JSON results: %+v", res[6:8])
	}

	b.Reset()
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if !strings.Contains(svg, "<svg") || !strings.Contains(svg, "beam-adaptive") || !strings.Contains(svg, "fake: log-likelihood per token vs compute") {
		t.Errorf("SVG lacks its parts:\n%.500s", svg)
	}
	if err := (&Report{}).WriteSVG(&b); err == nil {
		t.Error("SVG of an empty report: no error")
	}
}
