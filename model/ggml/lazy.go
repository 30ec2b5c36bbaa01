package ggml

import (
	"fmt"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// Lazy rows: on a GPU the logits rows stay on the device, and a row
// crosses to the host only when the search reads it (model.Output's
// FetchLogits): a step hands over its rows' statistics, a few hundred
// bytes a row, where a row is Vocab floats (512 KB for a 128k
// vocabulary). Each step's graph writes its rows with ggml_set_rows into
// one of the two halves of a persistent tensor, the halves alternating
// from step to step, so that the last step's rows stay there while this
// step's are written, as the Output's contract asks. On ggml's CPU device
// the rows are host memory anyway, and are copied out at once.

// logitRows is the device's store of the last two steps' logits rows.
type logitRows struct {
	ctx  gg.Context
	buf  gg.Buffer
	t    *gg.Tensor // F32 [Vocab, 2*cap]: rows [0, cap) one half, [cap, 2cap) the other
	cap  int        // rows per half
	half int        // the half the next step writes
}

// retired is a store replaced by a larger one, freed once no Output can
// fetch from it.
type retired struct {
	s     logitRows
	until int // the step count at which it may go
}

// ensureRows makes room for a step of nl rows with logits in the half it
// writes. A larger store keeps the last step's rows readable: the old one
// is freed two steps later.
func (b *Backend) ensureRows(nl int) error {
	keep := b.retired[:0]
	for _, r := range b.retired {
		if b.steps >= r.until {
			r.s.free()
			b.freed()
		} else {
			keep = append(keep, r)
		}
	}
	b.retired = keep
	if nl <= b.rows.cap {
		return nil
	}
	c := max(64, nl, 2*b.rows.cap)
	ctx := gg.NewContext(1, 0)
	t := ctx.NewTensor(gg.TypeF32, int64(b.m.Config.Vocab), int64(2*c)).SetName("logits_rows")
	if err := b.fits(t); err != nil && c > nl { // no room to spare: the step's rows
		ctx.Free()
		c, ctx = nl, gg.NewContext(1, 0)
		t = ctx.NewTensor(gg.TypeF32, int64(b.m.Config.Vocab), int64(2*c)).SetName("logits_rows")
	}
	if err := b.fits(t); err != nil {
		ctx.Free()
		return fmt.Errorf("%w (the logits of a step's %d rows, twice: fewer rows with logits a step)", err, nl)
	}
	buf, err := ctx.AllocTensors(b.dev)
	if err != nil {
		ctx.Free()
		return fmt.Errorf("%w (logits rows for %d rows a step)", err, c)
	}
	if b.rows.t != nil {
		b.retired = append(b.retired, retired{b.rows, b.steps + 2})
	}
	b.rows = logitRows{ctx: ctx, buf: buf, t: t, cap: c, half: b.rows.half}
	return nil
}

func (r *logitRows) free() {
	if r.buf != 0 {
		r.buf.Free()
	}
	if r.ctx != 0 {
		r.ctx.Free()
	}
	*r = logitRows{}
}

// rowIndex fills the graph's destination rows in the store: nl rows of
// its half from the step's row b.st.rowOff (a chunk of a step writes after
// the chunks before it), padded rows (plan.go's padRows) where the last
// row goes.
func (b *Backend) rowIndex(nl int) []int64 {
	idx := b.st.rowIdx[:0]
	for j := range nl {
		idx = append(idx, int64(b.rows.half*b.rows.cap+b.st.rowOff+min(j, b.st.nl-1))) // a padded row: the last's place
	}
	b.st.rowIdx = idx
	return idx
}

// lazyLogits hands the step's rows to the Output as fetched on first use
// from the half the step wrote, and turns the halves.
func (b *Backend) lazyLogits() {
	t, vocab, first := b.rows.t, b.m.Config.Vocab, b.rows.half*b.rows.cap
	b.out.FetchLogits(func(i int, dst []float32) {
		b.fetchMu.Lock()
		defer b.fetchMu.Unlock()
		if b.closed {
			clear(dst[:vocab]) // nothing left to read: the backend is closed
			return
		}
		gg.Get(t, dst[:vocab], (first+i)*vocab*4)
	})
	b.rows.half ^= 1
}
