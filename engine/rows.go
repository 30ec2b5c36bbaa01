package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
)

// A backend may hand over each logits row's statistics instead of the
// vocabulary-wide row (model.RowStats: a GPU's), and fetch a row only when
// it is read. A step then reads the statistics where they suffice (the
// measurement, an argmax, the top tokens of a beam, a fork or --n-probs)
// and fetches a row only where a mode needs it (a draw, a clarify test, a
// backspace). A step reads statistics or rows, not a mix: rows when the
// backend gives no statistics, when the mode measures with a noise floor
// or when IgnoreEOS masks the rows.

// rowView is a logits row a decision reads: a step's output row, read
// through its statistics when the step uses them, or a row in hand (a
// Backspace's).
type rowView struct {
	out *model.Output
	r   int
	st  *model.RowStats // nil: read the row
	row []float32       // the row in hand, nil for an output row
}

// view returns br's row in the current step.
func (s *search) view(br *branch) rowView {
	v := rowView{out: s.out, r: br.row}
	if s.useStats {
		v.st = s.out.Stats(br.row)
	}
	return v
}

// logits returns the whole row, fetching it when the backend has not.
func (v rowView) logits() []float32 {
	if v.row != nil {
		return v.row
	}
	return v.out.Logits(v.r)
}

// logit returns token t's logit.
func (v rowView) logit(t int) float32 {
	if st := v.st; st != nil {
		if t == st.Arg {
			return st.Max
		}
		if i := slices.Index(st.Top, int32(t)); i >= 0 {
			return st.TopLogits[i]
		}
	}
	return v.logits()[t]
}

// top writes the indices of the k largest logits, largest first, to dst
// (ties: the lower index first).
func (v rowView) top(k int, dst []int) []int {
	if st := v.st; st != nil && k <= len(st.Top) {
		dst = dst[:0]
		for _, t := range st.Top[:k] {
			dst = append(dst, int(t))
		}
		return dst
	}
	return topK(v.logits(), k, dst)
}

// logZ returns log Σ exp(logits).
func (v rowView) logZ() float64 {
	if st := v.st; st != nil {
		if math.IsInf(float64(st.Max), 0) {
			return float64(st.Max)
		}
		return float64(st.Max) + math.Log(st.Z)
	}
	lz, _ := logSumExp(v.logits())
	return lz
}

// later returns a function giving the row until the second forward pass
// after this one (the rows' lifetime, model.Output), fetching it only if
// called: a Backspace's row.
func (v rowView) later() func() []float32 {
	if v.row != nil {
		row := v.row
		return func() []float32 { return row }
	}
	return v.out.LogitsLater(v.r)
}

// decideStep is the policy step of br's row: the row itself or, where the
// step reads statistics, a way to fetch it (the measurement, from the
// statistics, answers the rest).
func (s *search) decideStep(br *branch) policy.Step {
	v := s.view(br)
	st := policy.Step{Attention: s.attention(br), AttentionSums: s.attentionSums(br), Measure: s.measure(br)}
	if v.st != nil {
		st.Fetch = v.logits
	} else {
		st.Logits = v.logits()
	}
	return st
}

// moments are a row's statistics as the policy measures them.
func moments(st *model.RowStats, n int) policy.Moments {
	return policy.Moments{N: n, Max: st.Max, Second: st.Second, Arg: st.Arg, Z: st.Z, A: st.A, B: st.B,
		Top: st.Top, TopLogits: st.TopLogits}
}

// measureStats is measureRows from the backend's statistics.
func (s *search) measureStats() error {
	n := len(s.rows)
	s.measAt = slices.Grow(s.measAt[:0], n)[:n]
	for i := range s.measAt {
		s.measAt[i] = -1
	}
	s.meas = s.meas[:0]
	for _, br := range s.live {
		i := br.row - s.base
		if s.measAt[i] >= 0 {
			continue
		}
		st := s.out.Stats(br.row)
		if st.NonFinite {
			return fmt.Errorf("%w: step %d", ErrNonFinite, s.step)
		}
		s.measAt[i] = len(s.meas)
		s.meas = append(s.meas, policy.MeasureMoments(moments(st, s.e.m.Config.Vocab)))
	}
	return nil
}
