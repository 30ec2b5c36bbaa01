package kernels

import (
	"sync"
)

// Weight memory.
//
// Quantized weights are read once per step, end to end: 117 MB for a
// stories110M Q8_0 model, some 29,000 pages of 4 KB, each a TLB miss and
// a page walk per step, competing with the KV cache's pages for the TLB.
// On Linux the repacked weights therefore live in chunks mapped for the
// purpose and advised for transparent huge pages (2 MB; MADV_HUGEPAGE,
// which THP's default "madvise" mode honours). With them a stories110M
// Q8_0 step took 3% less time at 1 branch and 6% less at 16 (medians of
// the ratios of 14 interleaved pairs of branch-step runs); the products
// alone, without the KV cache's traffic, gained little. Go's own heap
// served worse: part of it had been touched before (freed loading
// buffers) and stayed in small pages.
//
// Small matrices share chunks, which grow from 2 MB to 64 MB as a model
// loads (a chunk's unused tail is wasted: less than weightSmall bytes of
// every chunk); a large matrix gets a chunk of its own. A matrix holds its
// chunk (Mat.mem), and a chunk is unmapped when the garbage collector
// finds it unreachable: with the last matrix in it, once the allocator has
// moved on to another.
//
// The collector paces itself by the Go heap, which mapped chunks are not
// part of. So mapping forces a collection every GiB mapped
// (weightmem_linux.go), and chunks under weightMapMin bytes stay Go
// memory: a huge page is resident as soon as one byte of it is touched,
// and a process that loads many tiny models (the loaders' fuzz tests)
// would otherwise hold 2 MB a model until a collection happened to run.
// Where no mapping can be had, a chunk is Go memory too.

const (
	hugePage       = 2 << 20
	weightChunkMin = 2 << 20
	weightChunkMax = 64 << 20
	weightSmall    = 4 << 20  // larger allocations get a chunk of their own
	weightMapMin   = 16 << 20 // smaller chunks are Go memory
)

// weightChunk is a region of weight memory; see above.
type weightChunk struct {
	mem []byte
}

var weightMem struct {
	sync.Mutex
	cur  *weightChunk
	free []byte // cur's unused part, 64-byte aligned
	next int    // the size of the next shared chunk
}

// weightBytes returns a zeroed slice of n > 0 bytes for weights, starting
// on a 64-byte boundary, in memory advised for huge pages where the system
// offers them, and the chunk that must stay reachable while it is used.
func weightBytes(n int) ([]byte, *weightChunk) {
	if n > weightSmall {
		c := newWeightChunk(n)
		return c.mem[:n:n], c
	}
	w := &weightMem
	w.Lock()
	defer w.Unlock()
	if len(w.free) < n {
		w.next = min(weightChunkMax, max(weightChunkMin, 2*w.next))
		w.cur = newWeightChunk(max(w.next, n))
		w.free = w.cur.mem
	}
	b := w.free[:n:n]
	w.free = w.free[min(len(w.free), (n+63)&^63):]
	return b, w.cur
}

// newWeightChunk returns a chunk of at least n bytes, rounded up to whole
// huge pages: from weightMapMin bytes mapped, aligned and advised where
// the system allows, otherwise Go memory aligned to a cache line.
func newWeightChunk(n int) *weightChunk {
	size := (n + hugePage - 1) &^ (hugePage - 1)
	if size >= weightMapMin {
		if c := mapWeightChunk(size); c != nil {
			return c
		}
	}
	return &weightChunk{mem: alignedBytes(size)}
}
