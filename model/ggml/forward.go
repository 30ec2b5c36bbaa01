package ggml

import (
	"fmt"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// shape is what a step's graph depends on: its rows, those with logits,
// the slots attention reads (nkv of them from slot lo: the blocks of
// every row's sequence, a block shared by many rows read once), the slots
// copied on write, and the layers whose attention goes out.
type shape struct {
	n, nl   int
	lo, nkv int
	ncp     int
	attn    []int
}

// graph is a step's graph and its tensors: the inputs to set, the
// outputs to read.
type graph struct {
	g gg.Graph

	tokens, pos *gg.Tensor // I32 [n]: each row's token and position
	kidx        *gg.Tensor // I64 [n]: the slot each row's key goes to
	vidx        *gg.Tensor // I64 [n*KVDim]: the element of the transposed values each row's value element goes to
	mask        *gg.Tensor // F32 [nkv, n]: 0 where a row sees a slot, -Inf elsewhere
	outRows     *gg.Tensor // I32 [nl]: the rows with logits, when not all have
	csrc, cdst  *gg.Tensor // [ncp]: the slots copied on write, and where to
	cvsrc       *gg.Tensor // [ncp*KVDim]: the same in the transposed values
	cvdst       *gg.Tensor

	logits        *gg.Tensor   // F32 [Vocab, nl]
	scores, probs []*gg.Tensor // per layer asked: F32 [nkv*Heads, nl]
}

// build makes a step's graph of shape s in ctx. The step, for the rows x
// of the residual stream (model.Reference is the same, one row at a time):
//
//	x = embedding(token)
//	for each layer:
//		x += attention(rmsnorm(x))   // q, k, v; RoPE; cache write; attend; Wo
//		x += ffn(rmsnorm(x))         // W2 (silu(W1 x) * W3 x)
//	logits = output(rmsnorm(x))
func (b *Backend) build(ctx gg.Context, s shape) *graph {
	c := &b.m.Config
	hd, heads, kvHeads, kvd := int64(c.HeadDim), int64(c.Heads), int64(c.KVHeads), int64(c.KVDim())
	n, nkv := int64(s.n), int64(s.nkv)
	in := func(t gg.Type, ne ...int64) *gg.Tensor {
		x := ctx.NewTensor(t, ne...)
		x.SetInput()
		return x
	}
	t := &graph{g: ctx.NewGraph(b.graphN)}
	t.tokens, t.pos, t.kidx = in(gg.TypeI32, n), in(gg.TypeI32, n), in(gg.TypeI64, n)
	t.vidx, t.mask = in(gg.TypeI64, n*kvd), in(gg.TypeF32, nkv, n)
	if s.nl > 0 && s.nl < s.n {
		t.outRows = in(gg.TypeI32, int64(s.nl))
	}
	if s.ncp > 0 {
		t.csrc, t.cdst = in(gg.TypeI32, int64(s.ncp)), in(gg.TypeI64, int64(s.ncp))
		t.cvsrc, t.cvdst = in(gg.TypeI32, int64(s.ncp)*kvd), in(gg.TypeI64, int64(s.ncp)*kvd)
	}
	mode := gg.RopeNeoX
	if c.RopeInterleaved {
		mode = gg.RopeNormal
	}
	rope := func(x *gg.Tensor, heads int64) *gg.Tensor {
		return ctx.Rope(ctx.Reshape(x, hd, heads, n), t.pos, b.freqFactors, int(hd), mode, c.ContextLen, float32(c.RopeTheta))
	}
	norm := func(x, w *gg.Tensor) *gg.Tensor { return ctx.Mul(ctx.RMSNorm(x, c.NormEps), w) }
	// rowsOut is an attention tensor [nkv, n, heads] as the rows with
	// logits' [nkv*heads] rows, head-major.
	rowsOut := func(a *gg.Tensor) *gg.Tensor {
		a = ctx.Reshape(ctx.Cont(ctx.Permute(a, 0, 2, 1, 3)), nkv*heads, n)
		if t.outRows != nil {
			a = ctx.GetRows(a, t.outRows)
		}
		a.SetOutput()
		t.g.Expand(a)
		return a
	}
	kRow := gg.RowSize(b.kvT, int(kvd)) // bytes of a slot's keys
	es := gg.RowSize(b.kvT, 1)          // bytes of an element
	scale := float32(1 / math.Sqrt(float64(hd)))

	x := ctx.GetRows(b.tokEmbd, t.tokens) // x = embedding(token), [Dim, n]
	for l := range b.layers {
		lw := &b.layers[l]
		h := norm(x, lw.attnNorm) // h = rmsnorm(x)
		q := ctx.MulMat(lw.wq, h) // q = Wq h
		k := ctx.MulMat(lw.wk, h) // k = Wk h
		v := ctx.MulMat(lw.wv, h) // v = Wv h
		if lw.bq != nil {         // Qwen2's biases
			q, k, v = ctx.Add(q, lw.bq), ctx.Add(k, lw.bk), ctx.Add(v, lw.bv)
		}
		q = rope(q, heads)   // RoPE on every query head, [hd, heads, n]
		k = rope(k, kvHeads) // and every key head

		// The cache: the copies on write first, then this step's keys and
		// values into their slots; attention reads after both.
		kPool, vPool := b.k[l], ctx.Reshape(b.v[l], 1, int64(b.slots)*kvd)
		if s.ncp > 0 {
			kPool = ctx.SetRows(kPool, ctx.GetRows(kPool, t.csrc), t.cdst)
			vPool = ctx.SetRows(vPool, ctx.GetRows(vPool, t.cvsrc), t.cvdst)
		}
		kPool = ctx.SetRows(kPool, ctx.Reshape(k, kvd, n), t.kidx)
		vPool = ctx.SetRows(vPool, ctx.Reshape(v, 1, kvd*n), t.vidx)
		t.g.Expand(kPool)
		t.g.Expand(vPool)

		// Attention over slots lo..lo+nkv-1 for every row and head, the
		// mask keeping each row's own positions: kv head j serves query
		// heads j*heads/kvHeads...
		keys := ctx.View3D(kPool, int(hd), int(nkv), int(kvHeads), kRow, int(hd)*es, s.lo*kRow)             // [hd, nkv, kvHeads]
		vals := ctx.View3D(vPool, int(nkv), int(hd), int(kvHeads), b.slots*es, int(hd)*b.slots*es, s.lo*es) // [nkv, hd, kvHeads]
		kq := ctx.MulMat(keys, ctx.Permute(q, 0, 2, 1, 3))                                                  // [nkv, n, heads]
		var p *gg.Tensor
		if slices.Contains(s.attn, l) {
			sc := ctx.Scale(kq, scale) // score = q·k / sqrt(head dim)
			p = ctx.SoftMax(sc, t.mask, 1)
			t.scores, t.probs = append(t.scores, rowsOut(sc)), append(t.probs, rowsOut(p))
		} else {
			p = ctx.SoftMax(kq, t.mask, scale) // softmax over the row's positions
		}
		o := ctx.MulMat(vals, p)                                           // the probabilities' weighted sum of values, [hd, n, heads]
		o = ctx.Reshape(ctx.Cont(ctx.Permute(o, 0, 2, 1, 3)), heads*hd, n) // [QDim, n]
		x = ctx.Add(x, ctx.MulMat(lw.wo, o))                               // x += Wo o (the residual)

		h = norm(x, lw.ffnNorm)                                     // h = rmsnorm(x)
		f := ctx.SwiGLU(ctx.MulMat(lw.w1, h), ctx.MulMat(lw.w3, h)) // f = silu(W1 h) * W3 h
		x = ctx.Add(x, ctx.MulMat(lw.w2, f))                        // x += W2 f (the residual)
	}
	if s.nl > 0 {
		if t.outRows != nil {
			x = ctx.GetRows(x, t.outRows)
		}
		t.logits = ctx.MulMat(b.output, norm(x, b.outNorm)) // logits = output rmsnorm(x)
		t.logits.SetOutput()
		t.g.Expand(t.logits)
	}
	return t
}

// reserveRows and reserveSlots size the graph memory reserved at the
// start: steps larger than that grow it once.
const (
	reserveRows  = 64
	reserveSlots = 2048
)

// reserve sizes the scheduler's memory for a step of reserveRows rows
// attending over reserveSlots slots.
func (b *Backend) reserve() error {
	bs := b.pool.BlockSize()
	nkv := min(b.slots, (reserveSlots+bs-1)/bs*bs)
	ctx := gg.NewContext(b.graphN, b.graphN)
	defer ctx.Free()
	g := b.build(ctx, shape{n: reserveRows, nl: reserveRows, nkv: nkv})
	err := b.sched.Reserve(g.g)
	b.sched.Reset()
	return err
}

// step holds a step's host-side inputs; its slices are reused.
type step struct {
	tokens, pos, outRows []int32
	kidx, vidx           []int64
	mask                 []float32
	csrc, cvsrc          []int32
	cdst, cvdst          []int64
	attn                 []float32 // scratch for reading attention back
	copies               map[int64]int64
}

// plan fills the step's inputs for rows at positions pos, and returns
// its shape.
func (b *Backend) plan(rows []model.Row, pos []int, attnLayers []int) shape {
	c, st, p := &b.m.Config, &b.st, b.pool
	bs, kvd := p.BlockSize(), c.KVDim()
	n := len(rows)
	s := shape{n: n, attn: attnLayers}
	st.tokens, st.pos, st.kidx, st.outRows = st.tokens[:0], st.pos[:0], st.kidx[:0], st.outRows[:0]
	lo, hi := math.MaxInt, 0 // the blocks the rows read
	for i, row := range rows {
		for blk := range pos[i]/bs + 1 {
			id := p.BlockID(row.Seq, blk)
			lo, hi = min(lo, id), max(hi, id)
		}
		slot := p.BlockID(row.Seq, pos[i]/bs)*bs + pos[i]%bs
		st.tokens = append(st.tokens, int32(row.Token))
		st.pos = append(st.pos, int32(pos[i]))
		st.kidx = append(st.kidx, int64(slot))
		if !row.NoLogits {
			st.outRows = append(st.outRows, int32(i))
		}
	}
	s.nl = len(st.outRows)
	s.lo, s.nkv = lo*bs, (hi-lo+1)*bs
	st.vidx = slices.Grow(st.vidx[:0], n*kvd)[:n*kvd]
	for i, slot := range st.kidx {
		for d := range kvd {
			st.vidx[i*kvd+d] = int64(d*b.slots) + slot
		}
	}
	st.mask = slices.Grow(st.mask[:0], n*s.nkv)[:n*s.nkv]
	inf := float32(math.Inf(-1))
	for i, row := range rows {
		m := st.mask[i*s.nkv : (i+1)*s.nkv]
		for j := range m {
			m[j] = inf
		}
		for blk := range pos[i]/bs + 1 {
			off := p.BlockID(row.Seq, blk)*bs - s.lo
			clear(m[off : off+min(bs, pos[i]+1-blk*bs)])
		}
	}
	s.ncp = b.planCopies()
	return s
}

// planCopies turns the pending copies on write, in their order, into one
// gather of source slots and one scatter to destination slots, both
// reading the cache as it was before any of them (a copy reading a block
// an earlier copy wrote reads that copy's source), and returns how many
// slots move.
func (b *Backend) planCopies() int {
	st, bs, kvd := &b.st, b.pool.BlockSize(), b.m.Config.KVDim()
	st.csrc, st.cdst, st.cvsrc, st.cvdst = st.csrc[:0], st.cdst[:0], st.cvsrc[:0], st.cvdst[:0]
	if len(b.pending) == 0 {
		return 0
	}
	if st.copies == nil {
		st.copies = map[int64]int64{}
	}
	from := st.copies // destination slot -> the slot its data comes from
	clear(from)
	for _, cp := range b.pending {
		for s := range cp.Used {
			src, dst := int64(int(cp.Src)*bs+s), int64(int(cp.Dst)*bs+s)
			if o, ok := from[src]; ok {
				src = o
			}
			from[dst] = src
		}
	}
	for dst, src := range from {
		if dst != src {
			st.cdst = append(st.cdst, dst)
		}
	}
	slices.Sort(st.cdst)
	for _, dst := range st.cdst {
		src := from[dst]
		st.csrc = append(st.csrc, int32(src))
		for d := range int64(kvd) {
			st.cvsrc = append(st.cvsrc, int32(d*int64(b.slots)+src))
			st.cvdst = append(st.cvdst, d*int64(b.slots)+dst)
		}
	}
	return len(st.cdst)
}

// setInputs copies the step's inputs to the graph's tensors.
func (b *Backend) setInputs(g *graph) {
	st := &b.st
	gg.Set(g.tokens, st.tokens, 0)
	gg.Set(g.pos, st.pos, 0)
	gg.Set(g.kidx, st.kidx, 0)
	gg.Set(g.vidx, st.vidx, 0)
	gg.Set(g.mask, st.mask, 0)
	if g.outRows != nil {
		gg.Set(g.outRows, st.outRows, 0)
	}
	if g.csrc != nil {
		gg.Set(g.csrc, st.csrc, 0)
		gg.Set(g.cdst, st.cdst, 0)
		gg.Set(g.cvsrc, st.cvsrc, 0)
		gg.Set(g.cvdst, st.cvdst, 0)
	}
}

// Forward runs one step: every row's token goes through the whole network
// and is appended to its sequence's cache, in one graph on the device;
// attnLayers names the layers whose attention (scores and probabilities)
// Output should hold.
//
// On error no sequence has changed: rows already appended are rolled back.
// A full cache returns an error wrapping kvcache.ErrCacheFull, a row past
// the context length one wrapping model.ErrContextFull.
func (b *Backend) Forward(rows []model.Row, attnLayers ...int) (*model.Output, error) {
	if b.broken != nil {
		return nil, b.broken
	}
	m := b.m
	c := &m.Config
	if m.Closed() {
		return nil, model.ErrClosed
	}
	if err := m.CheckRows(rows, attnLayers); err != nil {
		return nil, err
	}
	out := &b.out
	var err error
	out.Pos, err = model.AppendRows(b.pool, rows, c.ContextLen, out.Pos)
	// The copies the appends decided go with this step's graph, or the
	// next one's when this one does not run.
	b.pending = b.pool.TakeCopies(b.pending)
	if err != nil {
		return nil, err
	}
	rollback := func() {
		for i := len(rows) - 1; i >= 0; i-- {
			_ = b.pool.Truncate(rows[i].Seq, out.Pos[i])
		}
	}
	s := b.plan(rows, out.Pos, attnLayers)
	ctx := gg.NewContext(b.graphN, b.graphN)
	defer ctx.Free()
	g := b.build(ctx, s)
	b.sched.Reset()
	if err := b.sched.Alloc(g.g); err != nil {
		rollback()
		return nil, err
	}
	b.setInputs(g)
	if err := b.sched.Compute(g.g); err != nil {
		rollback()
		b.broken = fmt.Errorf("ggml: a step failed on %s, and the device's cache is undefined since: %w", b.DeviceName(), err)
		return nil, b.broken
	}
	b.pending = b.pending[:0]

	out.Prepare(rows, c.Vocab, c.Heads, attnLayers)
	if g.logits != nil {
		gg.Get(g.logits, out.LogitsBuffer(), 0)
	}
	for i := range attnLayers {
		b.readAttention(rows, s, g.scores[i], g.probs[i], i)
	}
	return out, nil
}

// readAttention copies the i-th asked layer's scores and probabilities
// ([nkv*Heads] per row with logits, the slots in block-id order) into the
// Output, each row's in position order.
func (b *Backend) readAttention(rows []model.Row, s shape, scores, probs *gg.Tensor, i int) {
	out, st, p := &b.out, &b.st, b.pool
	heads, bs := b.m.Config.Heads, p.BlockSize()
	per := s.nkv * heads
	buf := out.AttentionBuffer()
	for k, src := range []*gg.Tensor{scores, probs} {
		st.attn = slices.Grow(st.attn[:0], s.nl*per)[:s.nl*per]
		gg.Get(src, st.attn, 0)
		j := 0 // the row's index among the rows with logits
		for r, row := range rows {
			if row.NoLogits {
				continue
			}
			off := out.AttentionOffset(r, i)
			np := out.Pos[r] + 1
			dst := buf[off+k*heads*np : off+(k+1)*heads*np]
			from := st.attn[j*per : (j+1)*per]
			for blk := range (np + bs - 1) / bs {
				col := p.BlockID(row.Seq, blk)*bs - s.lo
				cnt := min(bs, np-blk*bs)
				for h := range heads {
					copy(dst[h*np+blk*bs:h*np+blk*bs+cnt], from[h*s.nkv+col:h*s.nkv+col+cnt])
				}
			}
			j++
		}
	}
}

var _ model.Backend = (*Backend)(nil)
