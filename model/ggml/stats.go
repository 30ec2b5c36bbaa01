package ggml

import (
	"math"
	"slices"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// RowStats are a logits row's statistics, computed on the device with
// the step: what a search reads of a row most of the time, a few dozen
// bytes where the row is Vocab floats.
type RowStats struct {
	// LogZ is the log-normalizer, log sum exp(logits): a token's
	// log-probability is its logit minus LogZ.
	LogZ float64
	// Entropy and Varentropy are the mean and the variance of -log p
	// under p, the softmax of the logits (nats).
	Entropy, Varentropy float64
	// Argmax is the most probable token.
	Argmax int
	// Top are the K most probable tokens and their logits, most probable
	// first.
	Top       []int32
	TopLogits []float32
}

// SetRowStats makes each Forward compute the statistics of its logits
// rows with the k most probable tokens of each (k at most the
// vocabulary), read with RowStats; 0 (the default) computes none.
func (b *Backend) SetRowStats(k int) { b.statsK = min(max(k, 0), b.m.Config.Vocab) }

// RowStats returns the statistics of the last Forward's rows with logits,
// in row order (none unless SetRowStats asked for them). They are valid
// until the next Forward.
func (b *Backend) RowStats() []RowStats { return b.stats }

// statsGraph are the step's statistics tensors: per row with logits
// ([1, nl] or [K, nl]).
type statsGraph struct {
	mean, vare *gg.Tensor // F32: the mean logit under p, and the variance of the logits under p
	argmax     *gg.Tensor // I32
	top        *gg.Tensor // I32 [K, nl]
	topLogits  *gg.Tensor // F32 [1, K, nl]
	topProbs   *gg.Tensor // F32 [1, K, nl]
}

// buildStats adds to t the statistics of its logits [Vocab, nl]: with p
// the softmax, the entropy is LogZ - E_p[logit] and the varentropy (the
// variance of -log p = LogZ - logit) is Var_p[logit], summed on the
// device around the mean; LogZ is logit - log p of the most probable
// token, from the top K read back.
func (b *Backend) buildStats(ctx gg.Context, t *graph, nl int) {
	L, k := t.logits, int64(b.statsK)
	vocab := int64(b.m.Config.Vocab)
	p := ctx.SoftMax(L, nil, 1)
	st := &statsGraph{}
	st.mean = ctx.SumRows(ctx.Mul(p, L))
	st.vare = ctx.SumRows(ctx.Mul(p, ctx.Sqr(ctx.Sub(L, st.mean))))
	st.argmax = ctx.Argmax(L)
	st.top = ctx.TopK(L, int(k))
	st.topLogits = ctx.GetRows(ctx.Reshape(L, 1, vocab, int64(nl)), st.top)
	st.topProbs = ctx.GetRows(ctx.Reshape(p, 1, vocab, int64(nl)), st.top)
	for _, x := range []*gg.Tensor{st.mean, st.vare, st.argmax, st.top, st.topLogits, st.topProbs} {
		x.SetOutput()
		t.g.Expand(x)
	}
	t.stats = st
}

// readStats reads the step's statistics back into b.stats.
func (b *Backend) readStats(t *graph, nl int) {
	k := b.statsK
	mean, vare, top := make([]float32, nl), make([]float32, nl), make([]int32, k*nl)
	argmax := make([]int32, nl)
	tl, tp := make([]float32, k*nl), make([]float32, k*nl)
	gg.Get(t.stats.mean, mean, 0)
	gg.Get(t.stats.vare, vare, 0)
	gg.Get(t.stats.argmax, argmax, 0)
	gg.Get(t.stats.top, top, 0)
	gg.Get(t.stats.topLogits, tl, 0)
	gg.Get(t.stats.topProbs, tp, 0)
	b.stats = slices.Grow(b.stats[:0], nl)[:nl]
	for r := range nl {
		ids, logits, probs := top[r*k:(r+1)*k], tl[r*k:(r+1)*k], tp[r*k:(r+1)*k]
		order := make([]int, k)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, c int) int {
			switch {
			case logits[a] > logits[c]:
				return -1
			case logits[a] < logits[c]:
				return 1
			}
			return int(ids[a] - ids[c])
		})
		s := RowStats{Argmax: int(argmax[r]), Top: make([]int32, k), TopLogits: make([]float32, k)}
		for i, j := range order {
			s.Top[i], s.TopLogits[i] = ids[j], logits[j]
		}
		best := order[0]
		s.LogZ = float64(logits[best]) - math.Log(float64(probs[best]))
		s.Entropy = s.LogZ - float64(mean[r])
		s.Varentropy = float64(vare[r])
		b.stats[r] = s
	}
}
