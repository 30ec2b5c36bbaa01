package cpu

import (
	"math"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// attnScratch is one work item's buffers.
type attnScratch struct {
	buf      []float32   // scores/probabilities of the item's queries
	att      [][]float32 // per query: its scores, then probabilities
	qs, outs [][]float32 // arguments of the multi-query kernels
	kts32    [][]float32 // blocks of kernels.ScoresTBlocks (F32 cache)
	kts16    [][]uint16  // blocks of kernels.ScoresTBlocksF16 (F16 cache)
}

// kvOps are the cache reads and attention kernels for one element type
// of the cache, float32 or binary16 (uint16): attention is the same code
// for both (attendWith), and the F16 kernels compute bit for bit what the
// F32 ones do on the widened values.
type kvOps[E float32 | uint16] struct {
	keyBlock, valueBlock func(c *Cache, s *kvcache.Seq, l, i int) []E
	scoresTBlocks        func(out, q []float32, kt [][]E, bs int)
	scoresTMulti         func(out, q [][]float32, kt []E, bs int)
	scoresRows           func(out, q []float32, k []E, stride int)
	axpyStridedMulti     func(y, a [][]float32, v []E, stride int)
	kts                  func(w *attnScratch) *[][]E
}

var (
	opsF32 = kvOps[float32]{
		(*Cache).KeyBlock, (*Cache).ValueBlock,
		kernels.ScoresTBlocks, kernels.ScoresTMulti, kernels.ScoresRows, kernels.AxpyStridedMulti,
		func(w *attnScratch) *[][]float32 { return &w.kts32 },
	}
	opsF16 = kvOps[uint16]{
		(*Cache).KeyBlockF16, (*Cache).ValueBlockF16,
		kernels.ScoresTBlocksF16, kernels.ScoresTMultiF16, kernels.ScoresRowsF16, kernels.AxpyStridedMultiF16,
		func(w *attnScratch) *[][]uint16 { return &w.kts16 },
	}
)

// layerTask is a layer's attention work for kernels.ParallelTask, one
// phase after the other: prepare rows, seal the blocks they fill (by row
// and pool kv head), attend (by chunk and kv head). It lives in the Runner
// so that handing it to the pool allocates nothing.
type layerTask struct {
	r     *Runner
	rows  []model.Row
	lw    *model.Layer
	l     int
	slot  int // the layer's index in the attention asked for, or -1
	phase int
}

// The phases of a layer's attention (layerTask).
const (
	phasePrepare = iota // per row: biases, RoPE, cache write
	phaseSeal           // per (row filling a block, cache kv head): transpose the keys
	phaseAttend         // per (chunk of rows, kv head): scores, softmax, weighted values
)

func (t *layerTask) Run(lo, hi int) {
	r := t.r
	switch t.phase {
	case phasePrepare:
		r.prepare(t.rows, t.lw, t.l, lo, hi)
	case phaseSeal:
		heads := r.m.Config.KVDim() / r.poolHD
		for j := lo; j < hi; j++ {
			r.seal(t.rows, t.l, int(r.sealRows[j/heads]), j%heads)
		}
	default:
		kvh := r.m.Config.KVHeads
		for j := lo; j < hi; j++ {
			r.attend(t.rows, t.l, &r.chunks[j/kvh], j%kvh, t.slot)
		}
	}
}

// prepare adds the q/k/v biases, rotates the queries and keys and writes
// the keys and values to the cache, for rows [lo, hi) of layer l.
func (r *Runner) prepare(rows []model.Row, lw *model.Layer, l, lo, hi int) {
	c := &r.m.Config
	qd, kvd, hd := c.QDim(), c.KVDim(), c.HeadDim
	half := hd / 2
	for i := lo; i < hi; i++ {
		q, k, v := r.q[i*qd:(i+1)*qd], r.k[i*kvd:(i+1)*kvd], r.v[i*kvd:(i+1)*kvd]
		if c.QKVBias {
			kernels.Add(q, lw.Bq)
			kernels.Add(k, lw.Bk)
			kernels.Add(v, lw.Bv)
		}
		cos, sin := r.cos[i*half:(i+1)*half], r.sin[i*half:(i+1)*half]
		for h := 0; h < c.Heads; h++ {
			kernels.RoPE(q[h*hd:(h+1)*hd], cos, sin, c.RopeInterleaved)
		}
		for h := 0; h < c.KVHeads; h++ {
			kernels.RoPE(k[h*hd:(h+1)*hd], cos, sin, c.RopeInterleaved)
		}
		r.kv.WriteKV(rows[i].Seq, l, r.out.Pos[i], k, v)
	}
}

// seal seals (transposes) the keys of the pool's kv head h, in layer l, of
// the block that row i fills: from then on attention scores the block with
// vector multiply-adds across its slots (kernels.ScoresTMulti). Every
// position of the block has been written.
func (r *Runner) seal(rows []model.Row, l, i, h int) {
	r.kv.Seal(rows[i].Seq, l, r.out.Pos[i]/r.kv.BlockSize(), h)
}

// attend computes, in layer l, the attention of every row of chunk ch for
// the query heads of kv head kvh into r.ao. When slot >= 0 the scores and
// probabilities of rows with logits are also kept in the output's
// attention slot.
//
// Scores go block by block. A sealed block's keys are transposed, head
// kvh's being hd rows of bs slots, and one kernel call computes the scores
// of all the queries of a group (rows sharing the block, times the heads
// of the kv head) against it, reading it once; a staged block (being
// filled) is read as rows, with the same arithmetic (kernels.ScoresRows).
// The weighted sum of values goes block by block in block order, so that
// each output element is one chain of multiply-adds in position order. A
// query's arithmetic is thus the same whatever it is grouped with and
// whether its blocks are sealed: a row gives bit-identical results whether
// or not its blocks are shared, and whatever the block size.
func (r *Runner) attend(rows []model.Row, l int, ch *attnChunk, kvh, slot int) {
	if r.kv.DType() == kvcache.F16 {
		attendWith(r, &opsF16, rows, l, ch, kvh, slot)
	} else {
		attendWith(r, &opsF32, rows, l, ch, kvh, slot)
	}
}

// attendWith is attend for a cache of E.
func attendWith[E float32 | uint16](r *Runner, ops *kvOps[E], rows []model.Row, l int, ch *attnChunk, kvh, slot int) {
	c := &r.m.Config
	hd, qd := c.HeadDim, c.QDim()
	hpk := c.Heads / c.KVHeads
	h0 := kvh * hpk // first query head
	bs := r.kv.BlockSize()
	scale := float32(1 / math.Sqrt(float64(hd)))

	w, _ := r.scratch.Get().(*attnScratch)
	if w == nil {
		w = new(attnScratch)
	}
	defer r.scratch.Put(w)

	// Each query's scores: the output's attention slot for rows that keep
	// it, the scratch buffer for the others.
	total := 0
	for i := ch.lo; i < ch.hi; i++ {
		if slot < 0 || rows[i].NoLogits {
			total += hpk * (r.out.Pos[i] + 1)
		}
	}
	if cap(w.buf) < total {
		w.buf = make([]float32, total, max(total, 2*cap(w.buf)))
	}
	buf := w.buf[:total]
	w.att = w.att[:0]
	for i := ch.lo; i < ch.hi; i++ {
		n := r.out.Pos[i] + 1
		for h := h0; h < h0+hpk; h++ {
			if slot >= 0 && !rows[i].NoLogits {
				off := r.out.AttentionOffset(i, slot) + h*n
				off += c.Heads * n // probabilities; the scores are kept before
				w.att = append(w.att, r.out.AttentionBuffer()[off:off+n:off+n])
				continue
			}
			w.att = append(w.att, buf[:n:n])
			buf = buf[n:]
		}
	}
	query := func(i, hh int) int { return (i-ch.lo)*hpk + hh }

	phd := r.poolHD
	ph := kvh * hd / phd // the pool's kv head holding the model's
	// A lone query's full sealed blocks are batched, up to four per call
	// (kernels.ScoresTBlocks: one broadcast of q[d] per block row of all).
	var run struct{ qi, b, n int } // query, first block, blocks
	kts := ops.kts(w)
	*kts = (*kts)[:0]
	flush := func() {
		if run.n > 0 {
			i := ch.lo + run.qi/hpk
			q := r.q[i*qd+(h0+run.qi%hpk)*hd:][:hd]
			ops.scoresTBlocks(w.att[run.qi][run.b*bs:(run.b+run.n)*bs], q, *kts, bs)
			run.n, *kts = 0, (*kts)[:0]
		}
	}
	// The keys and values were written steps ago, and the weights have
	// streamed through the caches since: each group's keys are prefetched
	// two groups ahead of its scores, and its values two groups ahead of
	// their sums. (Prefetched with the keys, a chunk's values outgrew L1
	// before their sums came: a 16-branch stories110M Q8_0 step took 1-3%
	// longer, its products included, in three sets of 14-16 interleaved
	// pairs of runs.)
	prefetchKeys := func(g int) {
		if g >= ch.g1 {
			return
		}
		gr := &r.groups[g]
		kb := ops.keyBlock(r.kv, gr.seq, l, gr.b)
		if r.kv.KeySealed(gr.seq, l, gr.b, ph) {
			kernels.PrefetchRows(kb[kvh*hd*bs:], 1, hd*bs, 0)
		} else {
			kernels.PrefetchRows(kb[ph*phd*bs+kvh*hd-ph*phd:], gr.cnt, hd, phd)
		}
	}
	prefetchValues := func(g int) {
		if g >= ch.g1 {
			return
		}
		gr := &r.groups[g]
		kernels.PrefetchRows(ops.valueBlock(r.kv, gr.seq, l, gr.b)[ph*phd*bs+kvh*hd-ph*phd:], gr.cnt, hd, phd)
	}
	prefetchKeys(ch.g0)
	prefetchKeys(ch.g0 + 1)
	for g := ch.g0; g < ch.g1; g++ {
		prefetchKeys(g + 2)
		gr := &r.groups[g]
		kb := ops.keyBlock(r.kv, gr.seq, l, gr.b)
		sealed := r.kv.KeySealed(gr.seq, l, gr.b, ph)
		kt := kb[kvh*hd*bs : (kvh+1)*hd*bs] // sealed, [phd][bs]: this head's hd rows
		if sealed && hpk == 1 && gr.hi-gr.lo == 1 && gr.cnt == bs {
			qi := query(int(r.groupRows[gr.lo]), 0)
			if run.n == 4 || run.n > 0 && (run.qi != qi || run.b+run.n != gr.b) {
				flush()
			}
			if run.n == 0 {
				run.qi, run.b = qi, gr.b
			}
			*kts = append(*kts, kt)
			run.n++
			continue
		}
		w.qs, w.outs = w.qs[:0], w.outs[:0]
		for _, i := range r.groupRows[gr.lo:gr.hi] {
			for hh := range hpk {
				w.qs = append(w.qs, r.q[int(i)*qd+(h0+hh)*hd:][:hd])
				w.outs = append(w.outs, w.att[query(int(i), hh)][gr.b*bs:][:gr.cnt])
			}
		}
		flush()
		if sealed {
			ops.scoresTMulti(w.outs, w.qs, kt, bs)
			continue
		}
		// Staged, [bs][phd]: the block being filled, read as rows with the
		// same arithmetic.
		k := kb[ph*phd*bs+kvh*hd-ph*phd:]
		for qi, q := range w.qs {
			ops.scoresRows(w.outs[qi], q, k, phd)
		}
	}
	flush()

	for i := ch.lo; i < ch.hi; i++ {
		n := r.out.Pos[i] + 1
		for hh := range hpk {
			att := w.att[query(i, hh)]
			if slot >= 0 && !rows[i].NoLogits {
				kernels.Scale(att, scale)
				off := r.out.AttentionOffset(i, slot) + (h0+hh)*n
				copy(r.out.AttentionBuffer()[off:off+n], att) // the scores
				kernels.Softmax(att)
			} else {
				kernels.SoftmaxScaled(att, scale) // the same, in one call
			}
			clear(r.ao[i*qd+(h0+hh)*hd:][:hd])
		}
	}

	prefetchValues(ch.g0)
	prefetchValues(ch.g0 + 1)
	for g := ch.g0; g < ch.g1; g++ { // in block order within the chunk
		prefetchValues(g + 2)
		gr := &r.groups[g]
		v := ops.valueBlock(r.kv, gr.seq, l, gr.b)[ph*phd*bs+kvh*hd-ph*phd:] // [bs][phd], as staged keys
		w.qs, w.outs = w.qs[:0], w.outs[:0]
		for _, i := range r.groupRows[gr.lo:gr.hi] {
			for hh := range hpk {
				w.outs = append(w.outs, r.ao[int(i)*qd+(h0+hh)*hd:][:hd])
				w.qs = append(w.qs, w.att[query(int(i), hh)][gr.b*bs:][:gr.cnt])
			}
		}
		ops.axpyStridedMulti(w.outs, w.qs, v, phd)
	}
}
