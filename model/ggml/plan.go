package ggml

import (
	"math"
	"math/bits"
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
	mask16               []uint16 // the mask in F16, under flash attention
	csrc, cvsrc          []int32
	cdst, cvdst          []int64
	attn                 []float32    // scratch for reading attention back
	attnBatch            [2][]float32 // a batch's scores and probabilities, read back
	sums                 []float32    // the attention's sums, read back (readAttnSums)
	logitIdx             []int        // each row's place among the rows with logits (readAttnSums)
	rowIdx               []int64      // the rows' places in the device's store
	rowOff               int          // the graph's first row with logits among the step's
	nl                   int          // the step's rows with logits (the graph's may be more: padRows)
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
	qidx, oidx           []int32              // a batch's: per padded row its step row, per step row its padded row
	attnRows             []int32              // a batch's: its rows with logits, padded rows, in the step's order
	info                 []groupInfo          // per group: its span's first slot, its slots
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

// The batchings (Backend.batchMode): on a GPU when a step has several
// groups, never, or always.
const (
	batchAuto = iota
	batchNever
	batchAlways
)

// groupInfo is a group's slots: its span's first slot, and its
// GroupSpan (Read: its blocks gathered, padded).
type groupInfo struct {
	lo int
	GroupSpan
}

// batchFree is the rows x slots of padding a batch may always add: with
// 64-wide heads some 17 million multiply-adds a head and layer, a few
// microseconds of a GPU, about what a kernel's launch costs.
const batchFree = 1 << 16

// batched reports whether a step of n rows whose groups are groups (per
// group: its rows, its slots) attends as one batch: on a GPU, where each
// of a graph's nodes costs the host time to record and the device time
// to launch, and a batch has the same nodes for any number of groups,
// when there are several and the padding (a batch pads every group to
// the largest's rows and slots) adds at most three times the groups' own
// rows x slots, batchFree, and a quarter of the rows' products with the
// weights (counted in rows x slots of the same multiply-adds). One
// search's prompt beside others' decoding steps would add far more: its
// groups attend one by one.
func (b *Backend) batched(n int, groups []groupInfo) bool {
	switch b.batchMode {
	case batchNever:
		return false
	case batchAlways:
		return true
	}
	if b.padSlots == 0 || len(groups) < 2 {
		return false
	}
	R, S, own := 0, 0, 0
	for _, g := range groups {
		R, S, own = max(R, g.Rows), max(S, g.Read), own+g.Rows*g.Read
	}
	R = 1 << bits.Len(uint(R-1))
	c := &b.m.Config
	// A row's products with one layer's weights, in slots: a slot is
	// 4*Heads*HeadDim multiply-adds (its score and its value's share, for
	// every head).
	weights := 2 * (c.Dim*(c.Heads*c.HeadDim+2*c.KVDim()) + c.Heads*c.HeadDim*c.Dim + 3*c.Dim*c.HiddenDim)
	rowSlots := weights / (4 * c.Heads * c.HeadDim)
	return padCount(len(groups))*R*S-own <= 3*own+batchFree+n*rowSlots/4
}

// padCount rounds n up to a multiple of a quarter of the power of two
// at most n: at most a quarter more, four sizes an octave.
func padCount(n int) int {
	if n < 8 {
		return n
	}
	q := 1 << (bits.Len(uint(n)) - 3)
	return (n + q - 1) / q * q
}

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
	st.union, st.gather, st.gu, st.info = st.union[:0], st.gather[:0], st.gu[:0], st.info[:0]
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
		st.info = append(st.info, groupInfo{lo: lo, GroupSpan: GroupSpan{Rows: g.r1 - g.r0, Span: span, Read: gathered, Used: len(u) * bs, Seen: seen}})
	}
	if b.batched(n, st.info) {
		b.planBatch(&s, rows)
		for _, gi := range st.info { // the padded rows and slots count
			gi.Rows, gi.Read = s.batchR, s.batchS
			b.spans.add(gi.GroupSpan)
		}
	} else {
		for gi := range st.groups {
			g, in := &st.groups[gi], st.info[gi]
			if u := st.union[st.gu[gi][0]:st.gu[gi][1]]; b.gatherSpan(in.Span, in.Read) {
				g.gather, g.lo, g.nkv, g.goff = true, 0, in.Read, len(st.gather)*bs
				st.gather = append(st.gather, u...)
				for range in.Read/bs - len(u) { // padding: masked out
					st.gather = append(st.gather, u[0])
				}
			} else {
				g.lo, g.nkv = in.lo, in.Span
			}
			g.maskOff = s.maskLen
			s.maskLen += g.nkv * (g.r1 - g.r0)
			in.Read = g.nkv
			b.spans.add(in.GroupSpan)
		}
	}
	s.ngather = len(st.gather)
	if n := s.ngather; n > 0 && !b.flash {
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
	s.nl, st.nl = len(st.outRows), len(st.outRows)
	s.gn, s.gnl = n, s.nl
	if s.batchG > 0 && b.padSlots > 0 {
		b.padRows(&s)
	}
	if !b.flash {
		st.vidx = slices.Grow(st.vidx[:0], s.gn*kvd)[:s.gn*kvd]
		for k, slot := range st.kidx {
			for d := range kvd {
				st.vidx[k*kvd+d] = int64(d*b.slots) + slot
			}
		}
	}
	st.mask = slices.Grow(st.mask[:0], s.maskLen)[:s.maskLen]
	inf := float32(math.Inf(-1))
	if s.batchG > 0 { // a batch's padded rows see their group's first slot
		for j := range st.mask {
			st.mask[j] = inf
		}
		for gi := range s.batchG {
			rows := 0 // a padded group's
			if gi < len(s.groups) {
				rows = s.groups[gi].r1 - s.groups[gi].r0
			}
			for j := rows; j < s.batchR; j++ {
				st.mask[(gi*s.batchR+j)*s.batchS] = 0
			}
		}
	}
	st.groupOut = st.groupOut[:0]
	for gi, g := range s.groups {
		st.setCols(gi, bs)
		var out []int32
		for k := g.r0; k < g.r1; k++ {
			i := st.order[k]
			m := st.mask[g.maskOff+(k-g.r0)*g.nkv:][:g.nkv]
			if s.batchG == 0 {
				for j := range m {
					m[j] = inf
				}
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
	if b.flash { // F16: 0, or -Inf
		st.mask16 = slices.Grow(st.mask16[:0], s.maskLen)[:s.maskLen]
		for j, m := range st.mask {
			st.mask16[j] = 0
			if m != 0 {
				st.mask16[j] = 0xfc00
			}
		}
	}
	s.ncp = b.planCopies()
	if s.batchG > 0 && b.padSlots > 0 { // a padded batch: its copies too
		b.padCopies(&s)
	}
	return s
}

// padStepRows is the rows a padded step of n rows runs: a power of two
// up to 64 (where a GPU's products with the weights take the time of
// one row), padCount beyond.
func padStepRows(n int) int {
	if n <= 64 {
		return 1 << bits.Len(uint(n-1))
	}
	return padCount(n)
}

// padRows pads a batch's step on a GPU so that the next steps' graphs
// are likely to have its shape (and run it again, not built anew): its
// rows to padStepRows(n) with copies of its last row (writing their keys
// and values to the scratch block; their outputs go nowhere), its rows with
// logits to padStepRows(nl) with copies of the last (their logits rows
// written to the same place in the store, their statistics not read),
// and the outputs always gathered.
func (b *Backend) padRows(s *shape) {
	st := &b.st
	s.gn, s.reorder = padStepRows(s.n), true
	for range s.gn - s.n {
		st.tokens, st.pos, st.kidx = append(st.tokens, st.tokens[s.n-1]), append(st.pos, st.pos[s.n-1]), append(st.kidx, int64(b.scratch))
		st.oidx = append(st.oidx, st.oidx[s.n-1])
	}
	if s.nl > 0 {
		s.gnl = padStepRows(s.nl)
		for range s.gnl - s.nl {
			st.outRows = append(st.outRows, st.outRows[s.nl-1])
			if len(st.attnRows) > 0 {
				st.attnRows = append(st.attnRows, st.attnRows[s.nl-1])
			}
		}
	}
}

// minPaddedCopies is the fewest slots a padded batch copies: copies on
// write come and go with the forks, a few slots each, and a copy costs
// little.
const minPaddedCopies = 32

// padCopies pads a padded batch's copies on write, to a power of two
// and at least minPaddedCopies, with copies of its last (or of the
// scratch slot onto itself).
func (b *Backend) padCopies(s *shape) {
	st, kvd := &b.st, int64(b.m.Config.KVDim())
	if s.ncp == 0 {
		slot := int64(b.scratch)
		st.csrc, st.cdst = append(st.csrc, int32(slot)), append(st.cdst, slot)
		if !b.flash {
			for d := range kvd {
				st.cvsrc, st.cvdst = append(st.cvsrc, int32(d*int64(b.slots)+slot)), append(st.cvdst, d*int64(b.slots)+slot)
			}
		}
		s.ncp = 1
	}
	ncp := max(minPaddedCopies, 1<<bits.Len(uint(s.ncp-1)))
	for range ncp - s.ncp {
		st.csrc, st.cdst = append(st.csrc, st.csrc[s.ncp-1]), append(st.cdst, st.cdst[s.ncp-1])
		if !b.flash {
			st.cvsrc = append(st.cvsrc, st.cvsrc[(s.ncp-1)*int(kvd):s.ncp*int(kvd)]...)
			st.cvdst = append(st.cvdst, st.cvdst[(s.ncp-1)*int(kvd):s.ncp*int(kvd)]...)
		}
	}
	s.ncp = ncp
}

// planBatch lays a step's groups out as one batch of shape s: each group
// its blocks gathered, padded to s.batchS slots, and its rows padded to
// s.batchR (a power of two), group gi's rows at [gi*batchR,
// (gi+1)*batchR) of the batch, its mask [batchS, batchR] at gi*batchR*batchS.
// A padded row repeats the group's first and sees its first slot only;
// its output is dropped.
func (b *Backend) planBatch(s *shape, rows []model.Row) {
	st, bs := &b.st, b.pool.BlockSize()
	for _, in := range st.info {
		s.batchR, s.batchS = max(s.batchR, in.Rows), max(s.batchS, in.Read)
	}
	s.batchG, s.batchR = len(st.groups), 1<<bits.Len(uint(s.batchR-1))
	R, S := s.batchR, s.batchS
	st.qidx, st.oidx, st.attnRows = st.qidx[:0], st.oidx[:0], st.attnRows[:0]
	for gi := range st.groups {
		g := &st.groups[gi]
		u := st.union[st.gu[gi][0]:st.gu[gi][1]]
		g.gather, g.lo, g.nkv, g.goff = true, 0, S, len(st.gather)*bs
		st.gather = append(st.gather, u...)
		for range S/bs - len(u) { // padding: masked out
			st.gather = append(st.gather, u[0])
		}
		g.maskOff = gi * R * S
		for j := range R {
			r := g.r0 + j
			if r >= g.r1 {
				r = g.r0
			}
			st.qidx = append(st.qidx, int32(r))
		}
		for k := g.r0; k < g.r1; k++ {
			st.oidx = append(st.oidx, int32(gi*R+k-g.r0))
			if !rows[st.order[k]].NoLogits {
				st.attnRows = append(st.attnRows, int32(gi*R+k-g.r0))
			}
		}
	}
	if b.padSlots > 0 { // on a GPU, groups that read a block and go nowhere
		s.batchG = padCount(s.batchG)
		for range s.batchG - len(st.groups) {
			for range S / bs {
				st.gather = append(st.gather, st.gather[0])
			}
			for range R {
				st.qidx = append(st.qidx, 0)
			}
		}
	}
	s.maskLen = s.batchG * R * S
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
		if b.flash { // the values' slots are the keys'
			continue
		}
		for d := range int64(kvd) {
			st.cvsrc = append(st.cvsrc, int32(d*int64(b.slots)+src))
			st.cvdst = append(st.cvdst, d*int64(b.slots)+dst)
		}
	}
	return len(st.cdst)
}

// setInputs copies the step's inputs to the graph's tensors: three
// transfers (on a GPU, each one the host waits for), the mask and the
// two packed index inputs.
func (b *Backend) setInputs(g *graph) {
	st := &b.st
	if b.flash {
		gg.Set(g.mask, st.mask16, 0)
	} else {
		gg.Set(g.mask, st.mask, 0)
	}
	g.in32.send()
	g.in64.send()
}

// placeInputs puts graph g's inputs in the device's memory, where the
// host's copies reach them directly (ggml's scheduler would otherwise
// keep them on the CPU and copy each to the device).
func (b *Backend) placeInputs(g *graph) {
	for _, t := range []*gg.Tensor{g.mask, g.in32.t, g.in64.t} {
		if t != nil {
			b.sched.SetBackend(t, b.dev)
		}
	}
}
