package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Calibration is how well a verifier's probabilities match the outcomes
// of the paths it judged.
type Calibration struct {
	N, Right int
	// Accuracy is the share of paths whose verdict (p >= 0.5) is the
	// label; Brier the mean squared error of p; ECE the expected
	// calibration error over the bins; AUC the probability that a right
	// path gets a higher p than a wrong one (ties count half).
	Accuracy, Brier, ECE, AUC float64
	Bins                      []CalibrationBin
	// PairRanking is the share of Pairs, each a right and a wrong path to
	// the same problem, in which the right one gets the higher p (ties
	// count half): what choosing among one problem's paths needs, which
	// AUC mixes with telling hard problems from easy ones. Set by
	// WithPairs.
	PairRanking float64
	Pairs       int
}

// WithPairs returns c with its pair ranking measured: probs and right as
// given to Calibrate, problem the problem of each path.
func (c Calibration) WithPairs(probs []float64, right []bool, problem []int) Calibration {
	type side struct{ pos, neg []float64 }
	by := map[int]*side{}
	for i, p := range probs {
		if math.IsNaN(p) {
			continue
		}
		s := by[problem[i]]
		if s == nil {
			s = &side{}
			by[problem[i]] = s
		}
		if right[i] {
			s.pos = append(s.pos, p)
		} else {
			s.neg = append(s.neg, p)
		}
	}
	var wins float64
	c.Pairs = 0
	for _, s := range by {
		for _, p := range s.pos {
			for _, q := range s.neg {
				c.Pairs++
				switch {
				case p > q:
					wins++
				case p == q:
					wins += 0.5
				}
			}
		}
	}
	c.PairRanking = 0
	if c.Pairs > 0 {
		c.PairRanking = wins / float64(c.Pairs)
	}
	return c
}

// CalibrationBin is one bin of a reliability diagram: the paths whose p
// lies in [Lo, Hi), their mean p and the share that were right.
type CalibrationBin struct {
	Lo, Hi   float64
	N, Right int
	MeanP    float64
}

// Calibrate measures probabilities probs against labels right in bins
// equal bins of [0, 1]; NaN probabilities are left out.
func Calibrate(probs []float64, right []bool, bins int) Calibration {
	c := Calibration{Bins: make([]CalibrationBin, bins)}
	for i := range c.Bins {
		c.Bins[i].Lo, c.Bins[i].Hi = float64(i)/float64(bins), float64(i+1)/float64(bins)
	}
	var pos, neg []float64
	for i, p := range probs {
		if math.IsNaN(p) {
			continue
		}
		c.N++
		y := 0.0
		if right[i] {
			c.Right++
			y = 1
			pos = append(pos, p)
		} else {
			neg = append(neg, p)
		}
		if (p >= 0.5) == right[i] {
			c.Accuracy++
		}
		c.Brier += (p - y) * (p - y)
		b := &c.Bins[min(int(p*float64(bins)), bins-1)]
		b.N++
		b.MeanP += p
		if right[i] {
			b.Right++
		}
	}
	if c.N == 0 {
		return c
	}
	for i := range c.Bins {
		b := &c.Bins[i]
		if b.N > 0 {
			b.MeanP /= float64(b.N)
			c.ECE += float64(b.N) / float64(c.N) * math.Abs(b.MeanP-float64(b.Right)/float64(b.N))
		}
	}
	c.Accuracy /= float64(c.N)
	c.Brier /= float64(c.N)
	// AUC by ranks: for each right path, the wrong ones below it.
	slices.Sort(neg)
	var wins float64
	for _, p := range pos {
		lo, _ := slices.BinarySearch(neg, p)
		hi := lo
		for hi < len(neg) && neg[hi] == p {
			hi++
		}
		wins += float64(lo) + 0.5*float64(hi-lo)
	}
	if len(pos) > 0 && len(neg) > 0 {
		c.AUC = wins / float64(len(pos)*len(neg))
	}
	return c
}

// Markdown writes the summary and the reliability table.
func (c Calibration) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d paths, %d right (%.1f%%): verdict accuracy %.1f%%, AUC %.3f, Brier %.4f, ECE %.3f\n\n",
		c.N, c.Right, 100*float64(c.Right)/float64(max(c.N, 1)), 100*c.Accuracy, c.AUC, c.Brier, c.ECE)
	if c.Pairs > 0 {
		fmt.Fprintf(&b, "Pair ranking: of %d pairs of a right and a wrong answer to the same problem, the right one judged higher in %.1f%%\n\n",
			c.Pairs, 100*c.PairRanking)
	}
	b.WriteString("| p(right) | paths | mean p | share right [95% CI] |\n| --- | ---: | ---: | ---: |\n")
	for _, x := range c.Bins {
		if x.N == 0 {
			fmt.Fprintf(&b, "| %.1f-%.1f | 0 | - | - |\n", x.Lo, x.Hi)
			continue
		}
		lo, hi := Wilson95(x.Right, x.N)
		fmt.Fprintf(&b, "| %.1f-%.1f | %d | %.3f | %.1f%% [%.1f, %.1f] |\n", x.Lo, x.Hi, x.N, x.MeanP,
			100*float64(x.Right)/float64(x.N), 100*lo, 100*hi)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSVG draws the reliability diagram: the share of right paths (with
// its 95 % interval) against the mean probability of each bin, and the
// diagonal of perfect calibration.
func (c Calibration) WriteSVG(w io.Writer, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "verifier's p(right), mean of the bin"
	p.Y.Label.Text = "share of the bin's paths that are right"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Add(plotter.NewGrid())
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return err
	}
	diag.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(diag)
	var pts errPoints
	for _, x := range c.Bins {
		if x.N == 0 {
			continue
		}
		y := float64(x.Right) / float64(x.N)
		lo, hi := Wilson95(x.Right, x.N)
		pts.XYs = append(pts.XYs, plotter.XY{X: x.MeanP, Y: y})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{y - lo, hi - y})
	}
	if len(pts.XYs) > 0 {
		l, marks, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return err
		}
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		l.Color, marks.Color, bars.Color = modePalette[0], modePalette[0], modePalette[0]
		p.Add(l, marks, bars)
		p.Legend.Add("verifier", l, marks)
		p.Legend.Add("perfect calibration", diag)
		p.Legend.Top, p.Legend.Left = true, true
	}
	cv := vgsvg.New(5.5*vg.Inch, 5*vg.Inch)
	p.Draw(draw.New(cv))
	_, err = cv.WriteTo(w)
	return err
}
