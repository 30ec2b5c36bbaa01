package ggml

import (
	"fmt"
	"slices"
	"time"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// Forward runs one step: every row's token goes through the whole network
// and is appended to its sequence's cache, in one graph on the device (a
// step of more rows than Options.Chunk, a long prompt's prefill, in
// several, one chunk of rows after another); attnLayers names the layers
// whose attention (scores and probabilities) Output should hold.
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
	// The copies the appends decided go with this step's (first) graph,
	// or the next step's when it does not run.
	b.pending = b.pool.TakeCopies(b.pending)
	if err != nil {
		return nil, err
	}
	if b.lazy {
		nl := 0
		for _, r := range rows {
			if !r.NoLogits {
				nl++
			}
		}
		if err := b.ensureRows(nl); err != nil {
			b.rollback(rows)
			return nil, err
		}
	}
	// The chunks, each one graph: the Output is prepared only once the
	// step cannot fail (the last step's rows stay readable until then),
	// so that a step of several keeps its first chunks' outputs aside.
	var g *graph
	var s shape
	ck := &b.chunks
	ck.reset()
	chunk := len(rows)
	if b.chunk > 0 && len(rows) > b.chunk {
		chunk = b.chunk
	}
	for r0 := 0; r0 < len(rows); r0 += chunk {
		r1 := min(len(rows), r0+chunk)
		if g, s, err = b.run(rows[r0:r1], out.Pos[r0:r1], attnLayers, ck.nl); err != nil {
			b.rollback(rows)
			return nil, err
		}
		if r1 < len(rows) {
			b.keep(g, s, rows[r0:r1], out.Pos[r0:r1], attnLayers)
		}
	}
	b.steps++
	if b.sumAttn { // the attention's sums, not its rows (below)
		out.Prepare(rows, c.Vocab, c.Heads, nil)
	} else {
		out.Prepare(rows, c.Vocab, c.Heads, attnLayers)
	}
	last := (len(rows) - 1) / chunk * chunk // the last chunk's first row
	if g.logits != nil || ck.nl > 0 {
		if b.lazy {
			b.lazyLogits()
		} else {
			buf := out.LogitsBuffer()
			n := copy(buf, ck.logits)
			if g.logits != nil {
				gg.Get(g.logits, buf[n:], 0)
			}
		}
		if b.statsK > 0 {
			if g.stats != nil {
				b.readStats(g, s.nl, ck.nl)
			}
			b.fillStats(ck.nl + s.nl)
		}
	}
	if b.sumAttn && len(attnLayers) > 0 { // the attention's sums
		buf := out.AttentionSumsBuffer(len(attnLayers))
		n := copy(buf, ck.sums) // the first chunks', kept aside
		b.readAttnSums(rows[last:], s, g, buf[n:])
		return out, nil
	}
	if ck.nl > 0 && len(attnLayers) > 0 { // the first chunks' attention, kept aside
		buf, heads := out.AttentionBuffer(), c.Heads
		j := 0
		for r, row := range rows[:last] {
			if row.NoLogits {
				continue
			}
			for i := range attnLayers {
				n := 2 * heads * (out.Pos[r] + 1)
				copy(buf[out.AttentionOffset(r, i):][:n], ck.attn[ck.attnOff[j]:][:n])
				j++
			}
		}
	}
	for i := range attnLayers {
		b.readAttention(rows[last:], out.Pos[last:], s, g.scores[i], g.probs[i], i, func(r int) []float32 {
			return out.AttentionBuffer()[out.AttentionOffset(last+r, i):]
		})
	}
	return out, nil
}

// rollback truncates the step's sequences back to where they were.
func (b *Backend) rollback(rows []model.Row) {
	for i := len(rows) - 1; i >= 0; i-- {
		_ = b.pool.Truncate(rows[i].Seq, b.out.Pos[i])
	}
}

// run runs one graph: rows at positions pos (a step's, or a chunk of
// them), their logits rows going to the device's store (lazy rows) from
// its row off of the step's.
func (b *Backend) run(rows []model.Row, pos []int, attnLayers []int, off int) (*graph, shape, error) {
	s := b.plan(rows, pos, attnLayers)
	g, err := b.graphFor(s)
	if err != nil {
		return nil, s, err
	}
	b.st.rowOff = off
	b.graphs.Nodes += int64(g.nodes)
	b.setInputs(g)
	b.ran = true
	if err := b.sched.Compute(g.g); err != nil {
		b.broken = fmt.Errorf("ggml: a step failed on %s, and the device's cache is undefined since: %w", b.DeviceName(), err)
		return nil, s, b.broken
	}
	b.pending = b.pending[:0] // performed
	return g, s, nil
}

// chunkOut holds the outputs of a step's chunks but the last until the
// step is done.
type chunkOut struct {
	nl      int       // their rows with logits
	logits  []float32 // those rows (rows read at once)
	attn    []float32 // per row with logits and layer asked, its scores and probabilities
	attnOff []int     // where each starts in attn
	first   []int     // per row of the chunk keep reads, its first in attnOff
	sums    []float32 // or, under sumAttn, per row with logits and layer its attention's sums
}

func (c *chunkOut) reset() {
	c.nl, c.logits, c.attn, c.attnOff, c.sums = 0, c.logits[:0], c.attn[:0], c.attnOff[:0], c.sums[:0]
}

// keep sets aside the outputs of graph g, of shape s, which ran a chunk
// of a step: rows at positions pos.
func (b *Backend) keep(g *graph, s shape, rows []model.Row, pos []int, attnLayers []int) {
	ck, c := &b.chunks, &b.m.Config
	if g.logits != nil && !b.lazy {
		n := len(ck.logits)
		ck.logits = slices.Grow(ck.logits, s.nl*c.Vocab)[:n+s.nl*c.Vocab]
		gg.Get(g.logits, ck.logits[n:], 0)
	}
	if g.stats != nil {
		b.readStats(g, s.nl, ck.nl)
	}
	if b.sumAttn && len(attnLayers) > 0 {
		n := len(ck.sums)
		ck.sums = slices.Grow(ck.sums, s.nl*len(attnLayers)*(2*c.Heads+1))[:n+s.nl*len(attnLayers)*(2*c.Heads+1)]
		b.readAttnSums(rows, s, g, ck.sums[n:])
	} else if len(attnLayers) > 0 {
		ck.first = ck.first[:0] // per row of the chunk, its first attnOff
		for r, row := range rows {
			ck.first = append(ck.first, len(ck.attnOff))
			if row.NoLogits {
				continue
			}
			for range attnLayers {
				ck.attnOff = append(ck.attnOff, len(ck.attn))
				n := 2 * c.Heads * (pos[r] + 1)
				ck.attn = slices.Grow(ck.attn, n)[:len(ck.attn)+n]
			}
		}
		for i := range attnLayers {
			b.readAttention(rows, pos, s, g.scores[i], g.probs[i], i, func(r int) []float32 {
				return ck.attn[ck.attnOff[ck.first[r]+i]:]
			})
		}
	}
	ck.nl += s.nl
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
	if s.batchG != o.batchG || s.batchR != o.batchR || s.batchS != o.batchS {
		return false
	}
	if s.batchG > 0 { // the groups are in the inputs
		return s.gn == o.gn && s.gnl == o.gnl && s.reorder == o.reorder && s.ncp == o.ncp && slices.Equal(s.attn, o.attn)
	}
	return s.n == o.n && s.nl == o.nl && s.reorder == o.reorder && s.maskLen == o.maskLen && s.ncp == o.ncp && s.ngather == o.ngather &&
		slices.Equal(s.groups, o.groups) && slices.Equal(s.attn, o.attn)
}

// graphFor returns the graph of a step of shape s: the last step's when
// it had the same shape (no building, no allocation: a decoding step
// often repeats the last one's shape, and on a GPU the attention spans
// are padded so that it does), else a new one, built and allocated. On
// Vulkan a graph that follows freed device memory (the scheduler's, grown
// by this graph, or a store of rows outgrown) runs on a restarted backend
// (restart.go), and on lavapipe under flash attention every graph.
func (b *Backend) graphFor(s shape) (*graph, error) {
	if b.stale || b.flash && b.lavapipe && b.ran {
		if err := b.restart(); err != nil {
			return nil, err
		}
	}
	if l := &b.last; l.g != nil && l.statsK == b.statsK && l.rows == b.rows.t && l.s.same(s) {
		b.graphs.Reused++
		return l.g, nil
	}
	b.dropGraph()
	t0 := time.Now()
	var ctx gg.Context
	var g *graph
	for {
		ctx = gg.NewContext(b.graphSize(len(s.groups)), b.graphSize(len(s.groups)))
		g = b.build(ctx, s)
		b.sched.Reset()
		b.placeInputs(g)
		size := b.sched.BufferSize(b.dev)
		if err := b.sched.Alloc(g.g); err != nil {
			ctx.Free()
			return nil, err
		}
		if b.sched.BufferSize(b.dev) == size {
			break
		}
		// The scheduler grew its memory: it freed the memory earlier
		// graphs ran in.
		b.freed()
		if !b.stale {
			break
		}
		ctx.Free() // the graph again, on a restarted backend
		if err := b.restart(); err != nil {
			return nil, err
		}
	}
	s.groups, s.attn = slices.Clone(s.groups), slices.Clone(s.attn)
	b.last = lastGraph{ctx: ctx, g: g, s: s, statsK: b.statsK, rows: b.rows.t}
	g.nodes = g.g.Nodes()
	b.graphs.MaxSplits = max(b.graphs.MaxSplits, b.sched.Splits())
	b.graphs.Built++
	b.graphs.BuildTime += time.Since(t0)
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
func (b *Backend) Graphs() (built, reused int) { return b.graphs.Built, b.graphs.Reused }

// GraphStats counts a backend's graphs: the graphs built (and the host's
// time building and allocating them), the graphs run again, and the
// nodes of the graphs run, summed over them (on a GPU each node is a
// kernel the host records and the device launches), and the most pieces
// ggml's scheduler cut a graph into (1: the whole graph on the device;
// more: some op ran on the CPU, its inputs and outputs copied between).
type GraphStats struct {
	Built, Reused int
	BuildTime     time.Duration
	Nodes         int64
	MaxSplits     int
}

// GraphStats reports the backend's graphs so far; unlike the backend's
// other methods, it may be called while a Forward runs (it waits for it).
func (b *Backend) GraphStats() GraphStats {
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	return b.graphs
}

// readAttention copies the i-th asked layer's scores and probabilities
// (per group, [nkv*Heads] per row with logits, the slots in block-id
// order) of rows at positions pos, each row's in position order, to
// dst(row): its scores, then its probabilities.
func (b *Backend) readAttention(rows []model.Row, pos []int, s shape, scores, probs []*gg.Tensor, i int, dst func(r int) []float32) {
	st, p := &b.st, b.pool
	heads, bs := b.m.Config.Heads, p.BlockSize()
	if s.batchG > 0 && s.nl > 0 { // a batch's scores and probabilities, of all its rows with logits
		for kind, src := range []*gg.Tensor{scores[0], probs[0]} {
			st.attnBatch[kind] = slices.Grow(st.attnBatch[kind][:0], s.nl*s.batchS*heads)[:s.nl*s.batchS*heads]
			gg.Get(src, st.attnBatch[kind], 0)
		}
	}
	nl := 0 // the rows with logits of the groups before
	for gi, g := range s.groups {
		if g.nl == 0 {
			continue
		}
		per := g.nkv * heads
		st.setCols(gi, bs)
		for kind := range 2 {
			if s.batchG > 0 {
				st.attn = st.attnBatch[kind][nl*per:]
			} else {
				st.attn = slices.Grow(st.attn[:0], g.nl*per)[:g.nl*per]
				gg.Get([]*gg.Tensor{scores[gi], probs[gi]}[kind], st.attn, 0)
			}
			j := 0 // the row's index among the group's rows with logits
			for k := g.r0; k < g.r1; k++ {
				r := st.order[k]
				if rows[r].NoLogits {
					continue
				}
				np := pos[r] + 1
				to := dst(r)[kind*heads*np : (kind+1)*heads*np]
				from := st.attn[j*per : (j+1)*per]
				for blk := range (np + bs - 1) / bs {
					col := int(st.col[p.BlockID(rows[r].Seq, blk)])
					cnt := min(bs, np-blk*bs)
					for h := range heads {
						copy(to[h*np+blk*bs:h*np+blk*bs+cnt], from[h*g.nkv+col:h*g.nkv+col+cnt])
					}
				}
				j++
			}
		}
		nl += g.nl
	}
}

// readAttnSums reads the attention's sums of graph g, of shape s, which
// ran rows (a step, or a chunk of one), into dst: per row with logits, in
// the rows' order, and per layer asked, the heads' entropies, their
// Σ |score| and the disagreement (model.Output's AttentionSumsBuffer).
// The graph's rows come group by group (attentionSums).
func (b *Backend) readAttnSums(rows []model.Row, s shape, g *graph, dst []float32) {
	st, h := &b.st, b.m.Config.Heads
	w, layers := 2*h+1, len(g.sums)
	st.logitIdx = st.logitIdx[:0] // each row's place among the rows with logits
	nl := 0
	for _, r := range rows {
		st.logitIdx = append(st.logitIdx, nl)
		if !r.NoLogits {
			nl++
		}
	}
	for i, sums := range g.sums {
		if s.batchG > 0 && s.nl > 0 { // one tensor for the batch, its rows group by group
			st.sums = slices.Grow(st.sums[:0], s.nl*w)[:s.nl*w]
			gg.Get(sums[0], st.sums, 0)
		}
		at := 0 // the graph's row
		for gi, grp := range s.groups {
			if grp.nl == 0 {
				continue
			}
			if s.batchG == 0 {
				st.sums = slices.Grow(st.sums[:0], grp.nl*w)[:grp.nl*w]
				gg.Get(sums[gi], st.sums, 0)
				at = 0
			}
			for k := grp.r0; k < grp.r1; k++ {
				r := st.order[k]
				if rows[r].NoLogits {
					continue
				}
				from, to := st.sums[at*w:][:w], dst[(st.logitIdx[r]*layers+i)*w:][:w]
				for hh := range h { // per head: Σ P log P, Σ |score|
					to[hh], to[h+hh] = -from[2*hh], from[2*hh+1]
				}
				to[2*h] = from[2*h]
				at++
			}
		}
	}
}

var _ model.Backend = (*Backend)(nil)
