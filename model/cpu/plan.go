package cpu

import (
	"slices"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
)

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

// maxChunkRows bounds the rows attending together: beyond a few queries
// per kernel call the block is in L1 anyway, and smaller chunks spread
// better over threads.
const maxChunkRows = 16

// planBatch splits the batch into chunks of rows and, within each chunk,
// groups the rows by the cache block they read at each block index: in a
// tree step every branch reads the shared prefix's blocks, in a prefill
// every row the prompt's. Block tables do not change during the step, so
// one plan serves every layer.
func (r *Runner) planBatch(rows []model.Row) {
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
