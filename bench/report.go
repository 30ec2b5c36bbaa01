package bench

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/policy"
)

// Report is a whole evaluation: its tasks and, optionally, the speed of
// the model and the search.
type Report struct {
	Model   string        `json:"model"`
	Params  int64         `json:"params"`
	Threads int           `json:"threads"`
	Config  EvalConfig    `json:"config"`
	Tasks   []*TaskReport `json:"tasks"`
	Speed   *SpeedSection `json:"speed,omitempty"`
	Wall    time.Duration `json:"wall_ns"`
}

// SpeedSection is the speed part of a report.
type SpeedSection struct {
	// Speed holds MeasureSpeed's results on the evaluated model (with
	// llama.cpp's decode speed on the same model when it was run).
	Speed *SpeedReport `json:"speed,omitempty"`
	// Overhead is the search overhead at several widths.
	Overhead []OverheadResult `json:"overhead,omitempty"`
	// Llama2C is llama2.c's decode speed on the same checkpoint.
	Llama2C *Llama2CResult `json:"llama2c,omitempty"`
	// Notes say which measurements were skipped or failed, and why.
	Notes []string `json:"notes,omitempty"`
}

// MarkdownOptions change what Markdown writes.
type MarkdownOptions struct {
	// NoTimings leaves out everything measured in time (the wall
	// columns, the run time and the speed section), so that two runs
	// with the same seed give the same text.
	NoTimings bool
}

// Markdown writes the report: a header that states the setup, then for
// each task one table per budget, the findings and the places where
// branching did not help; then the speed section.
func (r *Report) Markdown(w io.Writer, o MarkdownOptions) error {
	var b strings.Builder
	r.header(&b, o)
	for _, t := range r.Tasks {
		t.markdown(&b, o)
	}
	if r.Speed != nil && !o.NoTimings {
		if err := r.Speed.markdown(&b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) header(b *strings.Builder, o MarkdownOptions) {
	c, _ := r.Config.withDefaults() // the zero fields as Eval filled them
	b.WriteString("# Quality versus compute\n\n")
	fmt.Fprintf(b, "Model: %s, %s parameters", r.Model, humanCount(r.Params))
	if !o.NoTimings {
		fmt.Fprintf(b, ", %d threads; the evaluation took %s", r.Threads, r.Wall.Round(100*time.Millisecond))
	}
	fmt.Fprintf(b, "; %v KV cache.\n\n", c.KVType)
	if c.VerifierName != "" {
		fmt.Fprintf(b, "Verifier: %s judges the complete paths of beam-adaptive, beam, self-consistency and best-of-N (%s); its forward rows count in the rows.\n\n", c.VerifierName, verifierRule)
	}
	modes := make([]string, len(c.Modes))
	for i, m := range c.Modes {
		modes[i] = m.String()
	}
	th := policy.DefaultConfig().Thresholds.Name
	if c.Policy != nil {
		th = c.Policy.Thresholds.Name
	}
	sp := engine.DefaultSampling()
	lr := c.Loop
	fmt.Fprintf(b, "Setup:\n\n")
	fmt.Fprintf(b, "- Modes: %s. Every item runs in every mode at every budget. A budget is the forward rows one item may spend after its prompt (engine `Budget.MaxRows`); at a budget, every mode gets the same rows and the same limit of new tokens (the task's).\n",
		strings.Join(modes, ", "))
	fmt.Fprintf(b, "- The single-path modes (greedy, sample, entropix) spend one row per token, so a budget above the token limit leaves them unchanged: the rows column says what each mode really spent.\n")
	fmt.Fprintf(b, "- Width K = budget / the token limit, between 1 and %d, so that K branches of the full length fit the budget: beam search keeps K beams, CoT-decoding starts K greedy branches from the K most probable first tokens, self-consistency and best-of-N draw K samples. Beam-adaptive advances at most %d branches at a time at every budget and opens a new one only when the rows left can pay for it to finish.\n", c.MaxWidth, c.AdaptiveWidth())
	fmt.Fprintf(b, "- Item i runs with seed %d+i in every mode and at every budget. Sample: temperature %g, top-k %d, top-p %g, min-p %g. Entropix and beam-adaptive: thresholds %s.", c.Seed, sp.Temperature, sp.TopK, sp.TopP, sp.MinP, th)
	if c.Chat {
		b.WriteString(" Prompts go through the model's chat template.")
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "- loglik/token: mean log-probability (nats) per output token under the model at temperature 1, from a fresh forward pass over prompt and output, pooled over the outputs; it measures how probable the text is, which greedy and beam search maximise, not how good it is.\n")
	fmt.Fprintf(b, "- loop share: share of outputs caught in a repetition loop: a unit of 1 to %d tokens repeated %d or more times in a row over at least %d tokens, or an output that ends in 2 or more repeats over at least %d tokens. distinct-2: distinct token bigrams over all bigrams of the outputs.\n",
		lr.MaxPeriod, lr.MinRepeats, lr.MinSpan, lr.TailSpan)
	fmt.Fprintf(b, "- tokens, rows, forks, prunes")
	if !o.NoTimings {
		b.WriteString(", wall (search only)")
	}
	b.WriteString(": means per item. cut: share of items the row budget stopped before the token limit or the end of text. Best values are in bold.\n\n")
}

// humanCount writes n as 260K, 15.2M, 1.2B.
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// budgets returns the task's budgets in order.
func (t *TaskReport) budgets() []int {
	var bs []int
	for _, r := range t.Results {
		if !slices.Contains(bs, r.Budget) {
			bs = append(bs, r.Budget)
		}
	}
	return bs
}

// at returns the results at one budget.
func (t *TaskReport) at(budget int) []ModeResult {
	var rs []ModeResult
	for _, r := range t.Results {
		if r.Budget == budget {
			rs = append(rs, r)
		}
	}
	return rs
}

// A metric is one quality column: its value, whether higher is better,
// and how to print it.
type metric struct {
	name   string
	value  func(ModeResult) float64
	higher bool
	format func(float64) string
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func (t *TaskReport) metrics() []metric {
	ms := []metric{
		{"loglik/token", func(r ModeResult) float64 { return r.LogLik }, true, func(x float64) string { return fmt.Sprintf("%.3f", x) }},
		{"loop share", func(r ModeResult) float64 { return r.LoopShare }, false, pct},
		{"distinct-2", func(r ModeResult) float64 { return r.Distinct2 }, true, func(x float64) string { return fmt.Sprintf("%.3f", x) }},
	}
	if t.Checked {
		ms = append(ms, metric{"accuracy", func(r ModeResult) float64 { return r.Accuracy }, true, pct})
	}
	return ms
}

// best returns the best value of m over rs (NaN when none is a number).
func (m metric) best(rs []ModeResult) float64 {
	b := math.NaN()
	for _, r := range rs {
		v := m.value(r)
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(b) || (m.higher && v > b) || (!m.higher && v < b) {
			b = v
		}
	}
	return b
}

// cell prints v, in bold when it is the best.
func (m metric) cell(v, best float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	s := m.format(v)
	if s == m.format(best) {
		return "**" + s + "**"
	}
	return s
}

func (t *TaskReport) markdown(b *strings.Builder, o MarkdownOptions) {
	fmt.Fprintf(b, "## Task: %s\n\n%d items, up to %d new tokens each; budgets of %s rows per item.\n\n", t.Task, t.Items, t.MaxTokens, joinInts(t.budgets()))
	if t.Checked {
		b.WriteString("Accuracy is the share of items answered correctly, with its 95% Wilson score interval in brackets (percent).")
		if len(t.Groups) > 0 {
			fmt.Fprintf(b, " It is then broken down by group (%s). rows/problem and tokens/problem are means per item, the rows being the forward rows the mode really spent, not the budget", strings.Join(t.Groups, ", "))
			if !o.NoTimings {
				b.WriteString("; wall s is the search time of all items together")
			}
			b.WriteString(".")
		}
		b.WriteString("\n\n")
	}
	ms := t.metrics()
	for _, budget := range t.budgets() {
		if len(t.Groups) > 0 {
			t.accuracyTable(b, budget, o)
			continue
		}
		rs := t.at(budget)
		fmt.Fprintf(b, "### %d rows per item\n\n| mode | K |", budget)
		for _, m := range ms {
			fmt.Fprintf(b, " %s |", m.name)
			if m.name == "accuracy" {
				b.WriteString(" coverage |")
			}
		}
		b.WriteString(" tokens | rows | forks | prunes | cut |")
		if !o.NoTimings {
			b.WriteString(" wall |")
		}
		b.WriteString("\n| --- | ---: |")
		for _, m := range ms {
			b.WriteString(" ---: |")
			if m.name == "accuracy" {
				b.WriteString(" ---: |")
			}
		}
		b.WriteString(" ---: | ---: | ---: | ---: | ---: |")
		if !o.NoTimings {
			b.WriteString(" ---: |")
		}
		b.WriteString("\n")
		bests := make([]float64, len(ms))
		for i, m := range ms {
			bests[i] = m.best(rs)
		}
		for _, r := range rs {
			fmt.Fprintf(b, "| %s | %d |", r.Mode, r.Width)
			for i, m := range ms {
				c := m.cell(m.value(r), bests[i])
				if m.name == "accuracy" {
					c = fmt.Sprintf("%s [%.0f, %.0f] (%d/%d) | %s [%.0f, %.0f]", c, 100*r.AccuracyLow, 100*r.AccuracyHigh, r.Correct, t.Items,
						pct(r.Coverage), 100*r.CoverageLow, 100*r.CoverageHigh)
				}
				fmt.Fprintf(b, " %s |", c)
			}
			fmt.Fprintf(b, " %.1f | %.0f | %.2f | %.2f | %s |", r.Tokens, r.Rows, r.Forks, r.Prunes, pct(r.Cut))
			if !o.NoTimings {
				fmt.Fprintf(b, " %s |", fmtMs(r.Wall))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if t.Checked {
		t.rowsSpentTable(b)
	}
	b.WriteString("### Findings\n\n")
	for _, f := range t.Findings() {
		fmt.Fprintf(b, "- %s\n", f)
	}
	b.WriteString("\n### Where branching did not help\n\n")
	if nh := t.NoGain(); len(nh) > 0 {
		for _, f := range nh {
			fmt.Fprintf(b, "- %s\n", f)
		}
	} else {
		b.WriteString(t.noLossSentence() + "\n")
	}
	b.WriteString("\n")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// winners returns the modes that reach the best value of m in rs.
func (m metric) winners(rs []ModeResult) (names string, best float64) {
	best = m.best(rs)
	var ns []string
	for _, r := range rs {
		if v := m.value(r); !math.IsNaN(v) && m.format(v) == m.format(best) {
			ns = append(ns, r.Mode.String())
		}
	}
	return strings.Join(ns, ", "), best
}

// Findings says, for each budget, which modes had the best value of each
// metric, how beam-adaptive ranked and how much of the budget it used.
// They are computed from the numbers, without timings.
func (t *TaskReport) Findings() []string {
	var fs []string
	ms := t.metrics()
	for _, budget := range t.budgets() {
		rs := t.at(budget)
		var parts []string
		for _, m := range ms {
			names, best := m.winners(rs)
			if names == "" {
				continue
			}
			if len(rs) > 1 && strings.Count(names, ",") == len(rs)-1 {
				names = "every mode"
			}
			parts = append(parts, fmt.Sprintf("best %s: %s (%s)", m.name, names, m.format(best)))
		}
		f := fmt.Sprintf("%d rows: %s.", budget, strings.Join(parts, "; "))
		// The most probable text among the modes with the fewest loops:
		// likelihood alone rewards degenerate repetition.
		ll, loop := ms[0], ms[1]
		if _, fewest := loop.winners(rs); !math.IsNaN(fewest) {
			var calm []ModeResult
			for _, r := range rs {
				if loop.format(r.LoopShare) == loop.format(fewest) {
					calm = append(calm, r)
				}
			}
			if names, best := ll.winners(calm); names != "" && len(calm) < len(rs) {
				f += fmt.Sprintf(" Among the modes with the fewest loops (%s), the most probable text came from %s (%s).", loop.format(fewest), names, ll.format(best))
			}
		}
		find := func(mode engine.Mode) (ModeResult, bool) {
			i := slices.IndexFunc(rs, func(r ModeResult) bool { return r.Mode == mode })
			if i < 0 {
				return ModeResult{}, false
			}
			return rs[i], true
		}
		if ba, ok := find(engine.BeamAdaptive); ok {
			var ranks []string
			for _, m := range ms {
				ranks = append(ranks, fmt.Sprintf("%s %s (rank %d of %d)", m.name, m.format(m.value(ba)), rank(m, rs, ba), len(rs)))
			}
			f += fmt.Sprintf(" Beam-adaptive (K=%d): %s; it spent %.0f of %d rows (%.0f%%), forking %.1f times per item.",
				ba.Width, strings.Join(ranks, ", "), ba.Rows, budget, 100*ba.Rows/float64(budget), ba.Forks)
			if ex, ok := find(engine.Entropix); ok && ba.Width > 1 {
				var vs []string
				for _, m := range ms {
					vs = append(vs, fmt.Sprintf("%s %s against %s", m.name, m.format(m.value(ba)), m.format(m.value(ex))))
				}
				f += fmt.Sprintf(" Against the entropix sampler (the same quadrants on one path, sampling where the search branches): %s, for %.0f rows against %.0f.", strings.Join(vs, ", "), ba.Rows, ex.Rows)
			}
		}
		fs = append(fs, f)
	}
	return fs
}

// rank is 1 + the number of results strictly better than r on m.
func rank(m metric, rs []ModeResult, r ModeResult) int {
	v, n := m.value(r), 1
	for _, o := range rs {
		w := m.value(o)
		if math.IsNaN(w) || m.format(w) == m.format(v) {
			continue
		}
		if math.IsNaN(v) || (m.higher && w > v) || (!m.higher && w < v) {
			n++
		}
	}
	return n
}

// NoGain says, in plain sentences, where branching did not help: for each
// budget, the metrics on which beam-adaptive was worse than (or only tied
// with) the best other mode, and those on which no branching mode (beam,
// cot-decoding, beam-adaptive) beat the best single-path mode (greedy,
// sample, entropix). A budget that gives every branching mode width 1
// leaves no room to branch, and says so.
func (t *TaskReport) NoGain() []string {
	var out []string
	ms := t.metrics()
	for _, budget := range t.budgets() {
		rs := t.at(budget)
		var ba, others, branch, single []ModeResult
		wide := false
		for _, r := range rs {
			if r.Mode == engine.BeamAdaptive {
				ba = append(ba, r)
			} else {
				others = append(others, r)
			}
			if branching(r.Mode) {
				branch = append(branch, r)
				wide = wide || r.Width > 1
			} else {
				single = append(single, r)
			}
		}
		if len(branch) > 0 && !wide {
			out = append(out, fmt.Sprintf("At %d rows every branching mode has width 1, so nothing can branch: beam search and CoT-decoding are greedy decoding, beam-adaptive is the entropix sampler.", budget))
			continue
		}
		if len(ba) > 0 && len(others) > 0 {
			var worse, tied []string
			for _, m := range ms {
				names, best := m.winners(others)
				v := m.value(ba[0])
				switch {
				case beats(m, ba, others):
				case !math.IsNaN(v) && m.format(v) == m.format(best):
					tied = append(tied, fmt.Sprintf("%s (%s, like %s)", m.name, m.format(v), names))
				default:
					worse = append(worse, fmt.Sprintf("%s (%s, against %s %s)", m.name, m.format(v), names, m.format(best)))
				}
			}
			if s := lostSentence(budget, "beam-adaptive was worse than the best other mode", "beam-adaptive only tied with the best other mode", worse, tied); s != "" {
				out = append(out, s)
			}
		}
		if len(branch) > 0 && len(single) > 0 {
			var worse, tied []string
			for _, m := range ms {
				sn, sb := m.winners(single)
				bn, bb := m.winners(branch)
				switch {
				case beats(m, branch, single):
				case m.format(sb) == m.format(bb):
					tied = append(tied, fmt.Sprintf("%s (%s, like %s)", m.name, m.format(bb), sn))
				default:
					worse = append(worse, fmt.Sprintf("%s (best branching %s %s, against %s %s)", m.name, bn, m.format(bb), sn, m.format(sb)))
				}
			}
			if s := lostSentence(budget, "no branching mode reached the best single-path mode", "the best branching mode only tied with the best single-path mode", worse, tied); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// noLossSentence is the section's text when NoGain found nothing: it
// claims only the comparisons the modes that ran allow.
func (t *TaskReport) noLossSentence() string {
	var ba, other, branch, single bool
	var modes []string
	for _, r := range t.Results {
		if slices.Contains(modes, r.Mode.String()) {
			continue
		}
		modes = append(modes, r.Mode.String())
		ba = ba || r.Mode == engine.BeamAdaptive
		other = other || r.Mode != engine.BeamAdaptive
		branch = branch || branching(r.Mode)
		single = single || !branching(r.Mode)
	}
	var claims []string
	if ba && other {
		claims = append(claims, "beam-adaptive beat every other mode")
	}
	if branch && single {
		claims = append(claims, "some branching mode beat every single-path mode")
	}
	if len(claims) == 0 {
		return fmt.Sprintf("Nothing to compare: the modes run (%s) hold neither beam-adaptive and another mode nor a branching and a single-path mode.", strings.Join(modes, ", "))
	}
	return fmt.Sprintf("Nowhere among the modes run (%s): at every budget, on every metric, %s.", strings.Join(modes, ", "), strings.Join(claims, " and "))
}

// lostSentence writes "At B rows, <worse> on ...; <tied> on ...".
func lostSentence(budget int, worseVerb, tiedVerb string, worse, tied []string) string {
	var parts []string
	if len(worse) > 0 {
		parts = append(parts, fmt.Sprintf("%s on %s", worseVerb, strings.Join(worse, ", ")))
	}
	if len(tied) > 0 {
		parts = append(parts, fmt.Sprintf("%s on %s", tiedVerb, strings.Join(tied, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("At %d rows, %s.", budget, strings.Join(parts, "; "))
}

// beats reports whether the best of a is strictly better on m than the
// best of b, as printed.
func beats(m metric, a, b []ModeResult) bool {
	x, y := m.best(a), m.best(b)
	switch {
	case math.IsNaN(x):
		return false
	case math.IsNaN(y):
		return true
	case m.format(x) == m.format(y):
		return false
	case m.higher:
		return x > y
	}
	return x < y
}

// OverheadMarkdown writes the search-overhead table (nothing for none).
func OverheadMarkdown(b *strings.Builder, res []OverheadResult) {
	if len(res) == 0 {
		return
	}
	b.WriteString("Search overhead: time outside the forward pass (policy, tree, bookkeeping), from the engine's own accounting (1 - ForwardTime/Wall); width is the most branches live at once\n\n")
	b.WriteString("| mode | width | rows per search | wall | forward | outside forward | per row |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, o := range res {
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %.1f%% | %.2f µs |\n", o.Name(), o.Width, o.Rows, fmtMs(o.Wall), fmtMs(o.Forward), 100*o.Share, float64(o.PerRow)/float64(time.Microsecond))
	}
	b.WriteString("\n")
}

func (s *SpeedSection) markdown(b *strings.Builder) error {
	b.WriteString("# Speed\n\n")
	if s.Speed != nil {
		if err := s.Speed.Markdown(b); err != nil {
			return err
		}
	}
	OverheadMarkdown(b, s.Overhead)
	if sp := s.Speed; sp != nil && (sp.Llama != nil || s.Llama2C != nil) {
		b.WriteString("Baselines on the same model, same machine, same run\n\n| program | decode tokens/s | ours / theirs |\n| --- | ---: | ---: |\n")
		fmt.Fprintf(b, "| entropix-search (single stream, %d threads) | %.1f | 1.00 |\n", sp.Threads, sp.Decode.TokensPerSec)
		if l := sp.Llama; l != nil {
			fmt.Fprintf(b, "| llama.cpp llama-bench (%d threads) | %.1f | %.2f |\n", l.Threads, l.TokensPerSec, sp.Decode.TokensPerSec/l.TokensPerSec)
		}
		if l := s.Llama2C; l != nil {
			fmt.Fprintf(b, "| llama2.c run (%d steps) | %.1f | %.2f |\n", l.Steps, l.TokensPerSec, sp.Decode.TokensPerSec/l.TokensPerSec)
		}
		b.WriteString("\n")
		if sp.Params > 0 && sp.Params < 10_000_000 {
			b.WriteString("On a model this small a token costs microseconds, so these ratios measure the fixed cost per token (graph setup, thread hand-offs, sampling, printing) more than arithmetic speed; compare on a larger model for that.\n\n")
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if len(s.Notes) > 0 {
		b.WriteString("\n")
	}
	return nil
}

// csvHeader names the columns of WriteCSV.
var csvHeader = []string{"task", "budget_rows", "mode", "width", "items", "loglik_per_token", "loop_share", "distinct2",
	"correct", "accuracy", "tokens", "rows", "forks", "prunes", "cut_share", "wall_ms", "forward_ms",
	"accuracy_low", "accuracy_high", "wall_total_s", "covered", "coverage", "coverage_low", "coverage_high"}

// WriteCSV writes one line per task, budget and mode.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	ms := func(d time.Duration) string { return f(float64(d) / float64(time.Millisecond)) }
	for _, t := range r.Tasks {
		for _, x := range t.Results {
			acc, lo, hi := "", "", ""
			cov, clo, chi := "", "", ""
			if t.Checked {
				acc, lo, hi = f(x.Accuracy), f(x.AccuracyLow), f(x.AccuracyHigh)
				cov, clo, chi = f(x.Coverage), f(x.CoverageLow), f(x.CoverageHigh)
			}
			cw.Write([]string{t.Task, strconv.Itoa(x.Budget), x.Mode.String(), strconv.Itoa(x.Width), strconv.Itoa(t.Items),
				f(x.LogLik), f(x.LoopShare), f(x.Distinct2), strconv.Itoa(x.Correct), acc,
				f(x.Tokens), f(x.Rows), f(x.Forks), f(x.Prunes), f(x.Cut), ms(x.Wall), ms(x.Forward),
				lo, hi, f(x.WallTotal.Seconds()), strconv.Itoa(x.Covered), cov, clo, chi})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the whole report, every output included, as JSON. A log-likelihood that is not a number (no tokens) is written as
// null.
func (r *Report) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

// MarshalJSON writes NaN log-likelihoods as null.
func (m ModeResult) MarshalJSON() ([]byte, error) {
	type plain ModeResult
	var ll *float64
	if !math.IsNaN(m.LogLik) {
		ll = &m.LogLik
	}
	return json.Marshal(struct {
		plain
		LogLik *float64 `json:"loglik_per_token"`
	}{plain(m), ll})
}

// WriteSVG draws the first task's log-likelihood per token and loop share
// against the rows spent, one line per mode through its budgets, as an
// SVG image of two panels; for a checked task, a first panel draws the
// accuracy against the rows spent, with its 95 % interval as error bars.
func (r *Report) WriteSVG(w io.Writer) error {
	row, err := r.plots()
	if err != nil {
		return err
	}
	c := vgsvg.New(vg.Length(len(row))*6.5*vg.Inch, 5*vg.Inch)
	drawRow(draw.New(c), row)
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("bench: svg: %w", err)
	}
	return nil
}

// drawRow draws plots side by side on dc.
func drawRow(dc draw.Canvas, row []*plot.Plot) {
	pad := vg.Inch / 8
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: 2 * pad, PadY: pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad}
	cs := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(cs[0][i])
	}
}

// plots returns the panels of WriteSVG.
func (r *Report) plots() ([]*plot.Plot, error) {
	if len(r.Tasks) == 0 {
		return nil, errors.New("bench: svg: the report has no task")
	}
	t := r.Tasks[0]
	var row []*plot.Plot
	if t.Checked {
		p, err := r.accuracyPlot(t)
		if err != nil {
			return nil, err
		}
		row = append(row, p)
		if p, err = r.coveragePlot(t); err != nil {
			return nil, err
		}
		row = append(row, p)
	}
	panels := []struct {
		title, y string
		value    func(ModeResult) float64
	}{
		{"log-likelihood per token vs compute", "loglik/token (nats, higher = more probable)", func(m ModeResult) float64 { return m.LogLik }},
		{"repetition loops vs compute", "share of outputs in a loop", func(m ModeResult) float64 { return m.LoopShare }},
	}
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s", t.Task, pn.title)
		p.X.Label.Text = "forward rows spent per item (log scale)"
		p.Y.Label.Text = pn.y
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = budgetTicks(t)
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for i, mode := range r.plotModes(t) {
			var xys plotter.XYs
			for _, x := range t.Results {
				if v := pn.value(x); x.Mode == mode && !math.IsNaN(v) && x.Rows > 0 {
					xys = append(xys, plotter.XY{X: x.Rows, Y: v})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("bench: svg: %w", err)
			}
			styleLine(l, pts, mode, i)
			p.Add(l, pts)
			p.Legend.Add(mode.String(), l, pts)
		}
		setBudgetRange(p, t)
		// Room above the lines for the legend.
		p.Y.Max += 0.5*(p.Y.Max-p.Y.Min) + 0.02
		row = append(row, p)
	}
	return row, nil
}

// modePalette gives each line its own colour (plotutil's palettes have
// seven, and a report can hold eight modes): the Tableau 10 colours.
var modePalette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

// styleLine styles the line and marks of the i-th mode; beam-adaptive,
// the product, is drawn thicker.
func styleLine(l *plotter.Line, pts *plotter.Scatter, mode engine.Mode, i int) {
	c := modePalette[i%len(modePalette)]
	l.Color, pts.Color = c, c
	l.Dashes = plotutil.Dashes(i)
	pts.Shape = plotutil.Shape(i)
	if mode == engine.BeamAdaptive {
		l.Width = 2 * vg.Points(1)
		l.Dashes = nil
	}
}

// plotModes are the modes drawn, one line each: the config's, or those
// of the task's results when the config names none.
func (r *Report) plotModes(t *TaskReport) []engine.Mode {
	if len(r.Config.Modes) > 0 {
		return r.Config.Modes
	}
	var ms []engine.Mode
	for _, x := range t.Results {
		if !slices.Contains(ms, x.Mode) {
			ms = append(ms, x.Mode)
		}
	}
	return ms
}

// budgetTicks marks the task's budgets on the rows axis.
func budgetTicks(t *TaskReport) plot.Ticker {
	var ticks []plot.Tick
	for _, b := range t.budgets() {
		ticks = append(ticks, plot.Tick{Value: float64(b), Label: strconv.Itoa(b)})
	}
	return plot.ConstantTicks(ticks)
}

// setBudgetRange widens the rows axis to take in every budget.
func setBudgetRange(p *plot.Plot, t *TaskReport) {
	if bs := t.budgets(); len(bs) > 0 {
		p.X.Min = min(p.X.Min, float64(slices.Min(bs))) / 1.1
		p.X.Max = max(p.X.Max, float64(slices.Max(bs))) * 1.1
	}
}
