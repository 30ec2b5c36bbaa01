package bench

import (
	"fmt"

	"github.com/entropix-search/entropix-search/engine"
	"gonum.org/v1/plot"
)

// Coverage is the share of items whose right answer is among a mode's
// complete paths: beam-adaptive's finished paths, beam search's finished
// hypotheses, self-consistency's and best-of-N's samples, the one path of
// a single-path mode. It says whether the search found the answer, apart
// from whether it then chose it: accuracy is at most coverage, and the gap
// is what a better selection (a verifier) can win back.

// pathTexts returns the texts of res's complete paths.
func pathTexts(res *engine.Result) []string {
	ps := make([]string, len(res.Paths))
	for i, p := range res.Paths {
		ps[i] = p.Text
	}
	return ps
}

// covered reports whether check passes on res's text or on one of its
// paths, and the number of paths (at least 1: the text); false without a
// check.
func covered(check func(string) bool, res *SearchResult) (bool, int) {
	n := max(len(res.Paths), 1)
	if check == nil {
		return false, n
	}
	if check(res.Text) {
		return true, n
	}
	for _, p := range res.Paths {
		if check(p) {
			return true, n
		}
	}
	return false, n
}

// coverageCI prints a coverage with its interval: "66.4% [62.1, 70.4]".
func coverageCI(r ModeResult) string {
	return fmt.Sprintf("%s [%.1f, %.1f]", pct1(r.Coverage), 100*r.CoverageLow, 100*r.CoverageHigh)
}

// coveragePlot is the coverage panel of WriteSVG: each mode's coverage
// (percent, with its 95 % interval as error bars) against the rows it
// spent, through its budgets.
func (r *Report) coveragePlot(t *TaskReport) (*plot.Plot, error) {
	p, _, err := r.intervalPlot(t, fmt.Sprintf("%s: coverage (right answer among the paths) vs compute", t.Task), "coverage (%), 95% Wilson interval",
		func(x ModeResult) (y, lo, hi float64) { return x.Coverage, x.CoverageLow, x.CoverageHigh })
	return p, err
}

// verifierRule says how the modes use a verifier's verdicts.
const verifierRule = "beam-adaptive, beam and self-consistency vote on the answer with the summed verdicts of their paths, best-of-N takes the best-judged sample"
