package ggml

import (
	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// packed is one of a step graph's index inputs, holding several: the
// tokens, positions, rows with logits, gathered blocks, copies on write
// and so on are each a view of it, so that the step's inputs reach the
// device in one transfer per element type (on a GPU each transfer is a
// submission the host waits for, and ggml's scheduler makes one per
// input tensor).
type packed[E int32 | int64] struct {
	t      *gg.Tensor
	pieces []piece[E]
	n      int // elements, with each piece aligned
	host   []E // the pieces, assembled for the transfer
}

// piece is a view's place in a packed input and where its data comes
// from each step.
type piece[E int32 | int64] struct {
	off, n int
	src    func() []E
}

// packAlign is the elements a piece starts at a multiple of (256 bytes
// for I32: a device's storage buffers want aligned views).
const packAlign = 64

// add reserves a piece of n elements whose data src gives each step,
// and returns its index.
func (p *packed[E]) add(n int, src func() []E) int {
	off := (p.n + packAlign - 1) / packAlign * packAlign
	p.pieces = append(p.pieces, piece[E]{off: off, n: n, src: src})
	p.n = off + n
	return len(p.pieces) - 1
}

// make makes the packed input tensor (none when no piece was added).
func (p *packed[E]) make(ctx gg.Context, typ gg.Type) {
	if p.n == 0 {
		return
	}
	p.t = ctx.NewTensor(typ, int64(p.n))
	p.t.SetInput()
	p.host = make([]E, p.n)
}

// view is piece i as a tensor of shape ne (its elements, by default).
func (p *packed[E]) view(ctx gg.Context, i int, ne ...int) *gg.Tensor {
	pc := p.pieces[i]
	es := int(p.t.Bytes()) / p.n
	if len(ne) == 2 {
		return ctx.View2D(p.t, ne[0], ne[1], ne[0]*es, pc.off*es)
	}
	return ctx.View1D(p.t, pc.n, pc.off*es)
}

// send assembles the pieces' data and copies it to the input.
func (p *packed[E]) send() {
	if p.t == nil {
		return
	}
	for _, pc := range p.pieces {
		d := p.host[pc.off : pc.off+pc.n]
		clear(d[copy(d, pc.src()):])
	}
	gg.Set(p.t, p.host, 0)
}
