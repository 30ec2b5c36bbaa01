package ggml

import (
	"fmt"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// group is rows [r0, r1) of a step, in the step's order: the rows whose
// sequences share blocks, directly or through others (the branches of
// one search), which attend together over slots [lo, lo+nkv) — every
// block any of them reads, each read once for all of them. Rows of
// different searches attend apart: attending over the union of all
// searches' blocks would cost rows x slots scores of which only one
// search's are kept.
type group struct {
	r0, r1  int
	lo, nkv int
	maskOff int // where its mask, [nkv, r1-r0], starts in the step's
	nl      int // its rows with logits
}

// shape is what a step's graph depends on: its rows, those with logits,
// the groups, the slots copied on write, and the layers whose attention
// goes out.
type shape struct {
	n, nl   int
	groups  []group
	reorder bool // the step's order is not the rows' (outputs gathered back)
	maskLen int
	ncp     int
	attn    []int
}

// graph is a step's graph and its tensors: the inputs to set, the
// outputs to read.
type graph struct {
	g gg.Graph

	tokens, pos *gg.Tensor   // I32 [n]: each row's token and position
	kidx        *gg.Tensor   // I64 [n]: the slot each row's key goes to
	vidx        *gg.Tensor   // I64 [n*KVDim]: the element of the transposed values each row's value element goes to
	mask        *gg.Tensor   // F32 [maskLen]: per group [nkv, rows], 0 where a row sees a slot, -Inf elsewhere
	outRows     *gg.Tensor   // I32 [nl]: the rows with logits, in the rows' order, when not simply all
	groupOut    []*gg.Tensor // per group, I32 [nl]: its rows with logits, when attention goes out and not all have
	csrc, cdst  *gg.Tensor   // [ncp]: the slots copied on write, and where to
	cvsrc       *gg.Tensor   // [ncp*KVDim]: the same in the transposed values
	cvdst       *gg.Tensor

	logits        *gg.Tensor     // F32 [Vocab, nl]
	rowIdx        *gg.Tensor     // I64 [nl]: where the rows go in the device's store (lazy rows)
	stats         *statsGraph    // the logits rows' statistics, when asked for
	scores, probs [][]*gg.Tensor // per layer asked and group: F32 [nkv*Heads, nl]
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
	n := int64(s.n)
	in := func(t gg.Type, ne ...int64) *gg.Tensor {
		x := ctx.NewTensor(t, ne...)
		x.SetInput()
		return x
	}
	t := &graph{g: ctx.NewGraph(b.graphSize(len(s.groups)))}
	t.tokens, t.pos, t.kidx = in(gg.TypeI32, n), in(gg.TypeI32, n), in(gg.TypeI64, n)
	t.vidx, t.mask = in(gg.TypeI64, n*kvd), in(gg.TypeF32, int64(s.maskLen))
	if s.nl > 0 && (s.nl < s.n || s.reorder) {
		t.outRows = in(gg.TypeI32, int64(s.nl))
	}
	if s.ncp > 0 {
		t.csrc, t.cdst = in(gg.TypeI32, int64(s.ncp)), in(gg.TypeI64, int64(s.ncp))
		t.cvsrc, t.cvdst = in(gg.TypeI32, int64(s.ncp)*kvd), in(gg.TypeI64, int64(s.ncp)*kvd)
	}
	if len(s.attn) > 0 {
		t.groupOut = make([]*gg.Tensor, len(s.groups))
		for gi, g := range s.groups {
			if g.nl > 0 && g.nl < g.r1-g.r0 {
				t.groupOut[gi] = in(gg.TypeI32, int64(g.nl))
			}
		}
	}
	mode := gg.RopeNeoX
	if c.RopeInterleaved {
		mode = gg.RopeNormal
	}
	rope := func(x *gg.Tensor, heads int64) *gg.Tensor {
		return ctx.Rope(ctx.Reshape(x, hd, heads, n), t.pos, b.freqFactors, int(hd), mode, c.ContextLen, float32(c.RopeTheta))
	}
	norm := func(x, w *gg.Tensor) *gg.Tensor { return ctx.Mul(ctx.RMSNorm(x, c.NormEps), w) }
	// rowsOut is a group's attention tensor [nkv, rows, heads] as its
	// rows with logits' [nkv*heads] rows, head-major.
	rowsOut := func(a *gg.Tensor, gi int) *gg.Tensor {
		g := s.groups[gi]
		a = ctx.Reshape(ctx.Cont(ctx.Permute(a, 0, 2, 1, 3)), int64(g.nkv)*heads, int64(g.r1-g.r0))
		if t.groupOut[gi] != nil {
			a = ctx.GetRows(a, t.groupOut[gi])
		}
		a.SetOutput()
		t.g.Expand(a)
		return a
	}
	kRow := gg.RowSize(b.kvT, int(kvd)) // bytes of a slot's keys
	es := gg.RowSize(b.kvT, 1)          // bytes of an element
	scale := float32(1 / math.Sqrt(float64(hd)))
	t.scores, t.probs = make([][]*gg.Tensor, len(s.attn)), make([][]*gg.Tensor, len(s.attn))

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

		// Attention, group by group: every row and head over the group's
		// slots, the mask keeping each row's own positions; kv head j
		// serves query heads j*heads/kvHeads...
		ai := slices.Index(s.attn, l)
		os := make([]*gg.Tensor, 0, len(s.groups))
		for gi, g := range s.groups {
			rows := g.r1 - g.r0
			qg := q
			if rows < s.n {
				qg = ctx.View3D(q, int(hd), int(heads), rows, int(hd)*4, int(hd*heads)*4, g.r0*int(hd*heads)*4)
			}
			keys := ctx.View3D(kPool, int(hd), g.nkv, int(kvHeads), kRow, int(hd)*es, g.lo*kRow)             // [hd, nkv, kvHeads]
			vals := ctx.View3D(vPool, g.nkv, int(hd), int(kvHeads), b.slots*es, int(hd)*b.slots*es, g.lo*es) // [nkv, hd, kvHeads]
			mask := ctx.View2D(t.mask, g.nkv, rows, g.nkv*4, g.maskOff*4)
			kq := ctx.MulMat(keys, ctx.Permute(qg, 0, 2, 1, 3)) // [nkv, rows, heads]
			var p *gg.Tensor
			if ai >= 0 {
				sc := ctx.Scale(kq, scale) // score = q·k / sqrt(head dim)
				p = ctx.SoftMax(sc, mask, 1)
				if g.nl > 0 {
					t.scores[ai] = append(t.scores[ai], rowsOut(sc, gi))
					t.probs[ai] = append(t.probs[ai], rowsOut(p, gi))
				} else {
					t.scores[ai], t.probs[ai] = append(t.scores[ai], nil), append(t.probs[ai], nil)
				}
			} else {
				p = ctx.SoftMax(kq, mask, scale) // softmax over the row's positions
			}
			o := ctx.MulMat(vals, p)                                                                  // the probabilities' weighted sum of values, [hd, rows, heads]
			os = append(os, ctx.Reshape(ctx.Cont(ctx.Permute(o, 0, 2, 1, 3)), heads*hd, int64(rows))) // [QDim, rows]
		}
		for len(os) > 1 { // the groups' outputs joined in the step's order
			joined := os[:0]
			for i := 0; i < len(os); i += 2 {
				if i+1 < len(os) {
					joined = append(joined, ctx.Concat(os[i], os[i+1], 1))
				} else {
					joined = append(joined, os[i])
				}
			}
			os = joined
		}
		x = ctx.Add(x, ctx.MulMat(lw.wo, os[0])) // x += Wo o (the residual)

		h = norm(x, lw.ffnNorm)                                     // h = rmsnorm(x)
		f := ctx.SwiGLU(ctx.MulMat(lw.w1, h), ctx.MulMat(lw.w3, h)) // f = silu(W1 h) * W3 h
		x = ctx.Add(x, ctx.MulMat(lw.w2, f))                        // x += W2 f (the residual)
	}
	if s.nl > 0 {
		if t.outRows != nil {
			x = ctx.GetRows(x, t.outRows)
		}
		t.logits = ctx.MulMat(b.output, norm(x, b.outNorm)) // logits = output rmsnorm(x)
		if b.lazy {                                         // the rows into the device's store, read from there when asked for
			t.rowIdx = in(gg.TypeI64, int64(s.nl))
			t.g.Expand(ctx.SetRows(b.rows.t, t.logits, t.rowIdx))
		} else {
			t.logits.SetOutput()
			t.g.Expand(t.logits)
		}
		if b.statsK > 0 {
			b.buildStats(ctx, t, s.nl)
		}
	}
	return t
}

// maxGroups bounds the attention groups of a step (and so its graph's
// size): beyond it, neighbouring groups attend together.
const maxGroups = 64

// graphSize is the node budget of a step's graph with groups groups.
func (b *Backend) graphSize(groups int) int {
	return b.m.Config.Layers*(64+24*groups) + 256
}

// reserveRows and reserveSlots size the graph memory reserved at the
// start: steps larger than that grow it once.
const (
	reserveRows  = 64
	reserveSlots = 2048
)

// reserve sizes the scheduler's memory for a step of reserveRows rows of
// one search attending over reserveSlots slots.
func (b *Backend) reserve() error {
	if b.lazy {
		if err := b.ensureRows(reserveRows); err != nil {
			return err
		}
	}
	bs := b.pool.BlockSize()
	nkv := min(b.slots, (reserveSlots+bs-1)/bs*bs)
	ctx := gg.NewContext(b.graphSize(1), b.graphSize(1))
	defer ctx.Free()
	s := shape{n: reserveRows, nl: reserveRows, maskLen: nkv * reserveRows,
		groups: []group{{r0: 0, r1: reserveRows, nkv: nkv, nl: reserveRows}}}
	g := b.build(ctx, s)
	err := b.sched.Reserve(g.g)
	b.sched.Reset()
	return err
}

// step holds a step's host-side inputs; its slices are reused.
type step struct {
	order, inv           []int // the step's order of the rows, and each row's place in it
	tokens, pos, outRows []int32
	groupOut             [][]int32
	kidx, vidx           []int64
	mask                 []float32
	csrc, cvsrc          []int32
	cdst, cvdst          []int64
	attn                 []float32 // scratch for reading attention back
	rowIdx               []int64   // the rows' places in the device's store
	copies               map[int64]int64
	parent               []int32 // union-find over block ids
	touched              []int32
	groupOf              []int32 // per row: its group's root block
	groups               []group
}

// find is the root of block id's set.
func (st *step) find(id int32) int32 {
	for st.parent[id] != id {
		st.parent[id] = st.parent[st.parent[id]]
		id = st.parent[id]
	}
	return id
}

// plan fills the step's inputs for rows at positions pos, and returns
// its shape.
func (b *Backend) plan(rows []model.Row, pos []int, attnLayers []int) shape {
	c, st, p := &b.m.Config, &b.st, b.pool
	bs, kvd := p.BlockSize(), c.KVDim()
	n := len(rows)
	s := shape{n: n, attn: attnLayers}

	// The groups: rows whose block tables share a block, transitively.
	if len(st.parent) < b.slots/bs {
		st.parent = make([]int32, b.slots/bs)
		for i := range st.parent {
			st.parent[i] = int32(i)
		}
	}
	for _, id := range st.touched {
		st.parent[id] = id
	}
	st.touched, st.groupOf = st.touched[:0], st.groupOf[:0]
	for i, row := range rows {
		first := st.find(int32(p.BlockID(row.Seq, 0)))
		st.touched = append(st.touched, first)
		for blk := 1; blk <= pos[i]/bs; blk++ {
			r := st.find(int32(p.BlockID(row.Seq, blk)))
			st.touched = append(st.touched, r)
			if r != first {
				st.parent[r] = first
			}
		}
	}
	for _, row := range rows {
		st.groupOf = append(st.groupOf, st.find(int32(p.BlockID(row.Seq, 0))))
	}
	// The step's order: the groups in the order of their first rows, each
	// group's rows in theirs.
	st.order = slices.Grow(st.order[:0], n)[:n]
	for i := range st.order {
		st.order[i] = i
	}
	firstRow := map[int32]int{}
	for i, gid := range st.groupOf {
		if _, ok := firstRow[gid]; !ok {
			firstRow[gid] = i
		}
	}
	slices.SortStableFunc(st.order, func(a, b int) int { return firstRow[st.groupOf[a]] - firstRow[st.groupOf[b]] })
	st.inv = slices.Grow(st.inv[:0], n)[:n]
	for k, i := range st.order {
		st.inv[i] = k
		s.reorder = s.reorder || k != i
	}
	st.groups = st.groups[:0]
	for k := 0; k < n; {
		gid, k1 := st.groupOf[st.order[k]], k+1
		for k1 < n && st.groupOf[st.order[k1]] == gid {
			k1++
		}
		st.groups = append(st.groups, group{r0: k, r1: k1})
		k = k1
	}
	if len(st.groups) > maxGroups { // neighbours merged
		per := (len(st.groups) + maxGroups - 1) / maxGroups
		merged := st.groups[:0]
		for i := 0; i < len(st.groups); i += per {
			last := st.groups[min(len(st.groups), i+per)-1]
			merged = append(merged, group{r0: st.groups[i].r0, r1: last.r1})
		}
		st.groups = merged
	}
	// Each group's slots: from its lowest block to its highest, padded
	// (on a GPU) to a multiple of pad slots, so that the graph's shapes
	// change every few steps only.
	pad := bs
	if b.padSlots > bs {
		pad = b.padSlots / bs * bs
	}
	for gi := range st.groups {
		g := &st.groups[gi]
		lo, hi := math.MaxInt, 0
		for k := g.r0; k < g.r1; k++ {
			i := st.order[k]
			for blk := range pos[i]/bs + 1 {
				id := p.BlockID(rows[i].Seq, blk)
				lo, hi = min(lo, id), max(hi, id)
			}
			if !rows[i].NoLogits {
				g.nl++
			}
		}
		g.lo = lo * bs / pad * pad
		end := min(b.slots, ((hi+1)*bs+pad-1)/pad*pad)
		g.nkv, g.maskOff = end-g.lo, s.maskLen
		s.maskLen += g.nkv * (g.r1 - g.r0)
	}
	s.groups = st.groups

	// The per-row inputs, in the step's order.
	st.tokens, st.pos, st.kidx = st.tokens[:0], st.pos[:0], st.kidx[:0]
	for _, i := range st.order {
		slot := p.BlockID(rows[i].Seq, pos[i]/bs)*bs + pos[i]%bs
		st.tokens = append(st.tokens, int32(rows[i].Token))
		st.pos = append(st.pos, int32(pos[i]))
		st.kidx = append(st.kidx, int64(slot))
	}
	st.outRows = st.outRows[:0]
	for i, row := range rows {
		if !row.NoLogits {
			st.outRows = append(st.outRows, int32(st.inv[i]))
		}
	}
	s.nl = len(st.outRows)
	st.vidx = slices.Grow(st.vidx[:0], n*kvd)[:n*kvd]
	for k, slot := range st.kidx {
		for d := range kvd {
			st.vidx[k*kvd+d] = int64(d*b.slots) + slot
		}
	}
	st.mask = slices.Grow(st.mask[:0], s.maskLen)[:s.maskLen]
	inf := float32(math.Inf(-1))
	st.groupOut = st.groupOut[:0]
	for _, g := range s.groups {
		var out []int32
		for k := g.r0; k < g.r1; k++ {
			i := st.order[k]
			m := st.mask[g.maskOff+(k-g.r0)*g.nkv:][:g.nkv]
			for j := range m {
				m[j] = inf
			}
			for blk := range pos[i]/bs + 1 {
				off := p.BlockID(rows[i].Seq, blk)*bs - g.lo
				clear(m[off : off+min(bs, pos[i]+1-blk*bs)])
			}
			if !rows[i].NoLogits {
				out = append(out, int32(k-g.r0))
			}
		}
		st.groupOut = append(st.groupOut, out)
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
	for gi, t := range g.groupOut {
		if t != nil {
			gg.Set(t, st.groupOut[gi], 0)
		}
	}
	if g.rowIdx != nil {
		gg.Set(g.rowIdx, b.rowIndex(g.rowIdx.Bytes()/8), 0)
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
	if b.lazy {
		if err := b.ensureRows(s.nl); err != nil {
			rollback()
			return nil, err
		}
	}
	g, err := b.graphFor(s)
	if err != nil {
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

	b.steps++
	out.Prepare(rows, c.Vocab, c.Heads, attnLayers)
	if g.logits != nil {
		if b.lazy {
			b.lazyLogits()
		} else {
			gg.Get(g.logits, out.LogitsBuffer(), 0)
		}
		if g.stats != nil {
			b.readStats(g, s.nl)
		}
	}
	for i := range attnLayers {
		b.readAttention(rows, s, g.scores[i], g.probs[i], i)
	}
	return out, nil
}

// lastGraph is the last step's graph, kept built and allocated: a step
// of the same shape runs it again with new inputs.
type lastGraph struct {
	ctx    gg.Context
	g      *graph
	s      shape
	statsK int
	rows   *gg.Tensor // the store of logits rows it writes (lazy rows)
}

// same reports whether shapes s and o make the same graph.
func (s shape) same(o shape) bool {
	return s.n == o.n && s.nl == o.nl && s.reorder == o.reorder && s.maskLen == o.maskLen && s.ncp == o.ncp &&
		slices.Equal(s.groups, o.groups) && slices.Equal(s.attn, o.attn)
}

// graphFor returns the graph of a step of shape s: the last step's when
// it had the same shape (no building, no allocation: a decoding step
// often repeats the last one's shape, and on a GPU the attention spans
// are padded so that it does), else a new one, built and allocated.
func (b *Backend) graphFor(s shape) (*graph, error) {
	if l := &b.last; l.g != nil && l.statsK == b.statsK && l.rows == b.rows.t && l.s.same(s) {
		b.reused++
		return l.g, nil
	}
	b.dropGraph()
	ctx := gg.NewContext(b.graphSize(len(s.groups)), b.graphSize(len(s.groups)))
	g := b.build(ctx, s)
	b.sched.Reset()
	if err := b.sched.Alloc(g.g); err != nil {
		ctx.Free()
		return nil, err
	}
	s.groups, s.attn = slices.Clone(s.groups), slices.Clone(s.attn)
	b.last = lastGraph{ctx: ctx, g: g, s: s, statsK: b.statsK, rows: b.rows.t}
	b.built++
	return g, nil
}

// dropGraph frees the last step's graph.
func (b *Backend) dropGraph() {
	if b.last.ctx != 0 {
		b.last.ctx.Free()
	}
	b.last = lastGraph{}
}

// Graphs reports how many steps built their graph and how many ran the
// last step's again.
func (b *Backend) Graphs() (built, reused int) { return b.built, b.reused }

// readAttention copies the i-th asked layer's scores and probabilities
// (per group, [nkv*Heads] per row with logits, the slots in block-id
// order) into the Output, each row's in position order.
func (b *Backend) readAttention(rows []model.Row, s shape, scores, probs []*gg.Tensor, i int) {
	out, st, p := &b.out, &b.st, b.pool
	heads, bs := b.m.Config.Heads, p.BlockSize()
	buf := out.AttentionBuffer()
	for gi, g := range s.groups {
		if g.nl == 0 {
			continue
		}
		per := g.nkv * heads
		for kind, src := range []*gg.Tensor{scores[gi], probs[gi]} {
			st.attn = slices.Grow(st.attn[:0], g.nl*per)[:g.nl*per]
			gg.Get(src, st.attn, 0)
			j := 0 // the row's index among the group's rows with logits
			for k := g.r0; k < g.r1; k++ {
				r := st.order[k]
				if rows[r].NoLogits {
					continue
				}
				np := out.Pos[r] + 1
				off := out.AttentionOffset(r, i) + kind*heads*np
				dst := buf[off : off+heads*np]
				from := st.attn[j*per : (j+1)*per]
				for blk := range (np + bs - 1) / bs {
					col := p.BlockID(rows[r].Seq, blk)*bs - g.lo
					cnt := min(bs, np-blk*bs)
					for h := range heads {
						copy(dst[h*np+blk*bs:h*np+blk*bs+cnt], from[h*g.nkv+col:h*g.nkv+col+cnt])
					}
				}
				j++
			}
		}
	}
}

var _ model.Backend = (*Backend)(nil)
