package policy

import (
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/policy/rowstat"
)

// MaxForkWidth bounds Fork.MaxWidth.
const MaxForkWidth = 64

// Candidate is one token of a fork.
type Candidate struct {
	Token int `json:"token"`
	// LogProb is log p(token) under the untruncated temperature-1
	// distribution (nats).
	LogProb float64 `json:"logprob"`
	// Score is the entropix score of taking it (Scales.Score).
	Score float64 `json:"score,omitempty"`
}

// Fork chooses the tokens a branch point forks into: every token with
// p >= min_p·p_max, where min_p slides with the varentropy V (bits²):
//
//	t     = clamp((V - VarLow) / (VarHigh - VarLow), 0, 1)
//	min_p = MinPHigh · (MinPLow / MinPHigh)^t
//
// i.e. geometrically from MinPHigh at V <= VarLow down to MinPLow at
// V >= VarHigh. Higher varentropy means the surprisals of the leading
// options differ more: the model sees distinct continuations at quite
// different weights, so options further below the top one are admitted;
// just past the LEHV boundary only near-equals are. The width is then capped
// by MaxWidth and by the engine's budget. A fork happens only when at least
// two tokens pass the cut: a runner-up below it is not forced in.
type Fork struct {
	MaxWidth int     `json:"max_width"`
	MinPHigh float64 `json:"min_p_high"`
	MinPLow  float64 `json:"min_p_low"`
	VarLow   float64 `json:"var_low"`
	VarHigh  float64 `json:"var_high"`
}

// DefaultFork returns width at most 4, min_p from 0.15 at V <= 5 bits² (the
// entropix-v1 LEHV boundary) down to 0.05 at V >= 25 bits².
func DefaultFork() Fork {
	return Fork{MaxWidth: 4, MinPHigh: 0.15, MinPLow: 0.05, VarLow: 5, VarHigh: 25}
}

// Validate checks the ranges.
func (f Fork) Validate() error {
	switch {
	case f.MaxWidth < 2 || f.MaxWidth > MaxForkWidth:
		return fmt.Errorf("fork: max_width %d outside [2, %d]", f.MaxWidth, MaxForkWidth)
	case !(f.MinPLow > 0 && f.MinPLow <= f.MinPHigh && f.MinPHigh <= 1):
		return fmt.Errorf("fork: want 0 < min_p_low (%v) <= min_p_high (%v) <= 1", f.MinPLow, f.MinPHigh)
	case !(f.VarLow >= 0 && f.VarLow < f.VarHigh) || math.IsInf(f.VarHigh, 0):
		return fmt.Errorf("fork: want 0 <= var_low (%v) < var_high (%v), finite", f.VarLow, f.VarHigh)
	}
	return nil
}

// MinP returns the relative probability cut for varentropy v (bits²).
func (f Fork) MinP(v float64) float64 {
	t := 0.0
	if f.VarHigh > f.VarLow {
		t = clamp((v-f.VarLow)/(f.VarHigh-f.VarLow), 0, 1)
	}
	if f.MinPHigh <= 0 || f.MinPLow <= 0 {
		return max(0, f.MinPHigh)
	}
	return f.MinPHigh * math.Pow(f.MinPLow/f.MinPHigh, t)
}

// Select appends to dst[:0] the fork of a row of logits with varentropy v
// (bits²), most probable first, and returns it. budget is the most branches
// the engine can afford here; below 2 (or with fewer than two tokens) the
// result is empty: no fork. It reads the logits twice and allocates only if
// dst is too small.
func (f Fork) Select(dst []Candidate, logits []float32, v float64, budget int) []Candidate {
	st := measureLogits(logits, 0)
	if math.IsNaN(st.logZ) || math.IsInf(st.max, -1) {
		return dst[:0]
	}
	return f.selectStats(dst, &Step{Logits: logits}, &st, v, budget, -1)
}

// selectStats is Select of the step's row with its statistics known and
// token ban excluded (-1: none).
func (f Fork) selectStats(dst []Candidate, s *Step, st *rowStats, v float64, budget, ban int) []Candidate {
	width := min(f.MaxWidth, budget, MaxForkWidth)
	top := dst[:0]
	if width < 2 || s.n() < 2 {
		return top
	}
	cut := st.max + math.Log(f.MinP(v))
	// The best `width` tokens (LogProb holds the logit until the end);
	// once the list is full, a vectorized scan skips to the next logit
	// above its least (ties keep the earlier token). Those of them at or
	// above the cut are the fork: if `width` tokens or more pass the cut,
	// the best `width` all do. Up to 8 wide the list is kept sorted; wider,
	// TopTokens keeps a heap.
	top = s.topLogits(top, width, ban)
	count := 0
	for _, c := range top {
		if c.LogProb >= cut {
			count++
		}
	}
	top = top[:min(count, len(top))]
	for i := range top {
		top[i].LogProb -= st.max + st.logZ
	}
	if len(top) < 2 || math.IsInf(top[1].LogProb, -1) {
		return top[:0] // only one token has any probability
	}
	return top
}

// ForcedForks returns c changed so that every step is a fork (low entropy,
// high varentropy) into as many candidates as the width allows: for
// benchmarks and tests of the search's mechanics, not for text.
func ForcedForks(c Config) Config {
	th := c.Thresholds
	th.Name = "forced-forks"
	th.LowEntropy, th.LowVarentropy = 0, 0
	th.HighEntropy, th.HighVarentropy, th.BranchEntropy = 1e9, 0, 1e9
	c.Thresholds = th
	c.Fork.MinPHigh, c.Fork.MinPLow = 1e-9, 1e-9
	c.Fork.MaxWidth = MaxForkWidth
	return c
}

// topLogits appends to top[:0] the width largest logits other than ban's
// (-1: none) as candidates holding the logit in LogProb, best first, ties
// in token order.
func topLogits(top []Candidate, logits []float32, width, ban int) []Candidate {
	top = top[:0]
	if width > 8 {
		var idx [MaxForkWidth]int
		for _, t := range TopTokens(logits, width, ban, idx[:0]) {
			top = append(top, Candidate{Token: t, LogProb: float64(logits[t])})
		}
		return top
	}
	insert := func(i int, x float64) {
		n := len(top)
		if n < width {
			top = append(top, Candidate{})
			n++
		}
		j := n - 1
		for ; j > 0 && x > top[j-1].LogProb; j-- {
			top[j] = top[j-1]
		}
		top[j] = Candidate{Token: i, LogProb: x}
	}
	i := 0
	for ; i < len(logits) && len(top) < width; i++ {
		if i != ban {
			insert(i, float64(logits[i]))
		}
	}
	for i < len(logits) {
		i += rowstat.FirstAbove(logits[i:], float32(top[width-1].LogProb))
		if i >= len(logits) {
			break
		}
		if i != ban {
			insert(i, float64(logits[i]))
		}
		i++
	}
	return top
}

// TopTokens writes the indices of the k largest logits but ban's (-1:
// none), largest first, to dst (ties: the lower index first). It keeps a
// heap of the best k seen whose root is the least: O(V log k), the scan
// for the next logit above the least vectorized.
func TopTokens(logits []float32, k, ban int, dst []int) []int {
	dst = dst[:0]
	less := func(a, b int) bool { // a ranks below b
		return logits[a] < logits[b] || (logits[a] == logits[b] && a > b)
	}
	down := func(h []int, i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(h[r], h[l]) {
				l = r
			}
			if !less(h[l], h[i]) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	i := 0
	for ; i < len(logits) && len(dst) < k; i++ {
		if i == ban {
			continue
		}
		dst = append(dst, i)
		for j := len(dst) - 1; j > 0; { // sift up
			p := (j - 1) / 2
			if !less(dst[j], dst[p]) {
				break
			}
			dst[j], dst[p] = dst[p], dst[j]
			j = p
		}
	}
	// The rest: only a logit above the heap's least ranks above it (an
	// equal one has the higher index), and most are not: a vectorized
	// scan skips to the next one that is.
	for ; i < len(logits) && len(dst) > 0; i++ {
		i += rowstat.FirstAbove(logits[i:], logits[dst[0]])
		if i >= len(logits) {
			break
		}
		if i != ban {
			dst[0] = i
			down(dst, 0)
		}
	}
	// Pop the heap into descending order.
	for n := len(dst) - 1; n > 0; n-- {
		dst[0], dst[n] = dst[n], dst[0]
		down(dst[:n], 0)
	}
	return dst
}
