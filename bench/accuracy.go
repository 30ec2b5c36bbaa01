package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// z95 is the standard normal quantile of 0.975: a two-sided 95 % interval.
const z95 = 1.959963984540054

// Wilson95 returns the 95 % Wilson score interval of a proportion of
// correct successes in n trials, within [0, 1]; [0, 1] when n is 0.
func Wilson95(correct, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(correct) / nf
	z2 := z95 * z95
	d := 1 + z2/nf
	center := (p + z2/(2*nf)) / d
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / d
	lo, hi = max(center-half, 0), min(center+half, 1)
	// At 0 and n correct the bound is exactly 0 or 1, up to rounding.
	if correct <= 0 {
		lo = 0
	}
	if correct >= n {
		hi = 1
	}
	return lo, hi
}

// SortGroups sorts group labels in place: labels that start with a number
// by that number ("2 steps" before "10 steps"), then the others in
// lexical order.
func SortGroups(gs []string) {
	lead := func(s string) (int, bool) {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(s[:i])
		return n, err == nil
	}
	slices.SortStableFunc(gs, func(a, b string) int {
		x, okA := lead(a)
		y, okB := lead(b)
		switch {
		case okA && okB && x != y:
			return x - y
		case okA != okB:
			if okA {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// pct1 prints a share as a percentage with one decimal.
func pct1(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// accuracyCI prints an accuracy with its interval: "12.4% [9.8, 15.6]".
func accuracyCI(r ModeResult) string {
	return fmt.Sprintf("%s [%.1f, %.1f]", pct1(r.Accuracy), 100*r.AccuracyLow, 100*r.AccuracyHigh)
}

// accuracyTable writes the table of one budget of a task with groups:
// the accuracy with its interval and per group, the rows and tokens spent
// per problem, forks, cuts and the search time of all problems.
func (t *TaskReport) accuracyTable(b *strings.Builder, budget int, o MarkdownOptions) {
	rs := t.at(budget)
	fmt.Fprintf(b, "### %d rows per item\n\n| mode | K | accuracy [95%% CI] | coverage [95%% CI] |", budget)
	for _, g := range t.Groups {
		fmt.Fprintf(b, " %s |", g)
	}
	b.WriteString(" rows/problem | tokens/problem | forks | cut |")
	if !o.NoTimings {
		b.WriteString(" wall s |")
	}
	b.WriteString("\n| --- | ---: | ---: | ---: |")
	for range t.Groups {
		b.WriteString(" ---: |")
	}
	b.WriteString(" ---: | ---: | ---: | ---: |")
	if !o.NoTimings {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	acc := metric{"accuracy", func(r ModeResult) float64 { return r.Accuracy }, true, pct1}
	best := acc.best(rs)
	for _, r := range rs {
		cell := accuracyCI(r)
		if acc.format(r.Accuracy) == acc.format(best) {
			cell = "**" + pct1(r.Accuracy) + "**" + strings.TrimPrefix(cell, pct1(r.Accuracy))
		}
		fmt.Fprintf(b, "| %s | %d | %s (%d/%d) | %s |", r.Mode, r.Width, cell, r.Correct, t.Items, coverageCI(r))
		for _, g := range t.Groups {
			i := slices.IndexFunc(r.Groups, func(x GroupResult) bool { return x.Group == g })
			if i < 0 || r.Groups[i].Items == 0 {
				b.WriteString(" - |")
				continue
			}
			x := r.Groups[i]
			fmt.Fprintf(b, " %s (%d/%d) |", pct1(x.Accuracy), x.Correct, x.Items)
		}
		fmt.Fprintf(b, " %.1f | %.1f | %.2f | %s |", r.Rows, r.Tokens, r.Forks, pct(r.Cut))
		if !o.NoTimings {
			fmt.Fprintf(b, " %.1f |", r.WallTotal.Seconds())
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// rowsSpentTable writes, for a checked task, each mode's accuracy at each
// budget next to the rows it really spent: the comparison at equal
// compute.
func (t *TaskReport) rowsSpentTable(b *strings.Builder) {
	bs := t.budgets()
	b.WriteString("### Accuracy against rows spent\n\n")
	b.WriteString("Equal compute is compared at the forward rows a mode really spent (mean per item), not at the budget: a single-path mode stops at the end of its answer whatever the budget. Coverage is the share of items whose right answer is among the mode's complete paths or samples, chosen or not.\n\n| mode |")
	for _, budget := range bs {
		fmt.Fprintf(b, " budget %d |", budget)
	}
	b.WriteString("\n| --- |")
	for range bs {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	var modes []string
	for _, r := range t.Results {
		if !slices.Contains(modes, r.Mode.String()) {
			modes = append(modes, r.Mode.String())
		}
	}
	for _, mode := range modes {
		fmt.Fprintf(b, "| %s |", mode)
		for _, budget := range bs {
			i := slices.IndexFunc(t.Results, func(r ModeResult) bool { return r.Budget == budget && r.Mode.String() == mode })
			if i < 0 {
				b.WriteString(" - |")
				continue
			}
			r := t.Results[i]
			fmt.Fprintf(b, " %s (coverage %s) at %.0f rows |", pct1(r.Accuracy), pct1(r.Coverage), r.Rows)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// accuracyPlot is the accuracy panel of WriteSVG: each mode's accuracy
// (percent, with its 95 % interval as error bars) against the rows it
// spent, through its budgets, on ticks every 2, 5 or 10 points.
func (r *Report) accuracyPlot(t *TaskReport) (*plot.Plot, error) {
	p, top, err := r.intervalPlot(t, fmt.Sprintf("%s: accuracy vs compute", t.Task), "accuracy (%), 95% Wilson interval",
		func(x ModeResult) (y, lo, hi float64) { return x.Accuracy, x.AccuracyLow, x.AccuracyHigh })
	if err != nil {
		return nil, err
	}
	step := 5.0
	if top-p.Y.Min > 40 {
		step = 10
	}
	if top-p.Y.Min < 10 {
		step = 2
	}
	var ticks []plot.Tick
	for y := p.Y.Min; y <= min(top, 100)+1e-9; y += step {
		ticks = append(ticks, plot.Tick{Value: y, Label: strconv.FormatFloat(y, 'f', -1, 64)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	return p, nil
}

// intervalPlot plots a share per mode (percent, its 95 % interval as error
// bars; value gives the share and its bounds) against the rows each mode
// spent, through its budgets. It returns the plot and the top of the
// intervals' range, rounded up to 5 %, under the room left for the legend.
func (r *Report) intervalPlot(t *TaskReport, title, ylabel string, value func(ModeResult) (y, lo, hi float64)) (*plot.Plot, float64, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "forward rows spent per item (mean, log scale)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = budgetTicks(t)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	ymin, ymax := 100.0, 0.0
	for i, mode := range r.plotModes(t) {
		var pts errPoints
		for _, x := range t.Results {
			if x.Mode == mode && x.Rows > 0 {
				v, lo, hi := value(x)
				y := 100 * v
				pts.XYs = append(pts.XYs, plotter.XY{X: x.Rows, Y: y})
				pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{y - 100*lo, 100*hi - y})
				ymax = max(ymax, 100*hi)
				ymin = min(ymin, 100*lo)
			}
		}
		if len(pts.XYs) == 0 {
			continue
		}
		l, marks, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return nil, 0, fmt.Errorf("bench: svg: %w", err)
		}
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return nil, 0, fmt.Errorf("bench: svg: %w", err)
		}
		styleLine(l, marks, mode, i)
		bars.Color = l.Color
		p.Add(l, marks, bars)
		p.Legend.Add(mode.String(), l, marks)
	}
	setBudgetRange(p, t)
	// The range the intervals span, in steps of 5 %, with room above the
	// lines for the legend (a spread of a few points must show).
	ymin, ymax = min(ymin, ymax), max(ymax, ymin)
	p.Y.Min = max(0, 5*math.Floor(ymin/5-0.5))
	top := 5 * math.Ceil(ymax/5+0.5)
	p.Y.Max = top + 0.8*(top-p.Y.Min)
	return p, top, nil
}

// errPoints are points with vertical error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}
