package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Targets are the shares of steps each corner quadrant should get on the
// model's own distribution (the rest is Adaptive): calibration turns them
// into percentile thresholds. The LEHV share is the share of steps that may
// branch, so it sets the search's appetite for compute.
type Targets struct {
	LELV float64 `json:"lelv"`
	HELV float64 `json:"helv"`
	LEHV float64 `json:"lehv"`
	HEHV float64 `json:"hehv"`
}

// DefaultTargets: 40% confident, 5% uniformly unsure, 10% forks, 5% lost.
func DefaultTargets() Targets {
	return Targets{LELV: 0.40, HELV: 0.05, LEHV: 0.10, HEHV: 0.05}
}

// Share returns the target share of q (Adaptive: what the others leave).
func (t Targets) Share(q Quadrant) float64 {
	switch q {
	case LELV:
		return t.LELV
	case HELV:
		return t.HELV
	case LEHV:
		return t.LEHV
	case HEHV:
		return t.HEHV
	}
	return 1 - t.LELV - t.HELV - t.LEHV - t.HEHV
}

// Validate checks that the shares lie in [0, 1] and sum to at most 1.
func (t Targets) Validate() error {
	for _, s := range [...]float64{t.LELV, t.HELV, t.LEHV, t.HEHV} {
		if !(s >= 0 && s <= 1) {
			return fmt.Errorf("targets %+v: every share must lie in [0, 1]", t)
		}
	}
	if sum := t.LELV + t.HELV + t.LEHV + t.HEHV; sum > 1+1e-9 {
		return fmt.Errorf("targets %+v: shares sum to %v > 1", t, sum)
	}
	return nil
}

// Counts are the number of observations per quadrant.
type Counts [NumQuadrants]int

// Count classifies every observation.
func Count(obs []Metrics, th Thresholds) Counts {
	var c Counts
	for _, m := range obs {
		c[th.Quadrant(m)]++
	}
	return c
}

// Total returns the number of observations.
func (c Counts) Total() int {
	n := 0
	for _, x := range c {
		n += x
	}
	return n
}

// Share returns the share of observations in q.
func (c Counts) Share(q Quadrant) float64 {
	n := c.Total()
	if n == 0 || int(q) >= len(c) {
		return 0
	}
	return float64(c[q]) / float64(n)
}

func (c Counts) String() string {
	var b bytes.Buffer
	for q := range Quadrant(NumQuadrants) {
		if q > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d(%.1f%%)", q, c[q], 100*c.Share(q))
	}
	return b.String()
}

// Calibrate derives thresholds from a model's own (entropy, varentropy)
// observations (Metrics.Entropy and Metrics.Varentropy; one per generated
// token over a prompt set) so that each quadrant gets its target share:
//
//   - LELV: LowEntropy and LowVarentropy sit at the same percentile of
//     their marginals, the percentile searched so that H < LowEntropy and
//     V < LowVarentropy jointly hold for the LELV share;
//   - HELV: among the low-varentropy rows left, HighEntropy cuts off the
//     HELV share with the highest entropy (LowVarentropy is raised, and
//     LowEntropy lowered to keep LELV, when too few such rows exist);
//   - LEHV and HEHV: HighVarentropy cuts off their joint share with the
//     highest varentropy, and BranchEntropy = LostEntropy splits those rows
//     by entropy, the lower ones LEHV.
//
// Thresholds lie midway between neighbouring observations, so they are
// stable on held-out data. Shares the data cannot give (too few
// observations, heavy ties) come out short; check with Count.
func Calibrate(obs []Metrics, t Targets) (Thresholds, error) {
	if err := t.Validate(); err != nil {
		return Thresholds{}, err
	}
	n := len(obs)
	if n == 0 {
		return Thresholds{}, errors.New("calibrate: no observations")
	}
	hs := make([]float64, n)
	vs := make([]float64, n)
	for i, m := range obs {
		h, v := m.Entropy, m.Varentropy
		if !(h >= 0) || !(v >= 0) || math.IsInf(h, 0) || math.IsInf(v, 0) {
			return Thresholds{}, fmt.Errorf("calibrate: observation %d has H=%v V=%v, want finite values >= 0", i, h, v)
		}
		hs[i], vs[i] = h, v
	}
	sh, sv := slices.Clone(hs), slices.Clone(vs)
	slices.Sort(sh)
	slices.Sort(sv)
	count := func(x float64) int { return int(math.Round(x * float64(n))) }
	wantLELV, wantHELV := count(t.LELV), count(t.HELV)
	wantLEHV, wantHEHV := count(t.LEHV), count(t.HEHV)

	// LELV along the diagonal: the smallest level k whose joint count
	// reaches the target, or k-1 if that is closer.
	lelvAt := func(k int) (lh, lv float64, c int) {
		lh, lv = cutBelow(sh, k), cutBelow(sv, k)
		for i := range hs {
			if hs[i] < lh && vs[i] < lv {
				c++
			}
		}
		return lh, lv, c
	}
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if _, _, c := lelvAt(mid); c >= wantLELV {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	level := lo
	lowH, lowV, got := lelvAt(level)
	if level > 0 {
		if h2, v2, c2 := lelvAt(level - 1); wantLELV-c2 < got-wantLELV {
			level--
			lowH, lowV, got = h2, v2, c2
		}
	}

	// HELV: rows with V < lowV and H >= lowH form the pool.
	pool := func(lv, lh float64) []float64 {
		var p []float64
		for i := range hs {
			if vs[i] < lv && hs[i] >= lh {
				p = append(p, hs[i])
			}
		}
		return p
	}
	p := pool(lowV, lowH)
	if len(p) < wantHELV {
		// Raise LowVarentropy (lowering LowEntropy to keep the LELV
		// count) until the pool is large enough.
		shift := func(kv int) (lv, lh float64) {
			lv = cutBelow(sv, kv)
			var low []float64
			for i := range hs {
				if vs[i] < lv {
					low = append(low, hs[i])
				}
			}
			slices.Sort(low)
			return lv, cutBelow(low, got)
		}
		lo, hi := level, n
		for lo < hi {
			mid := (lo + hi) / 2
			if lv, lh := shift(mid); len(pool(lv, lh)) >= wantHELV {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		lowV, lowH = shift(lo)
		p = pool(lowV, lowH)
	}
	slices.Sort(p)
	highH := lowH
	if len(p) > 0 {
		highH = max(lowH, cutAbove(p, wantHELV))
	}

	// LEHV and HEHV: the highest varentropies, split by entropy.
	highV := max(lowV, cutAbove(sv, wantLEHV+wantHEHV))
	var top []float64
	for i := range hs {
		if vs[i] > highV {
			top = append(top, hs[i])
		}
	}
	slices.Sort(top)
	split := sh[n/2]
	if len(top) > 0 {
		split = cutBelow(top, wantLEHV)
	}
	th := Thresholds{
		Name:           "calibrated",
		LowEntropy:     lowH,
		LowVarentropy:  lowV,
		HighEntropy:    highH,
		HighVarentropy: highV,
		BranchEntropy:  split,
		LostEntropy:    split,
	}
	if err := th.Validate(); err != nil {
		return Thresholds{}, fmt.Errorf("calibrate: %w", err)
	}
	return th, nil
}

// cutBelow returns a threshold with k of the sorted values strictly below it
// (fewer on ties).
func cutBelow(s []float64, k int) float64 {
	switch {
	case len(s) == 0:
		return 0
	case k <= 0:
		return s[0]
	case k >= len(s):
		return math.Nextafter(s[len(s)-1], math.Inf(1))
	}
	return s[k-1] + (s[k]-s[k-1])/2
}

// cutAbove returns a threshold with m of the sorted values strictly above it
// (fewer on ties, or when the smallest value is 0 and every one is asked
// for: thresholds stay >= 0).
func cutAbove(s []float64, m int) float64 {
	switch {
	case len(s) == 0:
		return 0
	case m <= 0:
		return s[len(s)-1]
	case m >= len(s):
		return max(0, math.Nextafter(s[0], math.Inf(-1)))
	}
	i := len(s) - m
	return s[i-1] + (s[i]-s[i-1])/2
}

// maxThresholdsJSON bounds what ReadThresholds reads.
const maxThresholdsJSON = 1 << 20

// WriteThresholds writes th as indented JSON.
func WriteThresholds(w io.Writer, th Thresholds) error {
	if err := th.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(th, "", "  ")
	if err != nil {
		return fmt.Errorf("thresholds %q: %w", th.Name, err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadThresholds reads and validates thresholds written by WriteThresholds.
// Unknown fields are an error (a misspelt threshold would silently be 0).
func ReadThresholds(r io.Reader) (Thresholds, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxThresholdsJSON+1))
	if err != nil {
		return Thresholds{}, fmt.Errorf("thresholds: %w", err)
	}
	if len(b) > maxThresholdsJSON {
		return Thresholds{}, fmt.Errorf("thresholds: larger than %d bytes", maxThresholdsJSON)
	}
	// Every threshold must be given: a missing one would silently be 0.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return Thresholds{}, fmt.Errorf("thresholds: %w", err)
	}
	for _, k := range []string{"low_entropy", "low_varentropy", "high_entropy", "high_varentropy", "branch_entropy", "lost_entropy"} {
		if _, ok := fields[k]; !ok {
			return Thresholds{}, fmt.Errorf("thresholds: %q is missing", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var th Thresholds
	if err := dec.Decode(&th); err != nil {
		return Thresholds{}, fmt.Errorf("thresholds: %w", err)
	}
	if err := th.Validate(); err != nil {
		return Thresholds{}, err
	}
	return th, nil
}

// SaveThresholds writes th to the file at path atomically (see SaveFile):
// a failure leaves any earlier file whole.
func SaveThresholds(path string, th Thresholds) error {
	var b bytes.Buffer
	if err := WriteThresholds(&b, th); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return saveAtomic(path, b.Bytes())
}

// LoadThresholds reads thresholds from the file at path.
func LoadThresholds(path string) (Thresholds, error) {
	f, err := os.Open(path)
	if err != nil {
		return Thresholds{}, fmt.Errorf("load thresholds: %w", err)
	}
	defer f.Close()
	th, err := ReadThresholds(f)
	if err != nil {
		return Thresholds{}, fmt.Errorf("load %s: %w", path, err)
	}
	return th, nil
}

// ThresholdsFrom reads thresholds named on a command line: a preset name
// (see PresetNames) or the path of a JSON file written by SaveThresholds.
func ThresholdsFrom(s string) (Thresholds, error) {
	if th, ok := Preset(s); ok {
		return th, nil
	}
	if _, err := os.Stat(s); err != nil {
		return Thresholds{}, fmt.Errorf("thresholds %q are neither a preset (%s) nor a readable file", s, strings.Join(PresetNames(), ", "))
	}
	return LoadThresholds(s)
}

// Observation is one decision row of a search, for CalibrateSearch.
type Observation struct {
	Metrics Metrics
	// Ratio is p(runner-up) / p(most probable token) of the row.
	Ratio float64
	// PrevP is p of the token the row follows, as it was chosen (1 right
	// after the prompt).
	PrevP float64
}

// SearchTargets are what CalibrateSearch aims for on the search's own rows.
type SearchTargets struct {
	// Quadrants are the quadrant shares (see Calibrate). HELV is 0 by
	// default: on the arith task every clarify insertion cost accuracy.
	Quadrants Targets `json:"quadrants"`
	// Fork is the share of rows whose min-p set holds two tokens or more.
	Fork float64 `json:"fork"`
	// Backspace is the share of chosen tokens uncertain enough to be taken
	// back (BackspaceBelow sits at that quantile of their p).
	Backspace float64 `json:"backspace"`
}

// DefaultSearchTargets: 40% LELV, no HELV, 10% LEHV, 5% HEHV; 5% of rows
// fork, 2% of tokens may be taken back.
func DefaultSearchTargets() SearchTargets {
	return SearchTargets{Quadrants: Targets{LELV: 0.40, LEHV: 0.10, HEHV: 0.05}, Fork: 0.05, Backspace: 0.02}
}

// CalibrateSearch fits every threshold the search uses to observations of
// the search's own rows, starting from base:
//
//   - the quadrant thresholds, as Calibrate does;
//   - the fork's varentropy range, from the median to the 95th percentile
//     of the rows' varentropy, and its min-p cut, scaled (keeping base's
//     MinPLow/MinPHigh ratio) so that the Fork share of rows has at least
//     two tokens above the cut;
//   - BackspaceBelow, at the Backspace quantile of the chosen tokens' p;
//   - the score Scales: every term's mean and standard deviation.
func CalibrateSearch(obs []Observation, base File, t SearchTargets) (File, error) {
	if !(t.Fork > 0 && t.Fork < 1) || !(t.Backspace >= 0 && t.Backspace < 1) {
		return File{}, fmt.Errorf("calibrate: fork share %v must lie in (0, 1), backspace share %v in [0, 1)", t.Fork, t.Backspace)
	}
	ms := make([]Metrics, len(obs))
	vs := make([]float64, len(obs))
	ps := make([]float64, len(obs))
	for i, o := range obs {
		if !(o.Ratio >= 0 && o.Ratio <= 1) || !(o.PrevP >= 0 && o.PrevP <= 1) {
			return File{}, fmt.Errorf("calibrate: observation %d has ratio %v, previous p %v: want both in [0, 1]", i, o.Ratio, o.PrevP)
		}
		ms[i], vs[i], ps[i] = o.Metrics, o.Metrics.Varentropy, o.PrevP
	}
	th, err := Calibrate(ms, t.Quadrants)
	if err != nil {
		return File{}, err
	}
	f := base
	f.Thresholds = th
	slices.Sort(vs)
	slices.Sort(ps)
	quantile := func(x []float64, q float64) float64 { return x[min(int(q*float64(len(x))), len(x)-1)] }
	fk := f.Fork
	fk.VarLow = quantile(vs, 0.5)
	fk.VarHigh = max(quantile(vs, 0.95), fk.VarLow+1e-3)
	// The cut moves as a whole on a log scale (each end capped at 1), so
	// the share of forking rows falls as it rises: bisect.
	cut := func(shift float64) Fork {
		g := fk
		g.MinPHigh = min(1, fk.MinPHigh*math.Exp(shift))
		g.MinPLow = min(g.MinPHigh, fk.MinPLow*math.Exp(shift))
		return g
	}
	share := func(shift float64) float64 {
		g, n := cut(shift), 0
		for _, o := range obs {
			if o.Ratio > 0 && o.Ratio >= g.MinP(o.Metrics.Varentropy) {
				n++
			}
		}
		return float64(n) / float64(len(obs))
	}
	lo, hi := math.Log(1e-6/fk.MinPLow), math.Log(1/fk.MinPLow)
	for range 60 {
		mid := (lo + hi) / 2
		if share(mid) > t.Fork {
			lo = mid
		} else {
			hi = mid
		}
	}
	fk = cut(hi)
	f.Fork = fk
	f.BackspaceBelow = 0
	if t.Backspace > 0 {
		f.BackspaceBelow = quantile(ps, t.Backspace)
	}
	// Score scales: each term's mean and spread over the rows (log p from
	// the chosen tokens' p, floored at 1e-30).
	terms := make([][]float64, 7)
	for _, o := range obs {
		a := o.Metrics.Attention
		for i, x := range [7]float64{math.Log(max(o.PrevP, 1e-30)), o.Metrics.Entropy, o.Metrics.Varentropy, a.Entropy, a.Varentropy, a.Agreement, a.Interaction} {
			terms[i] = append(terms[i], x)
		}
	}
	f.Scales = Scales{LogProb: fitScale(terms[0]), Entropy: fitScale(terms[1]), Varentropy: fitScale(terms[2]),
		AttnEntropy: fitScale(terms[3]), AttnVarentropy: fitScale(terms[4]), Agreement: fitScale(terms[5]), Interaction: fitScale(terms[6])}
	if err := f.Validate(); err != nil {
		return File{}, fmt.Errorf("calibrate: %w", err)
	}
	return f, nil
}
