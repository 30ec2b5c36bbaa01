package kvcache

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// checkInvariants recomputes every reference count from the block tables of
// the live sequences and compares it, and the derived counters, with the
// pool's bookkeeping.
func checkInvariants(t testing.TB, p *Pool, live []*Seq) {
	t.Helper()
	allocated := len(p.ref)
	want := make([]int32, allocated)
	logical := 0
	for _, s := range live {
		if s.freed {
			t.Fatalf("live sequence is marked freed")
		}
		if wantBlocks := (s.n + p.blockSize - 1) / p.blockSize; len(s.table) != wantBlocks {
			t.Fatalf("sequence of %d positions has %d blocks, want %d", s.n, len(s.table), wantBlocks)
		}
		for _, id := range s.table {
			want[id]++
		}
		logical += len(s.table)
	}
	shared, inUse := 0, 0
	for id, r := range p.ref {
		if r < 0 {
			t.Fatalf("block %d: negative reference count %d", id, r)
		}
		if r != want[id] {
			t.Fatalf("block %d: reference count %d, live tables hold it %d times", id, r, want[id])
		}
		if r > 1 {
			shared++
		}
		if r > 0 {
			inUse++
		}
	}
	free := slices.Clone(p.free)
	slices.Sort(free)
	if len(slices.Compact(free)) != len(p.free) {
		t.Fatalf("free list has duplicates: %v", p.free)
	}
	for _, id := range p.free {
		if p.ref[id] != 0 {
			t.Fatalf("block %d on the free list has reference count %d", id, p.ref[id])
		}
	}
	st := p.Stats()
	if inUse+len(p.free) != allocated || allocated > p.capBlocks || len(p.ref) != allocated {
		t.Fatalf("in use %d + free %d != allocated %d (cap %d)", inUse, len(p.free), allocated, p.capBlocks)
	}
	if st.BlocksInUse != inUse || st.SharedBlocks != shared || st.LogicalBlocks != logical ||
		st.FreeBlocks != p.capBlocks-inUse || st.BytesInUse != int64(inUse)*st.BytesPerBlock {
		t.Fatalf("Stats %+v, want in use %d, shared %d, logical %d", st, inUse, shared, logical)
	}
}

func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// grow appends n positions to s, filling position i with tag base+i.
func grow(t testing.TB, p *Pool, s *Seq, n int, base float32) {
	t.Helper()
	for range n {
		pos, err := p.Append(s)
		if err != nil {
			t.Fatal(err)
		}
		fill(p, s, pos, base+float32(pos))
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Layers: 0, KVDim: 4, MaxBlocks: 1}, "Layers"},
		{Config{Layers: 1, KVDim: -1, MaxBlocks: 1}, "KVDim"},
		{Config{Layers: 1, KVDim: 4, BlockSize: -2, MaxBlocks: 1}, "BlockSize"},
		{Config{Layers: 1, KVDim: 4}, "MaxBlocks"},
		{Config{Layers: 1, KVDim: 4, MaxBlocks: -1}, "MaxBlocks"},
		{Config{Layers: 1, KVDim: 4, MaxBytes: 100}, "less than one block"},
		{Config{Layers: min(1<<40, math.MaxInt), KVDim: min(1<<40, math.MaxInt), MaxBlocks: 1}, "exceeds"},
		{Config{Layers: 4096, KVDim: 1 << 20, MaxBlocks: 1}, "exceeds"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want error mentioning %q", tc.cfg, err, tc.want)
		}
	}
	p := newPool(t, Config{Layers: 2, KVDim: 8, MaxBytes: 10 << 20})
	st := p.Stats()
	if p.BlockSize() != DefaultBlockSize || st.BytesPerBlock != 2*2*16*8*4 ||
		st.CapBlocks != int((10<<20)/st.BytesPerBlock) || st.AllocatedBlocks != 0 {
		t.Errorf("defaults: BlockSize %d, Stats %+v", p.BlockSize(), st)
	}
	p = newPool(t, Config{Layers: 2, KVDim: 8, MaxBytes: 10 << 20, MaxBlocks: 3})
	if c := p.Config(); c.MaxBlocks != 3 || c.BlockSize != 16 {
		t.Errorf("the smaller cap should win: %+v", c)
	}
}

func TestForkSharesBlocks(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 4, BlockSize: 16, MaxBlocks: 100})
	a := p.NewSeq()
	grow(t, p, a, 40, 0) // 3 blocks, the last partial
	before := p.Stats()
	b := p.Fork(a)
	st := p.Stats()
	if b.Len() != 40 || p.Blocks(b) != 3 {
		t.Fatalf("fork: Len %d, Blocks %d", b.Len(), p.Blocks(b))
	}
	if st.BlocksInUse != 3 || st.SharedBlocks != 3 || st.BytesInUse != before.BytesInUse ||
		st.LogicalBlocks != 6 || st.Forks != 1 || st.CopyOnWrites != 0 {
		t.Fatalf("after fork: %+v", st)
	}
	for i := range p.Blocks(a) {
		if p.BlockID(a, i) != p.BlockID(b, i) {
			t.Errorf("block %d is not shared", i)
		}
	}
	for pos := range 40 {
		if p.Owned(a, pos) || p.Owned(b, pos) {
			t.Fatalf("position %d reported owned while shared", pos)
		}
	}
	checkInvariants(t, p, []*Seq{a, b})
}

func TestAppendAfterForkInPartialBlockCopiesOne(t *testing.T) {
	p := newPool(t, Config{Layers: 3, KVDim: 5, BlockSize: 8, MaxBlocks: 100})
	a := p.NewSeq()
	grow(t, p, a, 20, 0) // blocks of 8, 8, 4
	b := p.Fork(a)

	pos, err := p.Append(b)
	if err != nil || pos != 20 {
		t.Fatalf("Append = %d, %v", pos, err)
	}
	fill(p, b, pos, 5000)
	st := p.Stats()
	if st.CopyOnWrites != 1 || st.BlocksInUse != 4 || st.SharedBlocks != 2 {
		t.Fatalf("after child append: %+v", st)
	}
	if !p.Owned(b, 16) || !p.Owned(b, 20) || p.Owned(b, 15) || !p.Owned(a, 16) || p.Owned(a, 0) {
		t.Errorf("ownership after copy on write is wrong")
	}
	for pos := range 20 {
		if !hasFill(p, a, pos, float32(pos)) || !hasFill(p, b, pos, float32(pos)) {
			t.Fatalf("position %d lost its data", pos)
		}
	}
	if a.Len() != 20 {
		t.Fatalf("parent length changed to %d", a.Len())
	}

	// The parent now owns the original last block: its append copies nothing
	// and does not disturb the child's position 20.
	pos, err = p.Append(a)
	if err != nil || pos != 20 {
		t.Fatalf("parent Append = %d, %v", pos, err)
	}
	fill(p, a, pos, 7000)
	if st := p.Stats(); st.CopyOnWrites != 1 || st.BlocksInUse != 4 {
		t.Fatalf("after parent append: %+v", st)
	}
	if !hasFill(p, b, 20, 5000) || !hasFill(p, a, 20, 7000) {
		t.Fatal("positions 20 of parent and child are not independent")
	}
	checkInvariants(t, p, []*Seq{a, b})
}

func TestAppendAtBlockBoundaryCopiesNothing(t *testing.T) {
	p := newPool(t, Config{Layers: 1, KVDim: 3, BlockSize: 4, MaxBlocks: 100})
	a := p.NewSeq()
	grow(t, p, a, 8, 0)
	b := p.Fork(a)
	grow(t, p, a, 3, 100)
	grow(t, p, b, 3, 200)
	st := p.Stats()
	if st.CopyOnWrites != 0 || st.BlocksInUse != 4 || st.SharedBlocks != 2 {
		t.Fatalf("%+v", st)
	}
	for pos := range 11 {
		wa, wb := float32(pos), float32(pos)
		if pos >= 8 {
			wa, wb = 100+wa, 200+wb
		}
		if !hasFill(p, a, pos, wa) || !hasFill(p, b, pos, wb) {
			t.Fatalf("position %d has wrong data", pos)
		}
	}
	checkInvariants(t, p, []*Seq{a, b})
}

func TestTruncateThenAppendCopiesShared(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 2, BlockSize: 16, MaxBlocks: 100})
	a := p.NewSeq()
	grow(t, p, a, 32, 0)
	b := p.Fork(a)
	if err := p.Truncate(b, 20); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 20 || p.Blocks(b) != 2 || p.Stats().SharedBlocks != 2 {
		t.Fatalf("after Truncate: Len %d, Blocks %d, %+v", b.Len(), p.Blocks(b), p.Stats())
	}
	pos, err := p.Append(b)
	if err != nil || pos != 20 {
		t.Fatalf("Append = %d, %v", pos, err)
	}
	fill(p, b, pos, 900)
	if st := p.Stats(); st.CopyOnWrites != 1 || st.BlocksInUse != 3 {
		t.Fatalf("%+v", st)
	}
	if !hasFill(p, a, 20, 20) || !hasFill(p, b, 20, 900) || !hasFill(p, b, 19, 19) {
		t.Fatal("copy on write after Truncate mixed up data")
	}
	// Truncating to a block boundary releases the blocks past it.
	if err := p.Truncate(b, 16); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.BlocksInUse != 2 || st.SharedBlocks != 1 || p.Blocks(b) != 1 {
		t.Fatalf("after Truncate(16): %+v", st)
	}
	for _, n := range []int{-1, 17} {
		if err := p.Truncate(b, n); err == nil || b.Len() != 16 {
			t.Errorf("Truncate(%d) = %v, Len %d", n, err, b.Len())
		}
	}
	checkInvariants(t, p, []*Seq{a, b})
}

func TestFreeReturnsEverything(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 4, BlockSize: 4, MaxBlocks: 64})
	root := p.NewSeq()
	grow(t, p, root, 10, 0)
	seqs := []*Seq{root}
	for i := range 5 {
		c := p.Fork(seqs[i/2])
		grow(t, p, c, i+1, float32(100*i))
		seqs = append(seqs, c)
	}
	checkInvariants(t, p, seqs)
	allocated := p.Stats().AllocatedBlocks
	for _, s := range seqs {
		p.Free(s)
		p.Free(s) // idempotent
	}
	st := p.Stats()
	if st.BlocksInUse != 0 || st.SharedBlocks != 0 || st.LogicalBlocks != 0 || st.FreeBlocks != 64 ||
		st.AllocatedBlocks != allocated {
		t.Fatalf("after freeing all: %+v", st)
	}
	checkInvariants(t, p, nil)
	// Freed storage is reused as it is (stale, here NaN), and every
	// position reads back exactly what was written there.
	poisonFree(p)
	s := p.NewSeq()
	for range allocated * 4 {
		pos, err := p.Append(s)
		if err != nil {
			t.Fatal(err)
		}
		fill(p, s, pos, float32(100*pos))
		for q := range pos + 1 {
			if !hasFill(p, s, q, float32(100*q)) {
				t.Fatalf("after appending position %d: position %d reads back wrong", pos, q)
			}
		}
	}
	if st := p.Stats(); st.AllocatedBlocks != allocated {
		t.Fatalf("free blocks were not reused: %+v", st)
	}
	checkInvariants(t, p, []*Seq{s})
}

func TestCacheFull(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 3, BlockSize: 4, MaxBlocks: 3})
	a := p.NewSeq()
	grow(t, p, a, 10, 0) // 3 blocks, the last partial: the pool is full
	b := p.Fork(a)
	before := p.Stats()
	table := slices.Clone(b.table)
	if !p.AppendNeedsBlock(b) {
		t.Fatal("AppendNeedsBlock = false for a shared partial block")
	}
	_, err := p.Append(b) // needs a copy of the shared last block
	if !errors.Is(err, ErrCacheFull) {
		t.Fatalf("Append on a full pool = %v, want ErrCacheFull", err)
	}
	if b.Len() != 10 || !slices.Equal(b.table, table) || p.Stats() != before {
		t.Fatalf("failed Append changed state: Len %d, table %v, %+v", b.Len(), b.table, p.Stats())
	}
	checkInvariants(t, p, []*Seq{a, b})

	// Dropping a's reference to the last block makes b its sole owner, so b
	// can append in place without a new block.
	if err := p.Truncate(a, 8); err != nil {
		t.Fatal(err)
	}
	if p.AppendNeedsBlock(b) {
		t.Fatal("AppendNeedsBlock = true for an owned partial block")
	}
	grow(t, p, b, 2, 50)
	if _, err := p.Append(b); !errors.Is(err, ErrCacheFull) { // b's last block is full now
		t.Fatalf("Append = %v, want ErrCacheFull", err)
	}
	if _, err := p.Append(a); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("Append = %v, want ErrCacheFull", err)
	}
	for pos := range 10 {
		if !hasFill(p, b, pos, float32(pos)) {
			t.Fatalf("position %d of b corrupted", pos)
		}
	}
	if st := p.Stats(); st.CopyOnWrites != 0 || st.BlocksInUse != 3 || st.FreeBlocks != 0 {
		t.Fatalf("%+v", st)
	}
	checkInvariants(t, p, []*Seq{a, b})
	p.Free(b)
	grow(t, p, a, 4, 0)
	checkInvariants(t, p, []*Seq{a})
}

func TestFreedSeq(t *testing.T) {
	p := newPool(t, Config{Layers: 1, KVDim: 1, BlockSize: 2, MaxBlocks: 8})
	s := p.NewSeq()
	grow(t, p, s, 3, 0)
	p.Free(s)
	p.Free(s)
	if s.Len() != 0 || p.Blocks(s) != 0 || p.Owned(s, 0) || p.AppendNeedsBlock(s) {
		t.Fatal("freed sequence is not empty")
	}
	if _, err := p.Append(s); !errors.Is(err, ErrSeqFreed) {
		t.Fatalf("Append to freed = %v", err)
	}
	if err := p.Truncate(s, 0); err != nil {
		t.Fatalf("Truncate(freed, 0) = %v", err)
	}
	if err := p.Truncate(s, 1); err == nil {
		t.Fatal("Truncate(freed, 1) succeeded")
	}
	c := p.Fork(s)
	if _, err := p.Append(c); !errors.Is(err, ErrSeqFreed) {
		t.Fatalf("Append to fork of freed = %v", err)
	}
	checkInvariants(t, p, nil)
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", name)
		}
	}()
	f()
}

func TestMisusePanics(t *testing.T) {
	cfg := Config{Layers: 2, KVDim: 4, BlockSize: 4, MaxBlocks: 8}
	p, q := newPool(t, cfg), newPool(t, cfg)
	s := p.NewSeq()
	grow(t, p, s, 5, 0)
	mustPanic(t, "Fork from another pool", func() { q.Fork(s) })
	mustPanic(t, "Free from another pool", func() { q.Free(s) })
	mustPanic(t, "Append nil", func() { p.Append(nil) })
	mustPanic(t, "BlockID past end", func() { p.BlockID(s, 2) })
	mustPanic(t, "BlockID from another pool", func() { q.BlockID(s, 0) })
	if q.Owned(s, 0) {
		t.Error("Owned is true for another pool's sequence")
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 8, BlockSize: 16, MaxBlocks: 8})
	s := p.NewSeq()
	grow(t, p, s, 40, 0)
	// Steady-state Append/Truncate reuse blocks and table capacity.
	allocs := testing.AllocsPerRun(100, func() {
		for range 40 {
			if _, err := p.Append(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Truncate(s, 40); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("steady-state Append allocates %v times per run", allocs)
	}
}

// TestCopiesAndBlocksToAppend checks the copies on write Append queues for
// the backend, in order, and BlocksToAppend's count against what appends
// take.
func TestCopiesAndBlocksToAppend(t *testing.T) {
	p := newPool(t, Config{Layers: 1, KVDim: 2, BlockSize: 4, MaxBlocks: 64})
	a := p.NewSeq()
	for range 6 {
		if _, err := p.Append(a); err != nil {
			t.Fatal(err)
		}
	}
	if c := p.TakeCopies(nil); len(c) != 0 {
		t.Fatalf("appends to an unshared sequence queued copies %v", c)
	}
	b, c := p.Fork(a), p.Fork(a)
	for _, n := range []int{0, 1, 2, 3, 6, 7} {
		// 6 positions: block 1 partial and shared.
		want := map[int]int{0: 0, 1: 1, 2: 1, 3: 2, 6: 2, 7: 3}[n]
		if got := p.BlocksToAppend(b, n); got != want {
			t.Errorf("BlocksToAppend(6 positions, shared, %d) = %d, want %d", n, got, want)
		}
	}
	src := int32(p.BlockID(a, 1))
	if _, err := p.Append(b); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(c); err != nil {
		t.Fatal(err)
	}
	got := p.TakeCopies(nil)
	want := []Copy{{Src: src, Dst: int32(p.BlockID(b, 1)), Used: 2}, {Src: src, Dst: int32(p.BlockID(c, 1)), Used: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("copies %v, want %v", got, want)
	}
	if again := p.TakeCopies(nil); len(again) != 0 {
		t.Fatalf("copies taken twice: %v", again)
	}
	// a owns its block 1 again: no copy.
	if n := p.BlocksToAppend(a, 2); n != 0 {
		t.Errorf("BlocksToAppend(owned partial block, 2) = %d, want 0", n)
	}
	if _, err := p.Append(a); err != nil || len(p.TakeCopies(nil)) != 0 {
		t.Fatalf("Append into an owned block: %v, or a copy", err)
	}
	checkInvariants(t, p, []*Seq{a, b, c})
}

// TestTreeFootprint shows the memory saved by sharing: a prompt of 512
// positions with N branches of 64 positions each.
func TestTreeFootprint(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 4, BlockSize: 16, MaxBlocks: 1 << 12})
	root := p.NewSeq()
	grow(t, p, root, 512, 0)
	const n = 16
	for range n {
		grow(t, p, p.Fork(root), 64, 0)
	}
	st := p.Stats()
	if st.BlocksInUse != 32+n*4 || st.LogicalBlocks != 32+n*36 || st.CopyOnWrites != 0 {
		t.Fatalf("%+v", st)
	}
	t.Logf("shared %d bytes, private copies %d bytes (%.1fx)", st.BytesInUse, st.LogicalBytes,
		float64(st.LogicalBytes)/float64(st.BytesInUse))
}

// TestDTypeText: an ElemType reads and writes its name, as in JSON reports.
func TestDTypeText(t *testing.T) {
	for _, d := range []ElemType{F32, F16} {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back ElemType
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("%v: JSON %s read back as %v, %v", d, b, back, err)
		}
	}
	var d ElemType
	if err := json.Unmarshal([]byte(`"q4"`), &d); err == nil {
		t.Error(`"q4" read as a DType`)
	}
}
