package policy

import (
	"errors"
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/internal/workers"
	"github.com/entropix-search/entropix-search/policy/rowstat"
)

// Metrics are the entropix signals of one row: the shape of the next-token
// distribution and, when the forward pass supplied attention, of the
// attention pattern. Logit entropies are in bits (varentropy in bits²),
// measured at temperature 1 before any truncation. The attention fields are
// zero when no attention was given.
type Metrics struct {
	Entropy    float64          `json:"entropy"`
	Varentropy float64          `json:"varentropy"`
	Attention  AttentionMetrics `json:"attention,omitzero"`
}

// String formats the metrics compactly for logs and tree labels.
func (m Metrics) String() string {
	s := fmt.Sprintf("H=%.3f V=%.3f", m.Entropy, m.Varentropy)
	if m.Attention != (AttentionMetrics{}) {
		s += " " + m.Attention.String()
	}
	return s
}

// rowStats is what one pass over a row of logits learns; the entropix policy
// reuses it so that the logits are read as few times as possible.
type rowStats struct {
	h, v     float64 // entropy (bits) and varentropy (bits²)
	max      float64 // largest logit
	second   float64 // second largest logit (-Inf when there is none)
	arg      int     // index of the largest logit (first on ties)
	logZ     float64 // log Σ exp(l - max), so log p_i = l_i - max - logZ
	floorLog float64 // log of the noise floor, -Inf when off
}

// logProb returns log p(token) (nats) under the full temperature-1 softmax.
func (s *rowStats) logProb(logit float32) float64 {
	return float64(logit) - s.max - s.logZ
}

// margin returns p(top1) - p(top2).
func (s *rowStats) margin() float64 {
	p1 := math.Exp(-s.logZ)
	p2 := math.Exp(s.second - s.max - s.logZ)
	return p1 - p2
}

var errBadLogits = errors.New("logits contain NaN or +Inf")

// LogitEntropy returns the entropy H (bits) and varentropy V (bits²) of
// softmax(logits): H is the mean and V the variance of the surprisal
// -log2 p. It reads the logits twice (the maximum, then one pass of exp
// accumulating in float64), allocates nothing, and ignores -Inf entries
// (masked tokens). An empty row gives 0, 0. Rows holding NaN or +Inf give
// NaN.
func LogitEntropy(logits []float32) (h, v float64) {
	st := measureLogits(logits, 0)
	return st.h, st.v
}

// LogitEntropyFloor is LogitEntropy with a noise floor: tokens whose
// probability is below floor are treated as noise, dropped, and the rest
// renormalized before H and V are taken. NoiseFloor gives the floor under
// which bf16 logits carry no signal; floor <= 0 keeps every token. The floor
// costs a third pass, which only computes exp for the tokens kept.
func LogitEntropyFloor(logits []float32, floor float64) (h, v float64) {
	st := measureLogits(logits, floor)
	return st.h, st.v
}

// NoiseFloor returns u/sqrt(vocab) with u = 2⁻⁷, the probability under which
// a bf16 logit is noise (vocab 128256 gives about 2.2e-5, ln = -10.73).
func NoiseFloor(vocab int) float64 {
	if vocab <= 0 {
		return 0
	}
	return 0x1p-7 / math.Sqrt(float64(vocab))
}

// ToNats converts an entropy in bits and a varentropy in bits² to nats and
// nats².
func ToNats(h, v float64) (hn, vn float64) {
	return h * math.Ln2, v * math.Ln2 * math.Ln2
}

// measureLogits computes rowStats. With s_i = l_i - max and e_i = exp(s_i),
// Z = Σe, H = log Z - Σ e s / Z and V = Σ e s² / Z - (Σ e s / Z)², all in
// nats, accumulated in float64. Because every s is relative to the maximum,
// the variance formula cancels at most eps·E[s²], far below the precision the
// signals need (checked against a two-pass centered sum in the tests).
func measureLogits(logits []float32, floor float64) rowStats {
	st := rowStats{max: math.Inf(-1), second: math.Inf(-1), arg: -1, floorLog: math.Inf(-1)}
	if len(logits) == 0 {
		st.logZ = 0
		return st
	}
	// Pass 1: the two largest logits (NaN skipped: it is caught by the
	// sums below instead).
	m1, arg, m2 := rowstat.Top2(logits)
	st.max, st.second, st.arg = float64(m1), float64(m2), arg
	if math.IsInf(st.max, -1) { // every token masked
		st.logZ = 0
		return st
	}
	if math.IsInf(st.max, 1) {
		st.h, st.v, st.logZ = math.NaN(), math.NaN(), math.NaN()
		return st
	}
	// Pass 2: Z, Σ e·s, Σ e·s², in one vectorized pass.
	z, a, b := rowstat.LogitMoments(logits, m1)
	if math.IsNaN(z) { // a NaN logit: the floor's pass below would skip it
		st.h, st.v, st.logZ = math.NaN(), math.NaN(), math.NaN()
		return st
	}
	st.logZ = math.Log(z)
	if floor > 0 {
		// Pass 3: keep p_i >= floor, i.e. s_i >= logZ + log floor.
		st.floorLog = math.Log(floor)
		cut := st.logZ + st.floorLog
		mx := st.max
		z, a, b = 0, 0, 0
		for _, l := range logits {
			s := float64(l) - mx
			if s >= cut {
				e := math.Exp(s)
				z += e
				a += e * s
				b += e * s * s
			}
		}
		if z == 0 { // cannot happen for floor <= 1; guard anyway
			z, a, b = 1, 0, 0
		}
	}
	st.h, st.v = entropyOf(z, a, b)
	return st
}

// entropyOf returns the entropy (bits) and varentropy (bits²) of a
// softmax from its sums Z, A, B (see measureLogits).
func entropyOf(z, a, b float64) (h, v float64) {
	mean := a / z
	hn := math.Log(z) - mean
	vn := b/z - mean*mean
	if vn < 0 {
		vn = 0 // rounding on a (near) uniform row
	}
	if hn < 0 {
		hn = 0
	}
	return hn / math.Ln2, vn / (math.Ln2 * math.Ln2)
}

// Measure computes the metrics of one row: logit entropy and varentropy
// (with the noise floor, 0 for none) and, when layers are given, the
// attention metrics averaged over those layers (see MeasureAttention).
func Measure(logits []float32, floor float64, layers ...Attention) (Metrics, error) {
	st := measureLogits(logits, floor)
	if math.IsNaN(st.h) || math.IsNaN(st.v) {
		return Metrics{}, errBadLogits
	}
	m := Metrics{Entropy: st.h, Varentropy: st.v}
	if len(layers) > 0 {
		am, err := MeasureAttention(layers...)
		if err != nil {
			return Metrics{}, err
		}
		m.Attention = am
	}
	return m, nil
}

// Row is what the pass over a logits row that gives its Metrics also
// gives.
type Row struct {
	// LogZ is log Σ exp(logits) (nats): log p(t) = logits[t] - LogZ.
	LogZ float64
	// Arg is the most probable token (the first on ties).
	Arg int
	// Margin is p(top1) - p(top2), CoT-decoding's confidence.
	Margin float64
}

// MeasureRow is Measure without attention, giving also the row's
// normalizer, argmax and margin: one pass for the maximum and one of exp
// over the row (two vectorized kernels), where Measure, a log-sum-exp and
// an argmax took a pass each.
func MeasureRow(logits []float32, floor float64) (Metrics, Row, error) {
	m := RowMeasure{st: measureLogits(logits, floor), floor: floor, ok: true, n: len(logits)}
	return m.Result()
}

// TopMargin returns p(top1) - p(top2) of softmax(logits), the per-token
// confidence of CoT-decoding. A single-token row gives 1.
func TopMargin(logits []float32) float64 {
	st := measureLogits(logits, 0)
	if len(logits) == 0 || math.IsInf(st.max, -1) {
		return 0
	}
	return st.margin()
}

// RowMeasure is a logits row's statistics measured ahead of Decider.Decide
// (RowMeasurer), so that the rows of one step are measured on all the
// kernel threads at once: Decide, given it in Step.Measure, reads them
// from it instead of measuring the row again.
type RowMeasure struct {
	st    rowStats
	floor float64
	ok    bool
	n     int // the row's length
	// top and topLogits are the row's most probable tokens and their
	// logits, when measured from Moments.
	top       []int32
	topLogits []float32
}

// Moments are a logits row's statistics computed where the row lives (a
// GPU backend's model.RowStats, which defines them): enough for its
// metrics, normalizer, argmax, margin and forks without the row.
type Moments struct {
	N           int     // the row's length
	Max, Second float32 // the largest logit, and the second largest
	Arg         int     // the largest's index (the first on ties)
	// Z, A, B are Σ e, Σ e·s, Σ e·s² with s = l - Max, e = exp(s).
	Z, A, B float64
	// Top are the most probable tokens, largest first (ties: the lower
	// token first), TopLogits their logits; Decide forks from them when
	// they hold the fork's width.
	Top       []int32
	TopLogits []float32
}

// MeasureMoments is the RowMeasure of a row known by its moments, without
// the noise floor (which needs the row): its Result, and Decide's
// decisions given it, are those of the row (MeasureRow's with floor 0) bit
// for bit when the moments are the sums measureLogits takes, and to their
// precision otherwise. Top and TopLogits are kept, not copied.
func MeasureMoments(m Moments) RowMeasure {
	st := rowStats{max: float64(m.Max), second: float64(m.Second), arg: m.Arg, floorLog: math.Inf(-1)}
	switch {
	case m.N == 0:
		st.max, st.second, st.arg = math.Inf(-1), math.Inf(-1), -1
	case math.IsInf(st.max, -1): // every token masked: logZ 0, as measured
	case math.IsInf(st.max, 1) || math.IsNaN(st.max) || math.IsNaN(m.Z):
		st.h, st.v, st.logZ = math.NaN(), math.NaN(), math.NaN()
	default:
		st.logZ = math.Log(m.Z)
		st.h, st.v = entropyOf(m.Z, m.A, m.B)
	}
	return RowMeasure{st: st, ok: true, n: m.N, top: m.Top, topLogits: m.TopLogits}
}

// Result is what MeasureRow gives for the measured row: its metrics, its
// normalizer, argmax and margin, and an error for a row holding NaN or
// +Inf.
func (m *RowMeasure) Result() (Metrics, Row, error) {
	st := &m.st
	if !m.ok || math.IsNaN(st.h) || math.IsNaN(st.v) {
		return Metrics{}, Row{}, errBadLogits
	}
	r := Row{LogZ: st.max + st.logZ, Arg: max(st.arg, 0)}
	if m.n > 0 && !math.IsInf(st.max, -1) { // a row of -Inf has no margin
		r.Margin = st.margin()
	}
	return Metrics{Entropy: st.h, Varentropy: st.v}, r, nil
}

// RowMeasurer measures the logits rows of a step across the kernel
// threads. Keep one and reuse it: it then allocates nothing.
type RowMeasurer struct {
	rows  [][]float32
	floor float64
	out   []RowMeasure
}

// rowsParallel is the logits (rows times vocabulary) from which a step's
// rows are measured on the kernel threads: about 30 us of work.
const rowsParallel = 1 << 15

// Measure sets out[i] (len(out) >= len(rows)) to the statistics of
// rows[i] with the noise floor floor, what Decider.Decide with that floor
// measures, bit for bit.
func (m *RowMeasurer) Measure(rows [][]float32, floor float64, out []RowMeasure) {
	m.rows, m.floor, m.out = rows, floor, out
	if n := len(rows); n > 1 && n*len(rows[0]) >= rowsParallel {
		workers.ParallelTask(n, m)
	} else {
		m.Run(0, n)
	}
	m.rows, m.out = nil, nil
}

// Run measures rows [lo, hi): the kernel threads' share of Measure.
func (m *RowMeasurer) Run(lo, hi int) {
	for i := lo; i < hi; i++ {
		m.out[i] = RowMeasure{st: measureLogits(m.rows[i], m.floor), floor: m.floor, ok: true, n: len(m.rows[i])}
	}
}
