// Package kvcachetest drives a paged KV store through random operation
// sequences and checks it against an independent model of what every
// sequence holds.
//
// The operations are the block manager's (new sequence, fork, append,
// truncate, free, use after free) and a forward step's writes (rewriting an
// owned position); a store may add its own ([Extra], e.g. sealing blocks).
// After every operation the store compares each live sequence with the
// model, which is a plain slice of positions per sequence, shared by forks as
// values (a stored position is never mutated). The decisions come from a
// [Chooser]: a seeded generator for property tests, or fuzz input. Both the
// block manager's own tests (package kvcache, with a shadow storage) and the
// CPU backend's storage (model/cpu) run this machine.
package kvcachetest

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
)

// A Chooser supplies the decisions of a random operation sequence.
type Chooser interface {
	// Intn returns a number in [0, n), n > 0.
	Intn(n int) int
	// Done reports whether the decisions are used up.
	Done() bool
}

// Rand is a Chooser drawing from a seeded generator; it is never done.
func Rand(seed uint64) Chooser {
	return randChooser{rand.New(rand.NewPCG(seed, 0x6b76636163686521))}
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) Intn(n int) int { return c.r.IntN(n) }
func (c randChooser) Done() bool     { return false }

// Bytes is a Chooser reading its decisions from fuzz input; it is done when
// the input is used up.
func Bytes(data []byte) Chooser { return &byteChooser{data: data} }

type byteChooser struct {
	data []byte
	i    int
}

func (c *byteChooser) Intn(n int) int {
	if c.i >= len(c.data) {
		return 0
	}
	v := int(c.data[c.i])
	c.i++
	if n > 256 {
		v = v<<8 | c.Intn(256)
	}
	return v % n
}

func (c *byteChooser) Done() bool { return c.i >= len(c.data) }

// A Store is the KV store under test: the block manager's operations on
// sequences and the storage's writes and checks.
type Store interface {
	NewSeq() *kvcache.Seq
	Fork(*kvcache.Seq) *kvcache.Seq
	Append(*kvcache.Seq) (int, error)
	AppendNeedsBlock(*kvcache.Seq) bool
	Truncate(*kvcache.Seq, int) error
	Free(*kvcache.Seq)
	Owned(s *kvcache.Seq, pos int) bool
	Blocks(*kvcache.Seq) int
	BlockID(s *kvcache.Seq, i int) int
	Stats() kvcache.Stats

	// Write stores vals, Layers*2*KVDim floats ([layer][K, V][KVDim]), at
	// owned position pos of s.
	Write(s *kvcache.Seq, pos int, vals []float32)
	// PoisonFree fills the storage of every free block with NaN: the stale
	// data a block's earlier owner could leave, which no reader may see.
	PoisonFree()
	// Check fails t unless every live sequence holds what want says
	// (want[i][pos] as Write was given it) and the store's own invariants
	// hold; live is nil after everything was freed.
	Check(t testing.TB, live []*kvcache.Seq, want [][][]float32)
}

// Extra is implemented by a Store with operations of its own.
type Extra interface {
	// Op performs one of the store's own operations on s.
	Op(t testing.TB, c Chooser, s *kvcache.Seq, hits Hits)
	// Appended is told of every successful append (cow: the append copied
	// a shared block).
	Appended(s *kvcache.Seq, pos int, cow bool, hits Hits)
}

// Hits counts how often the interesting paths were taken, so that a
// property test can insist that it exercised them: "full" (an append
// refused for a full pool), "cow", "fresh" and "inPlace" appends, "rewrite",
// "forks", and what an Extra adds.
type Hits map[string]int

// Barely returns the paths among names taken fewer than min times.
func (h Hits) Barely(min int, names ...string) []string {
	var few []string
	for _, n := range names {
		if h[n] < min {
			few = append(few, n)
		}
	}
	return few
}

// Common are the paths every store takes.
var Common = []string{"full", "cow", "fresh", "inPlace", "rewrite", "forks"}

// Run draws a pool configuration from c, makes the store with open, runs
// up to maxOps operations checking the store after each, then frees every
// sequence and checks that no block leaked.
func Run(t testing.TB, c Chooser, maxOps int, hits Hits, open func(kvcache.Config) (Store, error)) {
	blockSizes := []int{1, 2, 3, 4, 5, 8, 16}
	cfg := kvcache.Config{
		Layers:    1 + c.Intn(3),
		KVDim:     1 + c.Intn(4),
		BlockSize: blockSizes[c.Intn(len(blockSizes))],
		MaxBlocks: 1 + c.Intn(40),
	}
	if c.Intn(4) == 0 {
		cfg.MaxBlocks = 1 << 20 // effectively unlimited
	}
	switch c.Intn(3) {
	case 0:
		cfg.HeadDim = 1 // one head per dimension
	case 1:
		if cfg.KVDim%2 == 0 {
			cfg.HeadDim = 2
		}
	} // else one head of KVDim
	if c.Intn(2) == 0 {
		cfg.DType = kvcache.F16
	}
	st, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, c: c, st: st, cfg: cfg, hits: hits}
	r.extra, _ = st.(Extra)
	for range maxOps {
		if c.Done() {
			break
		}
		r.step()
		r.check()
	}
	for _, m := range r.live {
		st.Free(m.s)
	}
	r.live = nil
	if s := st.Stats(); s.BlocksInUse != 0 || s.SharedBlocks != 0 || s.LogicalBlocks != 0 || s.FreeBlocks != s.CapBlocks {
		t.Fatalf("leak after freeing everything: %+v", s)
	}
	st.Check(t, nil, nil)
}

// modelSeq is the independent model of one sequence: per position, the
// floats last written there. A position's slice is never mutated after it
// is stored, so forks can share it.
type modelSeq struct {
	s   *kvcache.Seq
	pos [][]float32
}

type run struct {
	t     testing.TB
	c     Chooser
	st    Store
	extra Extra
	cfg   kvcache.Config
	live  []*modelSeq
	freed []*kvcache.Seq
	next  float32 // source of unique values to write
	hits  Hits
}

func (r *run) pick() *modelSeq { return r.live[r.c.Intn(len(r.live))] }

func (r *run) width() int { return r.cfg.Layers * 2 * r.cfg.KVDim }

// write fills position pos of m with fresh values, in the store and in the
// model.
func (r *run) write(m *modelSeq, pos int) {
	vals := make([]float32, r.width())
	for i := range vals {
		r.next++
		vals[i] = r.next
		if r.cfg.DType == kvcache.F16 {
			vals[i] = float32(int(r.next) % 2048) // exact in binary16
		}
	}
	r.st.Write(m.s, pos, vals)
	m.pos[pos] = vals
}

func (r *run) writeNaN(s *kvcache.Seq, pos int) {
	nan := make([]float32, r.width())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	r.st.Write(s, pos, nan)
}

func (r *run) step() {
	t, c, st := r.t, r.c, r.st
	op := c.Intn(100)
	if len(r.live) == 0 {
		op = 0
	}
	switch {
	case op < 8: // NewSeq
		if len(r.live) < 24 {
			r.live = append(r.live, &modelSeq{s: st.NewSeq()})
		}
	case op < 22: // Fork
		if len(r.live) < 24 {
			m := r.pick()
			r.live = append(r.live, &modelSeq{s: st.Fork(m.s), pos: slices.Clone(m.pos)})
			r.hits["forks"]++
		}
	case op < 65: // Append one or a few positions
		m := r.pick()
		for range 1 + c.Intn(3) {
			r.append(m)
		}
	case op < 77: // Truncate
		m := r.pick()
		n := c.Intn(m.s.Len() + 1)
		if c.Intn(10) == 0 { // out of range: an error and no change
			n = m.s.Len() + 1 + c.Intn(3)
			if c.Intn(2) == 0 {
				n = -1 - c.Intn(3)
			}
			before := st.Stats()
			if err := st.Truncate(m.s, n); err == nil || st.Stats() != before {
				t.Fatalf("Truncate(%d) of %d positions = %v", n, m.s.Len(), err)
			}
			return
		}
		// The positions given back hold NaN (where they may be written),
		// and so do the blocks released: stale data that the next owner of
		// a slot must never see before writing it.
		for pos := n; pos < m.s.Len(); pos++ {
			if st.Owned(m.s, pos) {
				r.writeNaN(m.s, pos)
			}
		}
		if err := st.Truncate(m.s, n); err != nil {
			t.Fatalf("Truncate(%d) of %d positions: %v", n, m.s.Len(), err)
		}
		st.PoisonFree()
		m.pos = m.pos[:n]
	case op < 87: // Free, sometimes a second time, and use after free
		i := c.Intn(len(r.live))
		s := r.live[i].s
		st.Free(s)
		st.PoisonFree()
		r.live = slices.Delete(r.live, i, i+1)
		r.freed = append(r.freed, s)
		if c.Intn(3) == 0 {
			before := st.Stats()
			f := r.freed[c.Intn(len(r.freed))]
			st.Free(f)
			if _, err := st.Append(f); !errors.Is(err, kvcache.ErrSeqFreed) {
				t.Fatalf("Append after Free = %v", err)
			}
			if st.Stats() != before || f.Len() != 0 {
				t.Fatalf("operations on a freed sequence changed the pool")
			}
		}
	case op < 93 && r.extra != nil: // the store's own operation
		r.extra.Op(t, c, r.pick().s, r.hits)
	default: // rewrite an owned position, as a forward step could
		m := r.pick()
		if m.s.Len() == 0 {
			return
		}
		pos := c.Intn(m.s.Len())
		if st.Owned(m.s, pos) {
			r.write(m, pos)
			r.hits["rewrite"]++
		}
	}
}

// blockIDs is s's block table.
func blockIDs(st Store, s *kvcache.Seq) []int {
	ids := make([]int, st.Blocks(s))
	for i := range ids {
		ids[i] = st.BlockID(s, i)
	}
	return ids
}

func (r *run) append(m *modelSeq) {
	t, st := r.t, r.st
	before := st.Stats()
	need := st.AppendNeedsBlock(m.s)
	table := blockIDs(st, m.s)
	n := m.s.Len()
	pos, err := st.Append(m.s)
	if err != nil {
		if !errors.Is(err, kvcache.ErrCacheFull) || !need || before.FreeBlocks != 0 {
			t.Fatalf("Append = %v (needs block %v, %+v)", err, need, before)
		}
		if m.s.Len() != n || !slices.Equal(blockIDs(st, m.s), table) || st.Stats() != before {
			t.Fatalf("failed Append changed the sequence or the pool")
		}
		r.hits["full"]++
		return
	}
	after := st.Stats()
	cow := need && n%r.cfg.BlockSize != 0
	if pos != n || m.s.Len() != n+1 ||
		after.BlocksInUse-before.BlocksInUse != b2i(need) ||
		after.CopyOnWrites-before.CopyOnWrites != uint64(b2i(cow)) {
		t.Fatalf("Append at %d: pos %d, needs block %v, before %+v, after %+v", n, pos, need, before, after)
	}
	if !st.Owned(m.s, pos) {
		t.Fatalf("appended position %d is not owned", pos)
	}
	if r.extra != nil {
		r.extra.Appended(m.s, pos, cow, r.hits)
	}
	// The new position holds stale data until written; write is next, and
	// check then sees that it reads back exactly.
	switch {
	case cow:
		r.hits["cow"]++
	case need:
		r.hits["fresh"]++
	default:
		r.hits["inPlace"]++
	}
	m.pos = append(m.pos, nil)
	r.write(m, pos)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// check compares every live sequence with the model.
func (r *run) check() {
	live := make([]*kvcache.Seq, len(r.live))
	want := make([][][]float32, len(r.live))
	for i, m := range r.live {
		live[i], want[i] = m.s, m.pos
		if m.s.Len() != len(m.pos) {
			r.t.Fatalf("sequence %d: Len %d, model %d", i, m.s.Len(), len(m.pos))
		}
	}
	r.st.Check(r.t, live, want)
}

// Seeds adds the fuzz seeds of an operation sequence to f: the empty
// input, two short hand-made ones, and four random ones.
func Seeds(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 0, 0, 30, 30, 30, 30, 30, 15, 15, 40, 40, 40, 70, 70, 80, 99, 99})
	f.Add([]byte{2, 3, 1, 2, 1, 0, 50, 2, 50, 0, 50, 1, 10, 0, 50, 1, 50, 0, 70, 0, 0, 80, 0, 0})
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		b := make([]byte, 300)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
}
