package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// Row is one token to feed: the next token of sequence Seq. It is written
// at position Seq.Len() (the cache grows by one).
type Row struct {
	Seq   *kvcache.Seq
	Token int
	// NoLogits skips the classifier for this row, e.g. for the prompt
	// positions of a prefill whose predictions nobody reads.
	NoLogits bool
}

// Attention is one row's attention in one layer: for each head, the
// pre-softmax scores q·k/sqrt(headDim) and the probabilities over the
// positions 0..Len-1 the sequence really has, head-major (Heads x Len).
type Attention struct {
	Heads, Len    int
	Scores, Probs []float32
}

// Output is the result of a forward step. Its slices belong to the Runner
// and are valid until its next Forward call, but for the rows of Logits:
// those stay valid one call longer, until the second successful Forward
// after the one that returned them (a search keeps the row that chose a
// token, for taking the token back at the next step, without a copy).
type Output struct {
	Pos []int // the position each row was written at

	vocab      int
	logits     []float32 // packed, one vocab-sized row per row with logits
	logitIndex []int     // row -> index into logits, or -1

	heads      int
	attnLayers []int
	attnOff    []int     // row*len(attnLayers)+i -> offset into attn
	attn       []float32 // per row and layer: scores then probabilities, Heads x (Pos+1) each
}

// Logits returns row r's next-token logits (nil for a NoLogits row).
func (o *Output) Logits(r int) []float32 {
	i := o.logitIndex[r]
	if i < 0 {
		return nil
	}
	return o.logits[i*o.vocab : (i+1)*o.vocab]
}

// Attention returns row r's attention in the i-th of the layers asked for
// (the zero value when no attention was asked for, or for a NoLogits row).
func (o *Output) Attention(r, i int) Attention {
	if i < 0 || i >= len(o.attnLayers) {
		return Attention{}
	}
	n := o.Pos[r] + 1
	off := o.attnOff[r*len(o.attnLayers)+i]
	if off < 0 {
		return Attention{}
	}
	h := o.heads
	return Attention{Heads: h, Len: n, Scores: o.attn[off : off+h*n], Probs: o.attn[off+h*n : off+2*h*n]}
}

// Runner runs forward steps of one model over one KV cache pool. It owns
// scratch buffers sized to the largest batch it has seen, so a Runner is
// not safe for concurrent use; the work inside a step is parallel.
type Runner struct {
	m  *Model
	kv *kvcache.Pool

	capRows int
	x       []float32 // residual stream, rows x dim
	xb      []float32 // normed input / matmul output, rows x dim
	q       []float32 // rows x QDim
	k, v    []float32 // rows x KVDim
	ao      []float32 // attention output, rows x QDim
	hb, hb2 []float32 // FFN hidden, rows x hidden
	cos     []float32 // rows x HeadDim/2
	sin     []float32

	// The step's attention plan (see plan): chunks of rows, and for each
	// chunk the groups of its rows that share a cache block.
	chunks    []attnChunk
	groups    []attnGroup
	groupRows []int32 // rows of each group, r.groups[g].lo:hi
	rowGroup  []int32 // scratch of plan
	sealRows  []int32 // rows writing the last slot of a block
	poolHD    int     // the pool's HeadDim: KVDim, or the model's HeadDim
	cacheErr  error   // the pool does not fit the model

	xq, hq  kernels.Q8Acts // quantized norm and SwiGLU outputs, for Q8_0 products
	task    layerTask      // the running layer's work for the thread pool
	rows    rowTask        // per-row work for the thread pool
	scratch sync.Pool      // *attnScratch, one per attention work item
	out     Output
	// lastLogits is the logits buffer of the Forward before the last:
	// the next one writes there (see Output).
	lastLogits []float32
}

// attnChunk is a range of batch rows whose attention is computed together
// (for one kv head at a time), and its groups, ordered by block index.
type attnChunk struct {
	lo, hi int // rows
	g0, g1 int // r.groups[g0:g1]
}

// attnGroup is the rows of a chunk whose block b is the same cache block
// and which see the same number of its positions: each load of that
// block's keys and values serves all of them.
type attnGroup struct {
	b, cnt int          // block index, positions of the block the rows see
	id     int          // kvcache block id
	seq    *kvcache.Seq // any member's sequence
	lo, hi int32        // r.groupRows[lo:hi]
}

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
	keyBlock, valueBlock func(p *kvcache.Pool, s *kvcache.Seq, l, i int) []E
	scoresTBlocks        func(out, q []float32, kt [][]E, bs int)
	scoresTMulti         func(out, q [][]float32, kt []E, bs int)
	scoresRows           func(out, q []float32, k []E, stride int)
	axpyStridedMulti     func(y, a [][]float32, v []E, stride int)
	kts                  func(w *attnScratch) *[][]E
}

var (
	opsF32 = kvOps[float32]{
		(*kvcache.Pool).KeyBlock, (*kvcache.Pool).ValueBlock,
		kernels.ScoresTBlocks, kernels.ScoresTMulti, kernels.ScoresRows, kernels.AxpyStridedMulti,
		func(w *attnScratch) *[][]float32 { return &w.kts32 },
	}
	opsF16 = kvOps[uint16]{
		(*kvcache.Pool).KeyBlockF16, (*kvcache.Pool).ValueBlockF16,
		kernels.ScoresTBlocksF16, kernels.ScoresTMultiF16, kernels.ScoresRowsF16, kernels.AxpyStridedMultiF16,
		func(w *attnScratch) *[][]uint16 { return &w.kts16 },
	}
)

// maxChunkRows bounds the rows attending together: beyond a few queries
// per kernel call the block is in L1 anyway, and smaller chunks spread
// better over threads.
const maxChunkRows = 16

// NewRunner returns a Runner over the given cache, which must have been
// made for this model (NewCache): Forward reports an error otherwise. The
// cache's HeadDim may be the model's or KVDim.
func (m *Model) NewRunner(kv *kvcache.Pool) *Runner {
	r := &Runner{m: m, kv: kv}
	c, pc := &m.Config, kv.Config()
	r.poolHD = pc.HeadDim
	if pc.Layers != c.Layers || pc.KVDim != c.KVDim() || pc.HeadDim%c.HeadDim != 0 {
		r.cacheErr = fmt.Errorf("model: KV cache of %d layers, KVDim %d, HeadDim %d does not fit the model's %d layers, KVDim %d, HeadDim %d",
			pc.Layers, pc.KVDim, pc.HeadDim, c.Layers, c.KVDim(), c.HeadDim)
	}
	return r
}

// Cache returns the Runner's KV cache pool.
func (r *Runner) Cache() *kvcache.Pool { return r.kv }

// ErrContextFull is returned when a row would be written past the model's
// context length.
var ErrContextFull = errors.New("model: context length exceeded")

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func (r *Runner) ensure(n int) {
	if n <= r.capRows {
		return
	}
	c := &r.m.Config
	r.capRows = n
	r.x = grow(r.x, n*c.Dim)
	r.xb = grow(r.xb, n*c.Dim)
	r.q = grow(r.q, n*c.QDim())
	r.k = grow(r.k, n*c.KVDim())
	r.v = grow(r.v, n*c.KVDim())
	r.ao = grow(r.ao, n*c.QDim())
	r.hb = grow(r.hb, n*c.HiddenDim)
	r.hb2 = grow(r.hb2, n*c.HiddenDim)
	r.cos = grow(r.cos, n*c.HeadDim/2)
	r.sin = grow(r.sin, n*c.HeadDim/2)
}

// Forward runs one step: every row's token goes through the whole network
// and is appended to its sequence's cache; attnLayers names the layers
// whose attention (scores and probabilities) Output should hold — none when
// empty, at no cost.
//
// On error no sequence has changed: rows already appended are rolled back.
// A full cache returns an error wrapping kvcache.ErrCacheFull, a row past
// the context length one wrapping ErrContextFull.
func (r *Runner) Forward(rows []Row, attnLayers ...int) (*Output, error) {
	m := r.m
	c := &m.Config
	w := m.Weights
	n := len(rows)
	if n == 0 {
		return nil, errors.New("model: empty batch")
	}
	if r.cacheErr != nil {
		return nil, r.cacheErr
	}
	for _, l := range attnLayers {
		if l < 0 || l >= c.Layers {
			return nil, fmt.Errorf("model: attention asked for layer %d of %d", l, c.Layers)
		}
	}
	for i, row := range rows {
		if row.Seq == nil {
			return nil, fmt.Errorf("model: row %d has no sequence", i)
		}
		if row.Token < 0 || row.Token >= c.Vocab {
			return nil, fmt.Errorf("model: row %d: token %d is outside the vocabulary (0..%d)", i, row.Token, c.Vocab-1)
		}
	}

	// Reserve a cache position per row; roll back on failure.
	out := &r.out
	out.Pos = out.Pos[:0]
	for i, row := range rows {
		pos := row.Seq.Len()
		var err error
		if pos >= c.ContextLen {
			err = fmt.Errorf("%w: position %d, context length %d", ErrContextFull, pos, c.ContextLen)
		} else {
			pos, err = r.kv.Append(row.Seq)
		}
		if err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = r.kv.Truncate(rows[j].Seq, out.Pos[j])
			}
			return nil, fmt.Errorf("model: row %d: %w", i, err)
		}
		out.Pos = append(out.Pos, pos)
	}

	r.ensure(n)
	dim, hd := c.Dim, c.HeadDim
	r.prepareOutput(rows, attnLayers)
	r.plan(rows)

	// Token embeddings and the rotation angles of each row's position.
	half := hd / 2
	for i, row := range rows {
		w.TokenEmbd.Row(r.x[i*dim:(i+1)*dim], row.Token)
		p := float64(out.Pos[i])
		for j, f := range m.invFreq {
			s, co := math.Sincos(p * f)
			r.cos[i*half+j], r.sin[i*half+j] = float32(co), float32(s)
		}
	}

	for l := range w.Layers {
		lw := &w.Layers[l]

		// Attention: the previous layer's residual, norm, q/k/v
		// projections, RoPE, cache write.
		qkv := []*kernels.Mat{lw.Wq, lw.Wk, lw.Wv}
		xq := quantFor(&r.xq, qkv, n)
		r.rowWork(rowTask{r: r, norm: lw.AttnNorm, residual: l > 0, quant: xq}, n)
		matMuls(qkv, [][]float32{r.q, r.k, r.v}, r.xb, n, xq)
		// Bias, RoPE and the cache write of every row; then the sealing
		// of the blocks this step fills; then attention over each row's
		// positions 0..pos, by (chunk of rows, kv head).
		attnSlot := -1
		for i, al := range attnLayers {
			if al == l {
				attnSlot = i
			}
		}
		t := &r.task
		*t = layerTask{r: r, rows: rows, lw: lw, l: l, slot: attnSlot}
		kernels.ParallelTask(n, t)
		t.phase++
		kernels.ParallelTask(len(r.sealRows)*(c.KVDim()/r.poolHD), t)
		t.phase++
		kernels.ParallelTask(len(r.chunks)*c.KVHeads, t)
		*t = layerTask{} // drop the references

		// Output projection; its residual and the SwiGLU feed-forward.
		lw.Wo.MatMul(r.xb, r.ao, n)
		ffn := []*kernels.Mat{lw.W1, lw.W3}
		xq = quantFor(&r.xq, ffn, n)
		r.rowWork(rowTask{r: r, norm: lw.FFNNorm, residual: true, quant: xq}, n)
		matMuls(ffn, [][]float32{r.hb, r.hb2}, r.xb, n, xq)
		down := []*kernels.Mat{lw.W2}
		hq := quantFor(&r.hq, down, n)
		r.rowWork(rowTask{r: r, quant: hq}, n)        // SwiGLU
		matMuls(down, [][]float32{r.xb}, r.hb, n, hq) // its residual goes with the next norm
	}

	// The last residual, final norm and classifier, only for rows that
	// want logits: when all do (a decoding step), as the layers' norms
	// do, on the threads; else row by row here, compacting: row nl <= i
	// of r.xb is free by the time row i's norm goes there.
	if len(out.logits) == n*c.Vocab {
		head := []*kernels.Mat{w.Output}
		xq := quantFor(&r.xq, head, n)
		r.rowWork(rowTask{r: r, norm: w.OutputNorm, residual: true, quant: xq}, n)
		matMuls(head, [][]float32{out.logits}, r.xb, n, xq)
		return out, nil
	}
	nl := 0
	for i, row := range rows {
		if row.NoLogits {
			continue
		}
		x := r.x[i*dim : (i+1)*dim]
		kernels.Add(x, r.xb[i*dim:(i+1)*dim])
		kernels.RMSNorm(r.xb[nl*dim:(nl+1)*dim], x, w.OutputNorm, c.NormEps)
		nl++
	}
	if nl > 0 {
		w.Output.MatMul(out.logits, r.xb, nl)
	}
	return out, nil
}

// prepareOutput sizes the logits and attention buffers of r.out.
func (r *Runner) prepareOutput(rows []Row, attnLayers []int) {
	c := &r.m.Config
	out := &r.out
	out.vocab, out.heads = c.Vocab, c.Heads
	out.logitIndex = out.logitIndex[:0]
	nl := 0
	for _, row := range rows {
		if row.NoLogits {
			out.logitIndex = append(out.logitIndex, -1)
			continue
		}
		out.logitIndex = append(out.logitIndex, nl)
		nl++
	}
	// The last step's logits stay as they are; this step writes over the
	// step's before (prepareOutput runs once the step cannot fail).
	out.logits, r.lastLogits = r.lastLogits, out.logits
	out.logits = grow(out.logits, nl*c.Vocab)

	// Attention is kept only for rows with logits: a prefill's other rows
	// would cost O(prompt²) memory for nothing.
	out.attnLayers = append(out.attnLayers[:0], attnLayers...)
	out.attnOff = out.attnOff[:0]
	total := 0
	for i, row := range rows {
		for range attnLayers {
			if row.NoLogits {
				out.attnOff = append(out.attnOff, -1)
				continue
			}
			out.attnOff = append(out.attnOff, total)
			total += 2 * c.Heads * (out.Pos[i] + 1)
		}
	}
	out.attn = grow(out.attn, total)
}

// layerTask is a layer's attention work for kernels.ParallelTask, one
// phase after the other: prepare rows, seal the blocks they fill (by row
// and pool kv head), attend (by chunk and kv head). It lives in the Runner
// so that handing it to the pool allocates nothing.
type layerTask struct {
	r     *Runner
	rows  []Row
	lw    *Layer
	l     int
	slot  int // the layer's index in the attention asked for, or -1
	phase int // 0 prepare, 1 seal, 2 attend
}

// rowTask is per-row work between a layer's products, for
// kernels.ParallelTask: the RMSNorm of rows of r.x into r.xb with weights
// norm, after adding r.xb (the last product's output) into r.x if
// residual is set; or (norm nil) the SwiGLU of r.hb by r.hb2. From
// parallelRows rows it is worth a hand-off to the threads: done on the
// calling goroutine, it left the others idle for some 10% of a 16-branch
// stories110M Q8_0 step (and so did the residual adds, until they moved
// into the norms).
type rowTask struct {
	r        *Runner
	norm     []float32
	residual bool
	quant    *kernels.Q8Acts // when not nil, the rows made are also quantized there
}

func (t *rowTask) Run(lo, hi int) {
	r, c := t.r, &t.r.m.Config
	if t.norm != nil {
		dim := c.Dim
		for i := lo; i < hi; i++ {
			x, xb := r.x[i*dim:(i+1)*dim], r.xb[i*dim:(i+1)*dim]
			if t.residual {
				kernels.Add(x, xb)
			}
			kernels.RMSNorm(xb, x, t.norm, c.NormEps)
			if t.quant != nil {
				t.quant.Quantize(i, xb)
			}
		}
		return
	}
	h := c.HiddenDim
	kernels.SwiGLU(r.hb[lo*h:hi*h], r.hb2[lo*h:hi*h])
	if t.quant != nil {
		for i := lo; i < hi; i++ {
			t.quant.Quantize(i, r.hb[i*h:(i+1)*h])
		}
	}
}

// parallelRows is the batch from which rowWork hands rows to the threads.
const parallelRows = 8

// rowWork runs t over rows [0, n): on the pool for parallelRows rows and
// more, else here (a hand-off costs about a microsecond).
func (r *Runner) rowWork(t rowTask, n int) {
	r.rows = t
	if n >= parallelRows {
		kernels.ParallelTask(n, &r.rows)
	} else {
		r.rows.Run(0, n)
	}
	r.rows = rowTask{}
}

// quantFor returns a, sized for n rows, when the product that follows
// is of Q8_0 matrices only: the row task that makes the product's input
// rows then quantizes them too, on the thread that made them, sparing the
// product a hand-off to the threads (three a layer; with them, a
// 16-branch stories110M Q8_0 step took some 1-2% longer). Otherwise nil:
// the product takes float rows.
func quantFor(a *kernels.Q8Acts, mats []*kernels.Mat, n int) *kernels.Q8Acts {
	for _, m := range mats {
		if m.Type != kernels.Q8_0 {
			return nil
		}
	}
	a.Reset(n, mats[0].Cols)
	return a
}

// matMuls computes outs[i] = mats[i] x: from xq, x's rows quantized, when
// it is not nil; else one kernels.MatMulMany call (one quantization of x,
// one hand-off to the threads) when the matrices share a type, as they do
// but in mixed-type files.
func matMuls(mats []*kernels.Mat, outs [][]float32, x []float32, n int, xq *kernels.Q8Acts) {
	if xq != nil {
		kernels.MatMulQ8Acts(mats, outs, xq)
		return
	}
	for _, m := range mats[1:] {
		if !kernels.SameActs(m.Type, mats[0].Type) {
			for i, m := range mats {
				m.MatMul(outs[i], x, n)
			}
			return
		}
	}
	kernels.MatMulMany(mats, outs, x, n)
}

func (t *layerTask) Run(lo, hi int) {
	r := t.r
	switch t.phase {
	case 0:
		r.prepare(t.rows, t.lw, t.l, lo, hi)
	case 1:
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
func (r *Runner) prepare(rows []Row, lw *Layer, l, lo, hi int) {
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
func (r *Runner) seal(rows []Row, l, i, h int) {
	r.kv.Seal(rows[i].Seq, l, r.out.Pos[i]/r.kv.BlockSize(), h)
}

// plan splits the batch into chunks of rows and, within each chunk,
// groups the rows by the cache block they read at each block index: in a
// tree step every branch reads the shared prefix's blocks, in a prefill
// every row the prompt's. Block tables do not change during the step, so
// one plan serves every layer.
func (r *Runner) plan(rows []Row) {
	c := &r.m.Config
	n, bs := len(rows), r.kv.BlockSize()
	nchunks := (n + maxChunkRows - 1) / maxChunkRows
	// From 8 rows a thread, a whole number of chunks per thread: the
	// pool hands each thread a contiguous part of the work items, (chunk,
	// kv head) in order, so that a thread attends for the rows whose keys,
	// values and queries it has just prepared (the prepare phase splits
	// the rows the same way) instead of reading half of them from the
	// other core's cache. For 16 rows on 2 threads: 2 chunks of 8, not
	// one of 16; the 16-branch stories110M Q8_0 step took 3.3-3.6% less
	// time (two sets of 12 interleaved pairs of runs).
	if t := kernels.Threads(); n >= 8*t {
		nchunks = t * ((n + t*maxChunkRows - 1) / (t * maxChunkRows))
	}
	// Enough work items for the threads even with few kv heads.
	want := (2*kernels.Threads() + c.KVHeads - 1) / c.KVHeads
	nchunks = min(n, max(nchunks, want))
	size := (n + nchunks - 1) / nchunks
	r.chunks, r.groups, r.groupRows = r.chunks[:0], r.groups[:0], r.groupRows[:0]
	if cap(r.rowGroup) < size {
		r.rowGroup = make([]int32, size)
	}
	for lo := 0; lo < n; lo += size {
		hi := min(n, lo+size)
		g0, nb := len(r.groups), 0
		for i := lo; i < hi; i++ {
			nb = max(nb, (r.out.Pos[i]+bs)/bs)
		}
		for b := range nb {
			start, members := len(r.groups), 0
			gi := r.rowGroup[:hi-lo]
			for i := lo; i < hi; i++ {
				gi[i-lo] = -1
				seen := r.out.Pos[i] + 1 - b*bs
				if seen <= 0 {
					continue
				}
				id, cnt := r.kv.BlockID(rows[i].Seq, b), min(bs, seen)
				g := len(r.groups) - 1
				for g >= start && (r.groups[g].id != id || r.groups[g].cnt != cnt) {
					g--
				}
				if g < start {
					r.groups = append(r.groups, attnGroup{b: b, cnt: cnt, id: id, seq: rows[i].Seq})
					g = len(r.groups) - 1
				}
				r.groups[g].hi++ // a count for now
				gi[i-lo] = int32(g)
				members++
			}
			off := int32(len(r.groupRows))
			for g := start; g < len(r.groups); g++ {
				cnt := r.groups[g].hi
				r.groups[g].lo, r.groups[g].hi = off, off // hi: the fill cursor
				off += cnt
			}
			r.groupRows = slices.Grow(r.groupRows, members)[:len(r.groupRows)+members]
			for i := lo; i < hi; i++ {
				if g := gi[i-lo]; g >= 0 {
					r.groupRows[r.groups[g].hi] = int32(i)
					r.groups[g].hi++
				}
			}
		}
		r.chunks = append(r.chunks, attnChunk{lo: lo, hi: hi, g0: g0, g1: len(r.groups)})
	}

	r.sealRows = r.sealRows[:0]
	for i := range rows {
		if r.out.Pos[i]%bs == bs-1 {
			r.sealRows = append(r.sealRows, int32(i))
		}
	}
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
func (r *Runner) attend(rows []Row, l int, ch *attnChunk, kvh, slot int) {
	if r.kv.DType() == kvcache.F16 {
		attendWith(r, &opsF16, rows, l, ch, kvh, slot)
	} else {
		attendWith(r, &opsF32, rows, l, ch, kvh, slot)
	}
}

// attendWith is attend for a cache of E.
func attendWith[E float32 | uint16](r *Runner, ops *kvOps[E], rows []Row, l int, ch *attnChunk, kvh, slot int) {
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
				off := r.out.attnOff[i*len(r.out.attnLayers)+slot] + h*n
				off += c.Heads * n // probabilities; the scores are kept before
				w.att = append(w.att, r.out.attn[off:off+n:off+n])
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
				off := r.out.attnOff[i*len(r.out.attnLayers)+slot] + (h0+hh)*n
				copy(r.out.attn[off:off+n], att) // the scores
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
