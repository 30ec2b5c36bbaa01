package ggml

import (
	"math"
	"slices"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// group is rows [r0, r1) of a step, in the step's order: the rows whose
// sequences share blocks, directly or through others (the branches of
// one search), which attend together over every block any of them
// reads, each read once for all of them. Rows of different searches
// attend apart: attending over the union of all searches' blocks would
// cost rows x slots scores of which only one search's are kept; so do
// the sequences of a set of rows that share little (plan.go's rowSet). A
// group
// attends over nkv slots: its span, slots [lo, lo+nkv) of the pool, when
// its blocks lie close together, else its blocks gathered, the step's
// gathered slots [goff, goff+nkv) (its blocks in increasing id order,
// padded).
type group struct {
	r0, r1  int
	lo, nkv int
	gather  bool
	goff    int
	maskOff int // where its mask, [nkv, r1-r0], starts in the step's
	nl      int // its rows with logits
}

// shape is what a step's graph depends on: its rows, those with logits,
// the groups, the slots copied on write, and the layers whose attention
// goes out.
type shape struct {
	n, nl   int
	gn, gnl int // the graph's rows and rows with logits: n and nl, or more when padded (plan.go's padRows)
	groups  []group
	reorder bool // the step's order is not the rows' (outputs gathered back)
	maskLen int
	ncp     int
	ngather int // blocks gathered
	attn    []int
	// A batch (plan.go's planBatch): batchG groups of batchR rows over
	// batchS slots each, attending in one product; 0 when the groups
	// attend one by one.
	batchG, batchR, batchS int
}

// graph is a step's graph and its tensors: the inputs to set, the
// outputs to read.
type graph struct {
	g     gg.Graph
	nodes int

	tokens, pos *gg.Tensor   // I32 [n]: each row's token and position
	kidx        *gg.Tensor   // I64 [n]: the slot each row's key (and, under flash attention, value) goes to
	vidx        *gg.Tensor   // I64 [n*KVDim]: the element of the transposed values each row's value element goes to (not under flash attention)
	mask        *gg.Tensor   // F32 (F16 under flash attention) [maskLen]: per group [nkv, rows], 0 where a row sees a slot, -Inf elsewhere
	outRows     *gg.Tensor   // I32 [nl]: the rows with logits, in the rows' order, when not simply all
	groupOut    []*gg.Tensor // per group, I32 [nl]: its rows with logits, when attention goes out and not all have
	csrc, cdst  *gg.Tensor   // [ncp]: the slots copied on write, and where to
	cvsrc       *gg.Tensor   // [ncp*KVDim]: the same in the transposed values (not under flash attention)
	cvdst       *gg.Tensor
	gk          *gg.Tensor // I32 [ngather]: the blocks gathered
	gv          *gg.Tensor // I32 [ngather, KVDim]: the same for each dimension of the transposed values (not under flash attention)
	qidx        *gg.Tensor // a batch's I32 [batchG*batchR]: each padded row's step row
	oidx        *gg.Tensor // a batch's I32 [n]: each step row's padded row
	attnRows    *gg.Tensor // a batch's I32 [nl]: the padded rows with logits, when attention goes out

	logits        *gg.Tensor     // F32 [Vocab, nl]
	rowIdx        *gg.Tensor     // I64 [nl]: where the rows go in the device's store (lazy rows)
	stats         *statsGraph    // the logits rows' statistics, when asked for
	scores, probs [][]*gg.Tensor // per layer asked and group: F32 [nkv*Heads, nl]
	sums          [][]*gg.Tensor // instead, under sumAttn: per layer asked and group, F32 [2*Heads+1, nl] (attentionSums)

	in32 packed[int32] // the I32 index inputs above, packed
	in64 packed[int64] // and the I64 ones
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
	n := int64(s.gn)
	t := &graph{g: ctx.NewGraph(b.graphSize(len(s.groups)))}
	flash := b.flash
	// The inputs: the mask, and the indices packed into one I32 and one
	// I64 tensor (packed), each index input a view of them; the step's
	// data comes from b.st (plan.go).
	st := &b.st
	if flash {
		t.mask = ctx.NewTensor(gg.TypeF16, int64(s.maskLen))
	} else {
		t.mask = ctx.NewTensor(gg.TypeF32, int64(s.maskLen))
	}
	t.mask.SetInput()
	p32, p64 := &t.in32, &t.in64
	none := -1
	iTok, iPos := p32.add(s.gn, func() []int32 { return st.tokens }), p32.add(s.gn, func() []int32 { return st.pos })
	iKidx, iVidx := p64.add(s.gn, func() []int64 { return st.kidx }), none
	if !flash {
		iVidx = p64.add(s.gn*int(kvd), func() []int64 { return st.vidx })
	}
	iOut := none
	if s.gnl > 0 && (s.gnl < s.gn || s.reorder) {
		iOut = p32.add(s.gnl, func() []int32 { return st.outRows })
	}
	iCsrc, iCdst, iCvsrc, iCvdst := none, none, none, none
	if s.ncp > 0 {
		iCsrc, iCdst = p32.add(s.ncp, func() []int32 { return st.csrc }), p64.add(s.ncp, func() []int64 { return st.cdst })
		if !flash {
			iCvsrc, iCvdst = p32.add(s.ncp*int(kvd), func() []int32 { return st.cvsrc }), p64.add(s.ncp*int(kvd), func() []int64 { return st.cvdst })
		}
	}
	iGk, iGv := none, none
	if s.ngather > 0 {
		iGk = p32.add(s.ngather, func() []int32 { return st.gather })
		if !flash {
			iGv = p32.add(s.ngather*int(kvd), func() []int32 { return st.gatherIdx })
		}
	}
	iQidx, iOidx, iAttnRows := none, none, none
	var iGroupOut []int
	if s.batchG > 0 {
		iQidx, iOidx = p32.add(s.batchG*s.batchR, func() []int32 { return st.qidx }), p32.add(s.gn, func() []int32 { return st.oidx })
		if len(s.attn) > 0 && s.gnl > 0 {
			iAttnRows = p32.add(s.gnl, func() []int32 { return st.attnRows })
		}
	} else if len(s.attn) > 0 {
		iGroupOut = make([]int, len(s.groups))
		for gi, g := range s.groups {
			iGroupOut[gi] = none
			if g.nl > 0 && g.nl < g.r1-g.r0 {
				iGroupOut[gi] = p32.add(g.nl, func() []int32 { return st.groupOut[gi] })
			}
		}
	}
	iRowIdx := none
	if s.gnl > 0 && b.lazy {
		iRowIdx = p64.add(s.gnl, func() []int64 { return b.rowIndex(s.gnl) })
	}
	p32.make(ctx, gg.TypeI32)
	p64.make(ctx, gg.TypeI64)
	v32 := func(i int, ne ...int) *gg.Tensor {
		if i == none {
			return nil
		}
		return p32.view(ctx, i, ne...)
	}
	v64 := func(i int) *gg.Tensor {
		if i == none {
			return nil
		}
		return p64.view(ctx, i)
	}
	t.tokens, t.pos, t.kidx, t.vidx = v32(iTok), v32(iPos), v64(iKidx), v64(iVidx)
	t.outRows, t.csrc, t.cdst, t.cvsrc, t.cvdst = v32(iOut), v32(iCsrc), v64(iCdst), v32(iCvsrc), v64(iCvdst)
	t.gk, t.gv = v32(iGk), v32(iGv, s.ngather, int(kvd))
	t.qidx, t.oidx, t.attnRows, t.rowIdx = v32(iQidx), v32(iOidx), v32(iAttnRows), v64(iRowIdx)
	if iGroupOut != nil {
		t.groupOut = make([]*gg.Tensor, len(s.groups))
		for gi, i := range iGroupOut {
			t.groupOut[gi] = v32(i)
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
	// groupOut is group gi's tensor [x, rows] at its rows with logits, an
	// output of the graph.
	groupOut := func(a *gg.Tensor, gi int) *gg.Tensor {
		if t.groupOut[gi] != nil {
			a = ctx.GetRows(a, t.groupOut[gi])
		}
		a.SetOutput()
		t.g.Expand(a)
		return a
	}
	// rowsOut is a group's attention tensor [nkv, rows, heads] as its
	// rows with logits' [nkv*heads] rows, head-major.
	rowsOut := func(a *gg.Tensor, gi int) *gg.Tensor {
		g := s.groups[gi]
		return groupOut(ctx.Reshape(ctx.Cont(ctx.Permute(a, 0, 2, 1, 3)), int64(g.nkv)*heads, int64(g.r1-g.r0)), gi)
	}
	bs := b.pool.BlockSize()
	kRow := gg.RowSize(b.kvT, int(kvd)) // bytes of a slot's keys
	es := gg.RowSize(b.kvT, 1)          // bytes of an element
	scale := float32(1 / math.Sqrt(float64(hd)))
	t.scores, t.probs, t.sums = make([][]*gg.Tensor, len(s.attn)), make([][]*gg.Tensor, len(s.attn)), make([][]*gg.Tensor, len(s.attn))
	// seen is 1 where a row sees a slot, else 0 (the mask's exp), for the
	// attention's sums.
	var seen *gg.Tensor
	if b.sumAttn && len(s.attn) > 0 && s.gnl > 0 {
		m := t.mask
		if flash {
			m = ctx.Cpy(m, ctx.NewTensor(gg.TypeF32, int64(s.maskLen)))
		}
		seen = ctx.Exp(m)
	}

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
		// values into their slots; attention reads after both. Values are
		// kept transposed ([slots, KVDim]: each dimension's values a row,
		// the attention's second product reads them in place), or under
		// flash attention as the keys are.
		kPool, vPool := b.k[l], b.v[l]
		if !flash {
			vPool = ctx.Reshape(vPool, 1, int64(b.slots)*kvd)
		}
		if s.ncp > 0 {
			kPool = ctx.SetRows(kPool, ctx.GetRows(kPool, t.csrc), t.cdst)
			if flash {
				vPool = ctx.SetRows(vPool, ctx.GetRows(vPool, t.csrc), t.cdst)
			} else {
				vPool = ctx.SetRows(vPool, ctx.GetRows(vPool, t.cvsrc), t.cvdst)
			}
		}
		// The keys as a view, not a reshape: ggml-vulkan then fuses RoPE,
		// view and set_rows into one kernel (as llama.cpp's graphs have it).
		kPool = ctx.SetRows(kPool, ctx.View2D(k, int(kvd), int(n), int(kvd)*4, 0), t.kidx)
		if flash {
			vPool = ctx.SetRows(vPool, ctx.Reshape(v, kvd, n), t.kidx)
		} else {
			vPool = ctx.SetRows(vPool, ctx.Reshape(v, 1, kvd*n), t.vidx)
		}
		t.g.Expand(kPool)
		t.g.Expand(vPool)
		// The gathering groups' blocks, all at once: keys [KVDim*bs,
		// ngather] (each block's keys a row), values [bs, ngather, KVDim]
		// (each dimension's block of values a row), or as the keys.
		var kg, vg *gg.Tensor
		gs := s.ngather * bs // slots gathered
		if s.ngather > 0 {
			kg = ctx.GetRows(ctx.Reshape(kPool, kvd*int64(bs), int64(b.slots/bs)), t.gk)
			if flash {
				vg = ctx.GetRows(ctx.Reshape(vPool, kvd*int64(bs), int64(b.slots/bs)), t.gk)
			} else {
				vg = ctx.GetRows(ctx.Reshape(vPool, int64(bs), int64(b.slots/bs), kvd), t.gv)
			}
		}

		// Attention, group by group: every row and head over the group's
		// slots, the mask keeping each row's own positions; kv head j
		// serves query heads j*heads/kvHeads...
		ai := slices.Index(s.attn, l)
		var o *gg.Tensor // the attention's output, [QDim, n]
		if s.batchG > 0 {
			o = b.attendBatch(ctx, t, s, q, kg, vg, seen, ai, scale)
		} else {
			os := make([]*gg.Tensor, 0, len(s.groups))
			for gi, g := range s.groups {
				rows := g.r1 - g.r0
				qg := q
				if rows < s.n {
					qg = ctx.View3D(q, int(hd), int(heads), rows, int(hd)*4, int(hd*heads)*4, g.r0*int(hd*heads)*4)
				}
				// keys [hd, nkv, kvHeads]; values [nkv, hd, kvHeads], or
				// under flash attention as the keys
				var keys, vals *gg.Tensor
				switch {
				case g.gather:
					keys = ctx.View3D(kg, int(hd), g.nkv, int(kvHeads), int(kvd)*4, int(hd)*4, g.goff*int(kvd)*4)
					if flash {
						vals = ctx.View3D(vg, int(hd), g.nkv, int(kvHeads), int(kvd)*4, int(hd)*4, g.goff*int(kvd)*4)
					} else {
						vals = ctx.View3D(vg, g.nkv, int(hd), int(kvHeads), gs*4, int(hd)*gs*4, g.goff*4)
					}
				default:
					keys = ctx.View3D(kPool, int(hd), g.nkv, int(kvHeads), kRow, int(hd)*es, g.lo*kRow)
					if flash {
						vals = ctx.View3D(vPool, int(hd), g.nkv, int(kvHeads), kRow, int(hd)*es, g.lo*kRow)
					} else {
						vals = ctx.View3D(vPool, g.nkv, int(hd), int(kvHeads), b.slots*es, int(hd)*b.slots*es, g.lo*es)
					}
				}
				mes := 4 // the mask's element size
				if flash {
					mes = 2
				}
				mask := ctx.View2D(t.mask, g.nkv, rows, g.nkv*mes, g.maskOff*mes)
				qp := ctx.Permute(qg, 0, 2, 1, 3) // [hd, rows, heads]
				var p *gg.Tensor
				if ai >= 0 { // the layer's attention goes out: its scores and probabilities, or their sums
					sc := ctx.Scale(gg.AccF32(ctx.MulMat(keys, qp)), scale) // score = q·k / sqrt(head dim), [nkv, rows, heads]
					p = ctx.SoftMax(sc, mask, 1)
					switch {
					case g.nl == 0:
						t.scores[ai], t.probs[ai], t.sums[ai] = append(t.scores[ai], nil), append(t.probs[ai], nil), append(t.sums[ai], nil)
					case seen != nil:
						t.sums[ai] = append(t.sums[ai], groupOut(b.attentionSums(ctx, sc, p, ctx.View2D(seen, g.nkv, rows, g.nkv*4, g.maskOff*4)), gi))
					default:
						t.scores[ai] = append(t.scores[ai], rowsOut(sc, gi))
						t.probs[ai] = append(t.probs[ai], rowsOut(p, gi))
					}
				}
				if flash { // [hd, heads, rows]
					os = append(os, ctx.Reshape(gg.AccF32(ctx.FlashAttn(qp, keys, vals, mask, scale)), heads*hd, int64(rows)))
					continue
				}
				if p == nil {
					p = ctx.SoftMax(gg.AccF32(ctx.MulMat(keys, qp)), mask, scale) // softmax over the row's positions
				}
				og := ctx.MulMat(vals, p)                                                                  // the probabilities' weighted sum of values, [hd, rows, heads]
				os = append(os, ctx.Reshape(ctx.Cont(ctx.Permute(og, 0, 2, 1, 3)), heads*hd, int64(rows))) // [QDim, rows]
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
			o = os[0]
		}
		x = ctx.Add(x, ctx.MulMat(lw.wo, o)) // x += Wo o (the residual)

		h = norm(x, lw.ffnNorm)                                     // h = rmsnorm(x)
		f := ctx.SwiGLU(ctx.MulMat(lw.w1, h), ctx.MulMat(lw.w3, h)) // f = silu(W1 h) * W3 h
		x = ctx.Add(x, ctx.MulMat(lw.w2, f))                        // x += W2 f (the residual)
	}
	if s.gnl > 0 {
		if t.outRows != nil {
			x = ctx.GetRows(x, t.outRows)
		}
		t.logits = ctx.MulMat(b.output, norm(x, b.outNorm)) // logits = output rmsnorm(x)
		if b.lazy {                                         // the rows into the device's store, read from there when asked for
			t.g.Expand(ctx.SetRows(b.rows.t, t.logits, t.rowIdx))
		} else {
			t.logits.SetOutput()
			t.g.Expand(t.logits)
		}
		if b.statsK > 0 {
			b.buildStats(ctx, t, s.gnl)
		}
	}
	return t
}

// attendBatch is a batch's attention (shape s) for queries q [hd, heads,
// n], keys kg and values vg gathered: the rows gathered into batchG
// groups of batchR, one product of each group's rows with its keys
// [hd, batchS, kvHeads] (the query heads broadcast over the key heads),
// the softmax under the mask [batchS, batchR, 1, batchG], one product
// with the values, and each step row's output gathered back: [QDim, n].
// When layer ai's attention goes out it sets t.scores[ai] and
// t.probs[ai] to one tensor each, [batchS*Heads, nl], or with seen (the
// mask's exp) t.sums[ai] to [2*Heads+1, nl].
func (b *Backend) attendBatch(ctx gg.Context, t *graph, s shape, q, kg, vg, seen *gg.Tensor, ai int, scale float32) *gg.Tensor {
	c := &b.m.Config
	hd, heads, kvHeads := int64(c.HeadDim), int64(c.Heads), int64(c.KVHeads)
	G, R, S := int64(s.batchG), int64(s.batchR), int64(s.batchS)
	qb := ctx.GetRows(ctx.Reshape(q, hd*heads, int64(s.gn)), t.qidx)    // [hd*heads, G*R]
	qb = ctx.Permute(ctx.Reshape(qb, hd, heads, R, G), 0, 2, 1, 3)      // [hd, R, heads, G]
	keys := ctx.Permute(ctx.Reshape(kg, hd, kvHeads, S, G), 0, 2, 1, 3) // [hd, S, kvHeads, G]
	mask := ctx.Reshape(t.mask, S, R, 1, G)
	var p *gg.Tensor
	if ai >= 0 {
		sc := ctx.Scale(gg.AccF32(ctx.MulMat(keys, qb)), scale) // [S, R, heads, G]
		p = ctx.SoftMax(sc, mask, 1)
		// out is a tensor [x, R*G] at the rows with logits, an output.
		out := func(a *gg.Tensor) []*gg.Tensor {
			a = ctx.GetRows(a, t.attnRows)
			a.SetOutput()
			t.g.Expand(a)
			return []*gg.Tensor{a}
		}
		rows := func(a *gg.Tensor) *gg.Tensor { return ctx.Reshape(ctx.Cont(ctx.Permute(a, 0, 2, 1, 3)), S*heads, R*G) }
		switch {
		case s.gnl == 0:
		case seen != nil:
			t.sums[ai] = out(b.attentionSums(ctx, sc, p, ctx.Reshape(seen, S, R, 1, G)))
		default:
			t.scores[ai], t.probs[ai] = out(rows(sc)), out(rows(p))
		}
	}
	var o *gg.Tensor // [QDim, G*R]
	if b.flash {
		vals := ctx.Permute(ctx.Reshape(vg, hd, kvHeads, S, G), 0, 2, 1, 3) // [hd, S, kvHeads, G], as the keys
		o = ctx.Reshape(gg.AccF32(ctx.FlashAttn(qb, keys, vals, mask, scale)), heads*hd, R*G)
	} else {
		if p == nil {
			p = ctx.SoftMax(gg.AccF32(ctx.MulMat(keys, qb)), mask, scale)
		}
		vals := ctx.Permute(ctx.Reshape(vg, S, G, hd, kvHeads), 0, 3, 1, 2) // [S, hd, kvHeads, G]
		o = ctx.MulMat(vals, p)                                             // [hd, R, heads, G]
		o = ctx.Reshape(ctx.Cont(ctx.Permute(o, 0, 2, 1, 3)), heads*hd, R*G)
	}
	return ctx.GetRows(o, t.oidx) // [QDim, n]
}

// attentionSums sums a layer's attention where it was computed, for its
// scores sc and probabilities p [S, R, Heads, G] (S slots, R rows, G
// groups) and seen [S, R, 1, G], 1 where a row sees a slot and 0 where
// the mask hides it: per row (R*G of them) each head's Σ P log P and
// Σ |score| over the slots the row sees, interleaved, then Σ over slots
// and heads of |P - the heads' mean P|, [2*Heads+1, R*G]
// (model.AttentionSums; readAttnSums turns the first sum's sign).
func (b *Backend) attentionSums(ctx gg.Context, sc, p, seen *gg.Tensor) *gg.Tensor {
	S, R, H, G := sc.Ne[0], sc.Ne[1], sc.Ne[2], sc.Ne[3]
	plogp := ctx.SumRows(ctx.Mul(p, ctx.Log(ctx.Clamp(p, 1e-30, 1)))) // [1, R, H, G]; a slot of P = 0 adds 0
	abs := ctx.SumRows(ctx.Mul(ctx.Abs(sc), seen))                    // [1, R, H, G]
	perHead := ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Concat(plogp, abs, 0), 0, 2, 1, 3)), 2*H, R*G)
	pt := ctx.Cont(ctx.Permute(p, 1, 2, 0, 3))       // [H, S, R, G]
	mean := ctx.Scale(ctx.SumRows(pt), 1/float32(H)) // the heads' mean P, [1, S, R, G]
	dis := ctx.SumRows(ctx.Reshape(ctx.SumRows(ctx.Abs(ctx.Sub(pt, mean))), S, R*G))
	return ctx.Concat(perHead, dis, 0)
}

// maxGroups bounds the attention groups of a step (and so its graph's
// size): beyond it, neighbouring groups attend together.
const maxGroups = 64

// graphSize is the node budget of a step's graph with groups groups.
func (b *Backend) graphSize(groups int) int {
	return b.m.Config.Layers*(64+24*groups) + 32*groups + 256 // + the attention's sums
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
	s := shape{n: reserveRows, nl: reserveRows, gn: reserveRows, gnl: reserveRows, maskLen: nkv * reserveRows,
		groups: []group{{r0: 0, r1: reserveRows, nkv: nkv, nl: reserveRows}}}
	g := b.build(ctx, s)
	b.placeInputs(g)
	err := b.sched.Reserve(g.g)
	b.sched.Reset()
	return err
}
