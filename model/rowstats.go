package model

import "math"

// RowStats are a logits row's statistics, computed by a backend where the
// row lives so that the search reads them instead of the vocabulary-wide
// row (see Output): the policy's normalizer, entropy, varentropy, argmax
// and margin come from Max, Second, Arg, Z, A and B
// (policy.MeasureMoments), the forks, beams and top probabilities from
// Top. RowStatsOf defines every field.
type RowStats struct {
	// Max is the largest logit and Arg its index (the first on ties);
	// Second is the second largest (Max again when the largest occurs
	// twice; -Inf when there is none). NaNs are skipped.
	Max, Second float32
	Arg         int
	// Z, A and B are Σ e, Σ e·s and Σ e·s² over the row, with s = l - Max
	// and e = exp(s), in float64; terms whose e is 0 (masked logits of
	// -Inf) are left out, and a row of -Inf alone has them all 0. Then
	// log Σ exp(l) = Max + log Z, the entropy is log Z - A/Z nats and the
	// varentropy B/Z - (A/Z)².
	Z, A, B float64
	// Top are the tokens of the K largest logits, largest first (ties:
	// the lower token first), and TopLogits their logits; K is the
	// backend's (Output.StatsBuffer), or the row's length when shorter.
	Top       []int32
	TopLogits []float32
	// NonFinite reports a NaN or +Inf in the row: the other fields are
	// then meaningless, and the search stops with an error.
	NonFinite bool
}

// RowStatsOf computes row's statistics with the top k into dst (reusing
// its Top and TopLogits): the definition a backend's statistics are
// tested against. The sums are exact to float64 rounding (math.Exp, one
// accumulator each); the CPU's vectorized kernels agree to about 1e-6
// relative.
func RowStatsOf(row []float32, k int, dst *RowStats) {
	*dst = RowStats{Max: float32(math.Inf(-1)), Second: float32(math.Inf(-1)),
		Top: dst.Top[:0], TopLogits: dst.TopLogits[:0]}
	for i, l := range row {
		switch {
		case l != l || math.IsInf(float64(l), 1):
			dst.NonFinite = true
		case l > dst.Max:
			dst.Max, dst.Second, dst.Arg = l, dst.Max, i
		case l > dst.Second:
			dst.Second = l
		}
	}
	if dst.NonFinite {
		return
	}
	if !math.IsInf(float64(dst.Max), -1) {
		mx := float64(dst.Max)
		for _, l := range row {
			s := float64(l) - mx
			if e := math.Exp(s); e != 0 {
				dst.Z += e
				dst.A += e * s
				dst.B += e * s * s
			}
		}
	}
	// The top k: a list kept sorted, which a logit enters only when it is
	// above the list's least (an equal one has the higher token).
	k = min(k, len(row))
	for i, l := range row {
		n := len(dst.Top)
		if n == k && !(l > dst.TopLogits[n-1]) {
			continue
		}
		if n < k {
			dst.Top, dst.TopLogits = append(dst.Top, 0), append(dst.TopLogits, 0)
			n++
		}
		j := n - 1
		for ; j > 0 && l > dst.TopLogits[j-1]; j-- {
			dst.Top[j], dst.TopLogits[j] = dst.Top[j-1], dst.TopLogits[j-1]
		}
		dst.Top[j], dst.TopLogits[j] = int32(i), l
	}
}
