package kvcache

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// chooser supplies the decisions of a random operation sequence.
type chooser interface {
	intn(n int) int // in [0, n), n > 0
	done() bool
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }
func (c randChooser) done() bool     { return false }

// byteChooser turns fuzz input into decisions; it is done when the input is
// used up.
type byteChooser struct {
	data []byte
	i    int
}

func (c *byteChooser) intn(n int) int {
	if c.i >= len(c.data) {
		return 0
	}
	v := int(c.data[c.i])
	c.i++
	if n > 256 {
		v = v<<8 | int(c.intn(256))
	}
	return v % n
}

func (c *byteChooser) done() bool { return c.i >= len(c.data) }

// modelSeq is the independent model of one sequence: per position, the
// Layers*2*KVDim floats last written there ([layer][K, V][KVDim]). A
// position's slice is never mutated after it is stored, so forks can share it.
type modelSeq struct {
	s   *Seq
	pos [][]float32
}

// opsRun drives a pool through random operations and checks it against the
// model after each one.
type opsRun struct {
	t     testing.TB
	c     chooser
	p     *Pool
	live  []*modelSeq
	freed []*Seq
	next  float32 // source of unique values to write
	hits  *pathHits
}

// pathHits counts how often the interesting paths were taken, so the property
// test can insist that it exercised them.
type pathHits struct{ full, cow, fresh, inPlace, rewrite, forks int }

func runOps(t testing.TB, c chooser, maxOps int, hits *pathHits) {
	blockSizes := []int{1, 2, 3, 4, 5, 8, 16}
	cfg := Config{
		Layers:    1 + c.intn(3),
		KVDim:     1 + c.intn(4),
		BlockSize: blockSizes[c.intn(len(blockSizes))],
		MaxBlocks: 1 + c.intn(40),
	}
	if c.intn(4) == 0 {
		cfg.MaxBlocks = 1 << 20 // effectively unlimited
	}
	switch c.intn(3) {
	case 0:
		cfg.HeadDim = 1 // one head per dimension
	case 1:
		if cfg.KVDim%2 == 0 {
			cfg.HeadDim = 2
		}
	} // else one head of KVDim
	if c.intn(2) == 0 {
		cfg.DType = F16
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &opsRun{t: t, c: c, p: p, hits: hits}
	for range maxOps {
		if c.done() {
			break
		}
		r.step()
		r.verify()
	}
	for _, m := range r.live {
		p.Free(m.s)
	}
	r.live = nil
	st := p.Stats()
	if st.BlocksInUse != 0 || st.SharedBlocks != 0 || st.LogicalBlocks != 0 || st.FreeBlocks != st.CapBlocks {
		t.Fatalf("leak after freeing everything: %+v", st)
	}
	checkInvariants(t, p, nil)
}

func (r *opsRun) pick() *modelSeq { return r.live[r.c.intn(len(r.live))] }

// write fills every layer of position pos of m with fresh values, in the pool
// and in the model.
func (r *opsRun) write(m *modelSeq, pos int) {
	p := r.p
	vals := make([]float32, p.layers*2*p.kvDim)
	for i := range vals {
		r.next++
		vals[i] = r.next
		if p.DType() == F16 {
			vals[i] = float32(int(r.next) % 2048) // exact in binary16
		}
	}
	writeSlot(p, m.s, pos, vals)
	m.pos[pos] = vals
}

func (r *opsRun) step() {
	t, c, p := r.t, r.c, r.p
	op := c.intn(100)
	if len(r.live) == 0 {
		op = 0
	}
	switch {
	case op < 8: // NewSeq
		if len(r.live) < 24 {
			r.live = append(r.live, &modelSeq{s: p.NewSeq()})
		}
	case op < 22: // Fork
		if len(r.live) < 24 {
			m := r.pick()
			r.live = append(r.live, &modelSeq{s: p.Fork(m.s), pos: slices.Clone(m.pos)})
			r.hits.forks++
		}
	case op < 65: // Append one or a few positions
		m := r.pick()
		for range 1 + c.intn(3) {
			r.append(m)
		}
	case op < 77: // Truncate
		m := r.pick()
		n := c.intn(m.s.Len() + 1)
		if c.intn(10) == 0 { // out of range: an error and no change
			n = m.s.Len() + 1 + c.intn(3)
			if c.intn(2) == 0 {
				n = -1 - c.intn(3)
			}
			before := p.Stats()
			if err := p.Truncate(m.s, n); err == nil || p.Stats() != before {
				t.Fatalf("Truncate(%d) of %d positions = %v", n, m.s.Len(), err)
			}
			return
		}
		// The positions given back hold NaN (where they may be
		// written), and so do the blocks released: stale data that the
		// next owner of a slot must never see before writing it.
		for pos := n; pos < m.s.Len(); pos++ {
			if p.Owned(m.s, pos) {
				writeNaN(p, m.s, pos)
			}
		}
		if err := p.Truncate(m.s, n); err != nil {
			t.Fatalf("Truncate(%d) of %d positions: %v", n, m.s.Len(), err)
		}
		poisonFree(p)
		m.pos = m.pos[:n]
	case op < 87: // Free, sometimes a second time, and use after free
		i := c.intn(len(r.live))
		s := r.live[i].s
		p.Free(s)
		poisonFree(p)
		r.live = slices.Delete(r.live, i, i+1)
		r.freed = append(r.freed, s)
		if c.intn(3) == 0 {
			before := p.Stats()
			f := r.freed[c.intn(len(r.freed))]
			p.Free(f)
			if _, err := p.Append(f); !errors.Is(err, ErrSeqFreed) {
				t.Fatalf("Append after Free = %v", err)
			}
			if p.Stats() != before || f.Len() != 0 {
				t.Fatalf("operations on a freed sequence changed the pool")
			}
		}
	default: // rewrite an owned position, as a forward step could
		m := r.pick()
		if m.s.Len() == 0 {
			return
		}
		pos := c.intn(m.s.Len())
		if p.Owned(m.s, pos) {
			r.write(m, pos)
			r.hits.rewrite++
		}
	}
}

func (r *opsRun) append(m *modelSeq) {
	t, p := r.t, r.p
	before := p.Stats()
	need := p.AppendNeedsBlock(m.s)
	table := slices.Clone(m.s.table)
	n := m.s.Len()
	pos, err := p.Append(m.s)
	if err != nil {
		if !errors.Is(err, ErrCacheFull) || !need || before.FreeBlocks != 0 {
			t.Fatalf("Append = %v (needs block %v, %+v)", err, need, before)
		}
		if m.s.Len() != n || !slices.Equal(m.s.table, table) || p.Stats() != before {
			t.Fatalf("failed Append changed the sequence or the pool")
		}
		r.hits.full++
		return
	}
	after := p.Stats()
	cow := need && n%p.blockSize != 0
	if pos != n || m.s.Len() != n+1 ||
		after.BlocksInUse-before.BlocksInUse != b2i(need) ||
		after.CopyOnWrites-before.CopyOnWrites != uint64(b2i(cow)) {
		t.Fatalf("Append at %d: pos %d, needs block %v, before %+v, after %+v", n, pos, need, before, after)
	}
	if !p.Owned(m.s, pos) {
		t.Fatalf("appended position %d is not owned", pos)
	}
	// The new position holds stale data until written; write is next, and
	// verify then checks that it reads back exactly.
	switch {
	case cow:
		r.hits.cow++
	case need:
		r.hits.fresh++
	default:
		r.hits.inPlace++
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

// verify compares every position of every live sequence with the model,
// through the shadow storage, which performed the copies the pool queued.
func (r *opsRun) verify() {
	t, p := r.t, r.p
	seqs := make([]*Seq, len(r.live))
	for i, m := range r.live {
		seqs[i] = m.s
		if m.s.Len() != len(m.pos) {
			t.Fatalf("sequence %d: Len %d, model %d", i, m.s.Len(), len(m.pos))
		}
		for pos, want := range m.pos {
			if got := readSlot(p, m.s, pos); !slices.Equal(got, want) {
				t.Fatalf("sequence %d position %d: %v, want %v", i, pos, got, want)
			}
		}
	}
	checkInvariants(t, p, seqs)
}

// TestRandomOps runs random operation sequences on random trees with random
// pool caps against the model.
func TestRandomOps(t *testing.T) {
	trials, ops := 50, 500
	if testing.Short() {
		trials = 8
	}
	var hits pathHits
	for seed := range uint64(trials) {
		runOps(t, randChooser{rand.New(rand.NewPCG(seed, 0x6b76636163686521))}, ops, &hits)
	}
	t.Logf("%d ops: %+v", trials*ops, hits)
	if hits.full < 50 || hits.cow < 50 || hits.fresh < 50 || hits.inPlace < 50 || hits.rewrite < 50 || hits.forks < 50 {
		t.Errorf("some paths were barely exercised: %+v", hits)
	}
}

// FuzzOps interprets the input as an operation sequence.
func FuzzOps(f *testing.F) {
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
	f.Fuzz(func(t *testing.T, data []byte) {
		runOps(t, &byteChooser{data: data}, 2000, new(pathHits))
	})
}
