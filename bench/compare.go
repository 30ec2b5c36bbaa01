package bench

import (
	"fmt"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A Series is one line of a comparison across evaluations: a mode of one
// report (say, with a verifier) through its budgets.
type Series struct {
	Label  string
	Points []ModeResult
}

// CompareSeries returns the series of the first checked task of each
// report, one per mode, labelled "mode" plus the report's suffix.
func CompareSeries(reps []*Report, suffixes []string) []Series {
	var out []Series
	for i, r := range reps {
		for _, t := range r.Tasks {
			if !t.Checked {
				continue
			}
			byMode := map[string]int{}
			for _, x := range t.Results {
				label := x.Mode.String() + suffixes[i]
				j, ok := byMode[label]
				if !ok {
					j = len(out)
					byMode[label] = j
					out = append(out, Series{Label: label})
				}
				out[j].Points = append(out[j].Points, x)
			}
			break
		}
	}
	return out
}

// CompareMarkdown writes one table: each series at each of its budgets,
// accuracy and coverage with their 95 % intervals at the rows spent.
func CompareMarkdown(w io.Writer, series []Series) error {
	var b strings.Builder
	b.WriteString("| mode | budget (rows) | K | rows spent | accuracy [95% CI] | coverage [95% CI] |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range series {
		for _, x := range s.Points {
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %s | %s |\n", s.Label, x.Budget, x.Width, x.Rows, accuracyCI(x), coverageCI(x))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareSVG draws accuracy and coverage (with their 95 % intervals)
// against the rows spent, one line a series, as two panels.
func CompareSVG(w io.Writer, title string, series []Series) error {
	var row []*plot.Plot
	for _, pn := range []struct {
		name          string
		value, lo, hi func(ModeResult) float64
	}{
		{"accuracy", func(x ModeResult) float64 { return x.Accuracy }, func(x ModeResult) float64 { return x.AccuracyLow }, func(x ModeResult) float64 { return x.AccuracyHigh }},
		{"coverage", func(x ModeResult) float64 { return x.Coverage }, func(x ModeResult) float64 { return x.CoverageLow }, func(x ModeResult) float64 { return x.CoverageHigh }},
	} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s vs compute", title, pn.name)
		p.X.Label.Text = "forward rows spent per problem (mean, log scale; the verifier's included)"
		p.Y.Label.Text = pn.name + " (%), 95% Wilson interval"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		ymin, ymax := 100.0, 0.0
		for i, s := range series {
			var pts errPoints
			for _, x := range s.Points {
				if x.Rows <= 0 {
					continue
				}
				y := 100 * pn.value(x)
				pts.XYs = append(pts.XYs, plotter.XY{X: x.Rows, Y: y})
				pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{y - 100*pn.lo(x), 100*pn.hi(x) - y})
				ymin, ymax = min(ymin, 100*pn.lo(x)), max(ymax, 100*pn.hi(x))
			}
			if len(pts.XYs) == 0 {
				continue
			}
			l, marks, err := plotter.NewLinePoints(pts.XYs)
			if err != nil {
				return fmt.Errorf("bench: svg: %w", err)
			}
			bars, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return fmt.Errorf("bench: svg: %w", err)
			}
			c := modePalette[i%len(modePalette)]
			l.Color, marks.Color, bars.Color = c, c, c
			if strings.Contains(s.Label, "verifier") {
				l.Width = 2 * vg.Points(1)
			} else {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			if strings.HasPrefix(s.Label, "beam-adaptive") {
				l.Width = 3 * vg.Points(1)
			}
			p.Add(l, marks, bars)
			p.Legend.Add(s.Label, l, marks)
		}
		p.Y.Min = max(0, 5*math.Floor(ymin/5-0.5))
		top := 5 * math.Ceil(ymax/5+0.5)
		p.Y.Max = top + 0.6*(top-p.Y.Min)
		row = append(row, p)
	}
	c := vgsvg.New(vg.Length(len(row))*7*vg.Inch, 6*vg.Inch)
	drawRow(draw.New(c), row)
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("bench: svg: %w", err)
	}
	return nil
}
