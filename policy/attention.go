package policy

import (
	"errors"
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/policy/rowstat"
)

// MaxHeads bounds Attention.Heads; the metrics keep one float64 per head on
// the stack.
const MaxHeads = 1024

// Attention is one layer's attention of the last query position of a
// sequence, over the positions that sequence really has (0..pos, so Len =
// pos+1 — never the empty slots of a preallocated cache). Both slices are
// head-major, Heads*Len long: element h*Len+j is head h at position j.
//
// Scores are the pre-softmax scores q·k/sqrt(head_dim); Probs their softmax
// per head. Give both when the forward pass has both: the cheapest case, one
// log per head and no exp. Probs alone costs a log per element and leaves
// Interaction at 0; Scores alone costs two exp per element.
type Attention struct {
	Heads, Len int
	Scores     []float32
	Probs      []float32
}

// AttentionMetrics are the attention signals of entropix.
type AttentionMetrics struct {
	// Entropy is the mean over heads of each head's entropy (bits).
	Entropy float64 `json:"entropy"`
	// Varentropy is the population variance across heads of the per-head
	// entropies (bits²): do the heads agree on how focused to be?
	Varentropy float64 `json:"varentropy"`
	// Agreement is the mean over heads and positions of
	// |P[h,j] - mean_h P[h,j]|: 0 when every head attends alike. (Despite
	// the name it grows with disagreement, as in the reference.)
	Agreement float64 `json:"agreement"`
	// Interaction is the mean of |scores| over heads and positions.
	Interaction float64 `json:"interaction"`
}

// String formats the attention metrics compactly.
func (a AttentionMetrics) String() string {
	return fmt.Sprintf("aH=%.3f aV=%.3f agr=%.3f int=%.3f", a.Entropy, a.Varentropy, a.Agreement, a.Interaction)
}

var errBadAttention = errors.New("attention holds NaN or Inf")

// Validate reports whether the shape and slices are consistent.
func (a Attention) Validate() error {
	if a.Heads < 1 || a.Heads > MaxHeads {
		return fmt.Errorf("attention: heads %d outside [1, %d]", a.Heads, MaxHeads)
	}
	if a.Len < 1 || a.Len > math.MaxInt32/a.Heads {
		return fmt.Errorf("attention: length %d invalid for %d heads", a.Len, a.Heads)
	}
	n := a.Heads * a.Len
	if a.Scores == nil && a.Probs == nil {
		return errors.New("attention: neither scores nor probabilities given")
	}
	if a.Scores != nil && len(a.Scores) != n {
		return fmt.Errorf("attention: %d scores, want heads*len = %d*%d = %d", len(a.Scores), a.Heads, a.Len, n)
	}
	if a.Probs != nil && len(a.Probs) != n {
		return fmt.Errorf("attention: %d probabilities, want heads*len = %d*%d = %d", len(a.Probs), a.Heads, a.Len, n)
	}
	return nil
}

// MeasureAttention computes the attention metrics of the given layers and
// returns their mean over layers. The engine passes the last layer only, as
// the reference did: its coefficients (the temperature and top-k formulas,
// the confidence score) were tuned on last-layer values, and the last layer
// is the one closest to the next-token choice. Passing several layers (e.g.
// all of them) gives the mean of each metric over those layers, a smoother
// signal for calibration experiments; note that the formulas then see other
// magnitudes. It allocates nothing.
func MeasureAttention(layers ...Attention) (AttentionMetrics, error) {
	if len(layers) == 0 {
		return AttentionMetrics{}, nil
	}
	var sum AttentionMetrics
	for i, a := range layers {
		if err := a.Validate(); err != nil {
			return AttentionMetrics{}, fmt.Errorf("layer %d: %w", i, err)
		}
		m := measureLayer(&a)
		sum.Entropy += m.Entropy
		sum.Varentropy += m.Varentropy
		sum.Agreement += m.Agreement
		sum.Interaction += m.Interaction
	}
	return meanOf(sum, len(layers))
}

// meanOf is the mean of n layers' metrics summed in sum, checked finite.
func meanOf(sum AttentionMetrics, n int) (AttentionMetrics, error) {
	f := float64(n)
	out := AttentionMetrics{
		Entropy:     sum.Entropy / f,
		Varentropy:  sum.Varentropy / f,
		Agreement:   sum.Agreement / f,
		Interaction: sum.Interaction / f,
	}
	for _, x := range [...]float64{out.Entropy, out.Varentropy, out.Agreement, out.Interaction} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return AttentionMetrics{}, errBadAttention
		}
	}
	return out, nil
}

// AttentionSums are one layer's attention summed where it was computed
// (a GPU: model.AttentionSums), over the Len positions of the row's
// sequence: per head its entropy (nats) and Σ |score|, and Σ over heads
// and positions of |P - the heads' mean P|.
type AttentionSums struct {
	Heads, Len   int
	Entropy      []float32
	AbsScores    []float32
	Disagreement float32
}

// MeasureAttentionSums is MeasureAttention from the layers' sums: the
// same metrics, but for float32 rounding where the sums were made.
func MeasureAttentionSums(layers ...AttentionSums) (AttentionMetrics, error) {
	if len(layers) == 0 {
		return AttentionMetrics{}, nil
	}
	var sum AttentionMetrics
	for i, a := range layers {
		H, L := a.Heads, a.Len
		if H < 1 || H > MaxHeads || L < 1 || len(a.Entropy) != H || len(a.AbsScores) != H {
			return AttentionMetrics{}, fmt.Errorf("layer %d: attention sums of %d heads (%d entropies, %d score sums) over %d positions", i, H, len(a.Entropy), len(a.AbsScores), L)
		}
		var mean, m2, abs float64
		for h := range H {
			ent := max(0, float64(a.Entropy[h])) / math.Ln2
			d := ent - mean
			mean += d / float64(h+1)
			m2 += d * (ent - mean)
			abs += float64(a.AbsScores[h])
		}
		sum.Entropy += mean
		sum.Varentropy += max(0, m2/float64(H))
		sum.Agreement += float64(a.Disagreement) / float64(H*L)
		sum.Interaction += abs / float64(H*L)
	}
	return meanOf(sum, len(layers))
}

// agreementChunk is the positions whose mean over heads the agreement
// keeps at once (on the stack).
const agreementChunk = 1024

// measureLayer assumes a valid shape.
func measureLayer(a *Attention) AttentionMetrics {
	H, L := a.Heads, a.Len
	var out AttentionMetrics

	if a.Scores != nil {
		out.Interaction = rowstat.AbsSum(a.Scores) / float64(H*L)
	}

	// Per-head entropy, with Welford's mean and variance across heads.
	var off [MaxHeads]float64 // Scores only: max_h + logZ_h, so log P = s - off
	var mean, m2 float64
	for h := range H {
		var ent float64
		switch {
		case a.Probs != nil && a.Scores != nil:
			// log P_j = s_j - c with c = s_k - log P_k for the most
			// probable k: one log per head, H = c·ΣP - ΣP·s.
			// H = Σ P·(c - s), terms of one sign, in one vectorized pass.
			probs, scores := a.Probs[h*L:(h+1)*L], a.Scores[h*L:(h+1)*L]
			_, k, _ := rowstat.Top2(probs)
			c := float64(scores[k]) - math.Log(float64(probs[k]))
			ent = max(0, rowstat.SurprisalSum(probs, scores, float32(c))) / math.Ln2
		case a.Probs != nil:
			var acc float64
			for _, p := range a.Probs[h*L : (h+1)*L] {
				if p > 0 {
					pf := float64(p)
					acc -= pf * math.Log(pf)
				}
			}
			ent = acc / math.Ln2
		default:
			row := a.Scores[h*L : (h+1)*L]
			mx := math.Inf(-1)
			for _, x := range row {
				mx = max(mx, float64(x))
			}
			var z, sa float64
			for _, x := range row {
				d := float64(x) - mx
				if e := math.Exp(d); e != 0 {
					z += e
					sa += e * d
				}
			}
			logZ := math.Log(z)
			off[h] = mx + logZ
			ent = max(0, logZ-sa/z) / math.Ln2
		}
		d := ent - mean
		mean += d / float64(h+1)
		m2 += d * (ent - mean)
	}
	out.Entropy = mean
	out.Varentropy = max(0, m2/float64(H))

	// Agreement: walk positions, comparing the heads at each one.
	var dev float64
	if a.Probs != nil {
		// A chunk of positions at a time: the heads' mean there, then
		// each head's distance from it, head by head (rows, not columns).
		var mu [agreementChunk]float32
		inv := 1 / float32(H)
		for j0 := 0; j0 < L; j0 += agreementChunk {
			m := mu[:min(agreementChunk, L-j0)]
			clear(m)
			for h := range H {
				rowstat.Axpy(1, a.Probs[h*L+j0:][:len(m)], m)
			}
			rowstat.Scale(m, inv)
			for h := range H {
				dev += rowstat.AbsDiffSum(a.Probs[h*L+j0:][:len(m)], m)
			}
		}
	} else {
		var col [MaxHeads]float64
		for j := range L {
			var mu float64
			for h := range H {
				p := math.Exp(float64(a.Scores[h*L+j]) - off[h])
				col[h] = p
				mu += p
			}
			mu /= float64(H)
			for h := range H {
				dev += math.Abs(col[h] - mu)
			}
		}
	}
	out.Agreement = dev / float64(H*L)
	return out
}
