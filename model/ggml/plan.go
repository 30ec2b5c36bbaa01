package ggml

import (
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

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
	rowOff               int       // the graph's first row with logits among the step's
	copies               map[int64]int64
	parent               []int32 // union-find over block ids
	touched              []int32
	groupOf              []int32 // per row: its group's root block
	groups               []group
	mark                 []int32 // per block id: the stamp of the last group whose union took it
	stamp                int32
	union                []int32  // the groups' blocks, each group's in increasing id order
	col                  []int32  // per block id: its first slot's column in the attention of the group setCols last set
	gu                   [][2]int // per group: its blocks, union[gu[0]:gu[1]]
	sets                 []rowSet
	setOf                []int32              // per row: its set, in sets
	setIdx               map[int32]int32      // a set's root block -> its index in sets
	seqFirst             map[*kvcache.Seq]int // each sequence's first row
	key                  []int                // per row: its group's first row
	gather               []int32              // the gathering groups' blocks (padded), in their order
	gatherIdx            []int32              // the same per KV dimension: [len(gather), KVDim]
}

// defaultSplitRatio is Backend.splitRatio's default: a set of rows
// sharing blocks attends sequence by sequence when its rows x blocks are
// more than 4 times the blocks its rows see.
const defaultSplitRatio = 4

// Gathering: a group whose span is at least gatherRatio times its blocks'
// slots (each padded) gathers its blocks instead.
const gatherRatio = 2

// gatherSpan reports whether a group whose span is span slots and whose
// blocks gathered are gathered slots gathers them.
func (b *Backend) gatherSpan(span, gathered int) bool {
	switch b.gatherMode {
	case gatherNever:
		return false
	case gatherAlways:
		return true
	}
	return span >= gatherRatio*gathered
}

// The gatherings (Backend.gatherMode): by the groups' spans, never, or
// always (for testing both ways).
const (
	gatherAuto = iota
	gatherNever
	gatherAlways
)

// rowSet is a set of a step's rows whose block tables share blocks,
// transitively: its first row, its rows, its blocks, and the blocks its
// rows see (summed over them); split when it attends sequence by
// sequence.
type rowSet struct {
	first, rows, blocks, seen int
	split                     bool
}

// nextStamp starts a new set of marks.
func (st *step) nextStamp() {
	if st.stamp++; st.stamp <= 0 { // wrapped: every mark is stale
		clear(st.mark)
		st.stamp = 1
	}
}

// setCols sets the columns of group gi's blocks in its attention: in
// its span from its lo, or in the order gathered.
func (st *step) setCols(gi, bs int) {
	g, u := st.groups[gi], st.union[st.gu[gi][0]:st.gu[gi][1]]
	for j, id := range u {
		if g.gather {
			st.col[id] = int32(j * bs)
		} else {
			st.col[id] = id*int32(bs) - int32(g.lo)
		}
	}
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
	// A set of rows whose private blocks outweigh what they share (the
	// branches of a search grown apart) attends sequence by sequence: its
	// rows x its blocks would be mostly masked out.
	if len(st.mark) < b.slots/bs {
		st.mark, st.stamp = make([]int32, b.slots/bs), 0
		st.col = make([]int32, b.slots/bs)
	}
	st.nextStamp()
	if st.setIdx == nil {
		st.setIdx, st.seqFirst = map[int32]int32{}, map[*kvcache.Seq]int{}
	}
	clear(st.setIdx)
	clear(st.seqFirst)
	st.sets, st.setOf = st.sets[:0], st.setOf[:0]
	for i, row := range rows {
		si, ok := st.setIdx[st.groupOf[i]]
		if !ok {
			si = int32(len(st.sets))
			st.setIdx[st.groupOf[i]] = si
			st.sets = append(st.sets, rowSet{first: i})
		}
		st.setOf = append(st.setOf, si)
		set := &st.sets[si]
		set.rows++
		set.seen += pos[i]/bs + 1
		for blk := range pos[i]/bs + 1 {
			if id := p.BlockID(row.Seq, blk); st.mark[id] != st.stamp {
				st.mark[id] = st.stamp
				set.blocks++
			}
		}
		if _, ok := st.seqFirst[row.Seq]; !ok {
			st.seqFirst[row.Seq] = i
		}
	}
	for si := range st.sets {
		set := &st.sets[si]
		set.split = b.splitRatio > 0 && set.rows > 1 && float64(set.rows*set.blocks) > b.splitRatio*float64(set.seen)
	}
	// Each row's group: its set's first row, or when the set is split
	// its sequence's.
	st.key = st.key[:0]
	for i, row := range rows {
		k := st.sets[st.setOf[i]].first
		if st.sets[st.setOf[i]].split {
			k = st.seqFirst[row.Seq]
		}
		st.key = append(st.key, k)
	}
	// The step's order: the groups in the order of their sets' first rows
	// and then their own, each group's rows in theirs.
	st.order = slices.Grow(st.order[:0], n)[:n]
	for i := range st.order {
		st.order[i] = i
	}
	slices.SortStableFunc(st.order, func(x, y int) int {
		if c := st.sets[st.setOf[x]].first - st.sets[st.setOf[y]].first; c != 0 {
			return c
		}
		return st.key[x] - st.key[y]
	})
	st.inv = slices.Grow(st.inv[:0], n)[:n]
	for k, i := range st.order {
		st.inv[i] = k
		s.reorder = s.reorder || k != i
	}
	st.groups = st.groups[:0]
	for k := 0; k < n; {
		key, k1 := st.key[st.order[k]], k+1
		for k1 < n && st.key[st.order[k1]] == key {
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
	// Each group's slots: from its lowest block to its highest (its span),
	// or its blocks gathered (its union), whichever is cheaper; padded (on
	// a GPU) to a multiple of pad slots, so that the graph's shapes change
	// every few steps only.
	pad := bs
	if b.padSlots > bs {
		pad = b.padSlots / bs * bs
	}
	st.union, st.gather, st.gu = st.union[:0], st.gather[:0], st.gu[:0]
	for gi := range st.groups {
		g := &st.groups[gi]
		st.nextStamp()
		u0, seen := len(st.union), 0
		for k := g.r0; k < g.r1; k++ {
			i := st.order[k]
			seen += pos[i] + 1
			for blk := range pos[i]/bs + 1 {
				if id := p.BlockID(rows[i].Seq, blk); st.mark[id] != st.stamp {
					st.mark[id] = st.stamp
					st.union = append(st.union, int32(id))
				}
			}
			if !rows[i].NoLogits {
				g.nl++
			}
		}
		u := st.union[u0:]
		slices.Sort(u)
		lo, hi := int(u[0]), int(u[len(u)-1])
		lo = lo * bs / pad * pad
		span := min(b.slots, ((hi+1)*bs+pad-1)/pad*pad) - lo
		gathered := (len(u)*bs + pad - 1) / pad * pad
		st.gu = append(st.gu, [2]int{u0, len(st.union)})
		if b.gatherSpan(span, gathered) {
			g.gather, g.lo, g.nkv, g.goff = true, 0, gathered, len(st.gather)*bs
			st.gather = append(st.gather, u...)
			for range gathered/bs - len(u) { // padding: masked out
				st.gather = append(st.gather, u[0])
			}
		} else {
			g.lo, g.nkv = lo, span
		}
		g.maskOff = s.maskLen
		s.maskLen += g.nkv * (g.r1 - g.r0)
		b.spans.add(GroupSpan{Rows: g.r1 - g.r0, Span: span, Read: g.nkv, Used: len(u) * bs, Seen: seen})
	}
	s.ngather = len(st.gather)
	if n := s.ngather; n > 0 {
		st.gatherIdx = slices.Grow(st.gatherIdx[:0], n*kvd)[:n*kvd]
		for d := range kvd {
			copy(st.gatherIdx[d*n:], st.gather)
		}
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
	for gi, g := range s.groups {
		st.setCols(gi, bs)
		var out []int32
		for k := g.r0; k < g.r1; k++ {
			i := st.order[k]
			m := st.mask[g.maskOff+(k-g.r0)*g.nkv:][:g.nkv]
			for j := range m {
				m[j] = inf
			}
			for blk := range pos[i]/bs + 1 {
				off := st.col[p.BlockID(rows[i].Seq, blk)]
				clear(m[off : off+int32(min(bs, pos[i]+1-blk*bs))])
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
	if g.gk != nil {
		gg.Set(g.gk, st.gather, 0)
		gg.Set(g.gv, st.gatherIdx, 0)
	}
	if g.csrc != nil {
		gg.Set(g.csrc, st.csrc, 0)
		gg.Set(g.cdst, st.cdst, 0)
		gg.Set(g.cvsrc, st.cvsrc, 0)
		gg.Set(g.cvdst, st.cvdst, 0)
	}
}
