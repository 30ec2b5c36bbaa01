package ggml

import (
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// DefaultStatsK is the top tokens per row the statistics carry unless
// SetRowStats says otherwise: every fork of the policy (at most 64 wide),
// every beam and --n-probs up to 64 read them without the row.
const DefaultStatsK = 64

// SetRowStats sets how many of each row's most probable tokens the
// step's statistics carry (model.Output.Stats), at most the vocabulary;
// 0 computes no statistics (the search then computes them from the rows).
func (b *Backend) SetRowStats(k int) { b.statsK = min(max(k, 0), b.m.Config.Vocab) }

// statsGraph are the step's statistics tensors, per row with logits,
// joined into two outputs so that the host reads them in two transfers
// (on a GPU each is a round trip to the device).
type statsGraph struct {
	// ints is I32 [1+K, nl]: per row the largest logit's token, then the
	// K largest logits' tokens, in no order.
	ints *gg.Tensor
	// floats is F32 [4+K, nl]: per row the largest logit, Σ e, Σ e·s,
	// Σ e·s² (s = logit - max, e = exp(s)), then the K tokens' logits.
	floats *gg.Tensor
}

// buildStats adds to t the statistics of its logits L [Vocab, nl], as
// model.RowStatsOf defines them: the argmax and its logit (gathered from
// L at the argmax), the moments of s = L - max summed on the device, and
// the top K by ggml_top_k with their logits gathered; Second comes from
// the top K on the host.
func (b *Backend) buildStats(ctx gg.Context, t *graph, nl int) {
	L, vocab, n := t.logits, int64(b.m.Config.Vocab), int64(nl)
	k := int64(b.topK())
	argmax := ctx.Argmax(L)
	rows := ctx.Reshape(L, 1, vocab, n) // each logit a row, per logits row: for gathering
	mx := ctx.Reshape(ctx.GetRows(rows, ctx.Reshape(argmax, 1, n)), 1, n)
	s := ctx.Sub(L, mx)
	e := ctx.Exp(s)
	es := ctx.Mul(e, s)
	top := ctx.TopK(L, int(k))
	topL := ctx.Reshape(ctx.GetRows(rows, top), k, n)
	st := &statsGraph{
		ints: ctx.Concat(ctx.Reshape(argmax, 1, n), top, 0),
		floats: ctx.Concat(ctx.Concat(ctx.Concat(mx, ctx.SumRows(e), 0), ctx.Concat(ctx.SumRows(es), ctx.SumRows(ctx.Mul(es, s)), 0), 0),
			topL, 0),
	}
	for _, x := range []*gg.Tensor{st.ints, st.floats} {
		x.SetOutput()
		t.g.Expand(x)
	}
	t.stats = st
}

// topK is the top tokens the device finds per row: the statistics' K,
// and at least two, for Second.
func (b *Backend) topK() int { return min(max(b.statsK, 2), b.m.Config.Vocab) }

// statsScratch holds readStats' buffers.
type statsScratch struct {
	argmax, top        []int32
	max, z, a, b, topL []float32
	order              []int
	ints               []int32   // a graph's statsGraph.ints, as read
	floats             []float32 // and its floats
}

// readStats reads the statistics of graph g's nl rows with logits, the
// step's from its row off on (a chunk of a step: the chunks before it
// have off), aside until fillStats.
func (b *Backend) readStats(t *graph, nl, off int) {
	k, sc := b.topK(), &b.statsBuf
	n := off + nl
	sc.argmax, sc.top = growKeep(sc.argmax, n), growKeep(sc.top, k*n)
	sc.max, sc.z, sc.a, sc.b, sc.topL = growKeep(sc.max, n), growKeep(sc.z, n), growKeep(sc.a, n), growKeep(sc.b, n), growKeep(sc.topL, k*n)
	sc.ints, sc.floats = slices.Grow(sc.ints[:0], (1+k)*nl)[:(1+k)*nl], slices.Grow(sc.floats[:0], (4+k)*nl)[:(4+k)*nl]
	gg.Get(t.stats.ints, sc.ints, 0)
	gg.Get(t.stats.floats, sc.floats, 0)
	for r := range nl {
		ints, floats := sc.ints[r*(1+k):(r+1)*(1+k)], sc.floats[r*(4+k):(r+1)*(4+k)]
		i := off + r
		sc.argmax[i], sc.max[i], sc.z[i], sc.a[i], sc.b[i] = ints[0], floats[0], floats[1], floats[2], floats[3]
		copy(sc.top[i*k:(i+1)*k], ints[1:])
		copy(sc.topL[i*k:(i+1)*k], floats[4:])
	}
}

// fillStats fills the Output's statistics of the step's nl rows with
// logits from what readStats read.
func (b *Backend) fillStats(nl int) {
	k, sc := b.topK(), &b.statsBuf
	stats := b.out.StatsBuffer(b.statsK)
	for r := range stats[:nl] {
		fillStats(&stats[r], sc.argmax[r], sc.max[r], sc.z[r], sc.a[r], sc.b[r], sc.top[r*k:(r+1)*k], sc.topL[r*k:(r+1)*k], &sc.order)
	}
}

// fillStats sets one row's statistics from what the device computed: the
// top tokens sorted largest first (ties: the lower token first), as many
// as st.Top holds, Second the second of them, and NonFinite when the maximum or the sums are not
// finite (a NaN or +Inf in the row makes them so).
func fillStats(st *model.RowStats, arg int32, mx, z, a, b float32, top []int32, topL []float32, order *[]int) {
	k := len(top)
	o := slices.Grow((*order)[:0], k)[:k]
	for i := range o {
		o[i] = i
	}
	slices.SortFunc(o, func(x, y int) int {
		switch {
		case topL[x] > topL[y]:
			return -1
		case topL[x] < topL[y]:
			return 1
		}
		return int(top[x] - top[y])
	})
	*order = o
	for i := range st.Top {
		st.Top[i], st.TopLogits[i] = top[o[i]], topL[o[i]]
	}
	st.Max, st.Arg = mx, int(arg)
	st.Second = float32(math.Inf(-1))
	if k > 1 {
		st.Second = topL[o[1]]
	}
	st.Z, st.A, st.B = float64(z), float64(a), float64(b)
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	st.NonFinite = math.IsNaN(float64(mx)) || math.IsInf(float64(mx), 1) || !finite(st.Z) || !finite(st.A) || !finite(st.B)
}

// growKeep returns s at length n, keeping its first elements.
func growKeep[T any](s []T, n int) []T {
	if n <= len(s) {
		return s[:n]
	}
	return slices.Grow(s, n-len(s))[:n]
}
