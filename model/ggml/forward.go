package ggml

import (
	"fmt"
	"slices"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

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
	// No row is fetched while the step runs: a device's queue is not
	// safe for a read from another goroutine during a graph's compute
	// (seen as heap corruption on Vulkan), and the step may free a
	// retired row store.
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
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
	return s.n == o.n && s.nl == o.nl && s.reorder == o.reorder && s.maskLen == o.maskLen && s.ncp == o.ncp && s.ngather == o.ngather &&
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
					col := int(st.col[p.BlockID(rows[r].Seq, blk)])
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
