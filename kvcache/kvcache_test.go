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
	allocated := len(p.f32) + len(p.f16) // one of them is empty
	if len(p.f32) > 0 && len(p.f16) > 0 {
		t.Fatalf("%d F32 and %d F16 blocks in one pool", len(p.f32), len(p.f16))
	}
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
	if len(p.sealed) != allocated*p.layers*p.heads {
		t.Fatalf("%d sealing flags for %d blocks", len(p.sealed), allocated)
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

// poisonFree fills every block on the free list with NaN, keys and
// values of every layer: the stale data a block's earlier owner could
// leave there, which no reader may see.
func poisonFree(p *Pool) {
	for _, id := range p.free {
		if p.dtype == F16 {
			b := p.f16[id]
			for i := range b {
				b[i] = nanF16
			}
		} else {
			b := p.f32[id]
			for i := range b {
				b[i] = float32(math.NaN())
			}
		}
	}
}

// nanF16 is a binary16 quiet NaN.
const nanF16 = 0x7e00

// writeNaN writes NaN keys and values into every layer of position pos of s.
func writeNaN(p *Pool, s *Seq, pos int) {
	nan := make([]float32, p.kvDim)
	for j := range nan {
		nan[j] = float32(math.NaN())
	}
	for l := range p.layers {
		p.WriteKV(s, l, pos, nan, nan)
	}
}

// fill writes recognizable values into every layer of position pos of s.
func fill(p *Pool, s *Seq, pos int, tag float32) {
	k, v := make([]float32, p.kvDim), make([]float32, p.kvDim)
	for l := range p.layers {
		for j := range k {
			k[j] = tag + float32(l*1000+j)
			v[j] = -tag - float32(l*1000+j)
		}
		p.WriteKV(s, l, pos, k, v)
	}
}

// hasFill reports whether position pos of s holds what fill wrote with tag.
func hasFill(p *Pool, s *Seq, pos int, tag float32) bool {
	k, v := make([]float32, p.kvDim), make([]float32, p.kvDim)
	for l := range p.layers {
		p.ReadK(s, l, pos, k)
		p.ReadV(s, l, pos, v)
		for j := range k {
			if k[j] != tag+float32(l*1000+j) || v[j] != -tag-float32(l*1000+j) {
				return false
			}
		}
	}
	return true
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
		{Config{Layers: 1 << 40, KVDim: 1 << 40, MaxBlocks: 1}, "exceeds"},
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
		if &p.KeyBlock(a, 1, i)[0] != &p.KeyBlock(b, 1, i)[0] || p.BlockID(a, i) != p.BlockID(b, i) {
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
	k := make([]float32, 4)
	mustPanic(t, "ReadK from another pool", func() { q.ReadK(s, 0, 0, k) })
	mustPanic(t, "ReadK past Len", func() { p.ReadK(s, 0, 5, k) })
	mustPanic(t, "ReadK short dst", func() { p.ReadK(s, 0, 0, k[:3]) })
	mustPanic(t, "ReadV negative position", func() { p.ReadV(s, 0, -1, k) })
	mustPanic(t, "ReadK bad layer", func() { p.ReadK(s, 2, 0, k) })
	mustPanic(t, "WriteKV past Len", func() { p.WriteKV(s, 0, 5, k, k) })
	mustPanic(t, "WriteKV short value", func() { p.WriteKV(s, 0, 4, k, k[:3]) })
	mustPanic(t, "WriteKV long key", func() { p.WriteKV(s, 0, 4, append(k, 0), k) })
	mustPanic(t, "Seal of a partial block", func() { p.Seal(s, 0, 1, 0) })
	mustPanic(t, "Seal bad head", func() { p.Seal(s, 0, 0, 1) })
	mustPanic(t, "Seal bad layer", func() { p.Seal(s, 2, 0, 0) })
	mustPanic(t, "KeySealed bad head", func() { p.KeySealed(s, 0, 0, -1) })
	mustPanic(t, "KeySealed past end", func() { p.KeySealed(s, 0, 2, 0) })
	f := p.Fork(s)
	mustPanic(t, "WriteKV into a shared block", func() { p.WriteKV(f, 1, 4, k, k) })
	mustPanic(t, "Seal of a shared block", func() { p.Seal(f, 0, 0, 0) })
	p.Free(f)
	mustPanic(t, "KeyBlock past end", func() { p.KeyBlock(s, 0, 2) })
	mustPanic(t, "BlockID past end", func() { p.BlockID(s, 2) })
	mustPanic(t, "BlockID from another pool", func() { q.BlockID(s, 0) })
	mustPanic(t, "ValueBlock bad layer", func() { p.ValueBlock(s, -1, 0) })
	if q.Owned(s, 0) {
		t.Error("Owned is true for another pool's sequence")
	}
}

// keyAt reads dimension d of slot j of kv head h from a KeyBlock view.
func keyAt(p *Pool, s *Seq, l, i, h, d, j int) float32 {
	hd, bs := p.headDim, p.blockSize
	run := p.KeyBlock(s, l, i)[h*hd*bs : (h+1)*hd*bs]
	if p.KeySealed(s, l, i, h) {
		return run[d*bs+j]
	}
	return run[j*hd+d]
}

func TestBlockLayout(t *testing.T) {
	const layers, kvDim, hd, bs = 3, 6, 3, 4
	p := newPool(t, Config{Layers: layers, KVDim: kvDim, HeadDim: hd, BlockSize: bs, MaxBlocks: 8})
	if c := p.Config(); c.HeadDim != hd || c.KVDim != kvDim {
		t.Fatalf("Config() = %+v", c)
	}
	s := p.NewSeq()
	grow(t, p, s, 6, 0)
	// Seal some heads of the full block 0, in some layers.
	p.Seal(s, 0, 0, 0)
	p.Seal(s, 0, 0, 1)
	p.Seal(s, 2, 0, 1)
	p.Seal(s, 2, 0, 1) // again: nothing happens
	key, val := make([]float32, kvDim), make([]float32, kvDim)
	for l := range layers {
		for i, want := range []int{4, 2} {
			kb, vb := p.KeyBlock(s, l, i), p.ValueBlock(s, l, i)
			if len(kb) != bs*kvDim || cap(kb) != len(kb) || len(vb) != bs*kvDim || cap(vb) != len(vb) {
				t.Fatalf("layer %d block %d: key len %d cap %d, value len %d cap %d", l, i, len(kb), cap(kb), len(vb), cap(vb))
			}
			for h := range kvDim / hd {
				sealed := i == 0 && (l == 0 || l == 2 && h == 1)
				if p.KeySealed(s, l, i, h) != sealed {
					t.Fatalf("layer %d block %d head %d: sealed %v", l, i, h, !sealed)
				}
				run := kb[h*hd*bs : (h+1)*hd*bs]
				for j := range want {
					for d := range hd {
						f := float32(i*bs+j) + float32(l*1000+h*hd+d) // what grow wrote
						idx := j*hd + d                               // staged: [slot][HeadDim]
						if sealed {
							idx = d*bs + j // sealed: [HeadDim][slot]
						}
						if run[idx] != f {
							t.Fatalf("layer %d block %d head %d slot %d dim %d: %g, want %g", l, i, h, j, d, run[idx], f)
						}
					}
				}
			}
			for j := range want {
				pos := i*bs + j
				if !hasFill(p, s, pos, float32(pos)) {
					t.Fatalf("layer %d position %d: ReadK/V differ from what was written", l, pos)
				}
				p.ReadV(s, l, pos, val)
				for h := range kvDim / hd {
					if !slices.Equal(vb[h*hd*bs+j*hd:][:hd], val[h*hd:(h+1)*hd]) {
						t.Fatalf("layer %d position %d head %d: value block differs from ReadV", l, pos, h)
					}
				}
			}
		}
	}
	// Rewriting a position of a sealed head goes through the transposed
	// layout.
	fill(p, s, 2, 77)
	if !hasFill(p, s, 2, 77) || keyAt(p, s, 0, 0, 1, 2, 2) != 77+5 {
		t.Fatal("rewrite into a sealed block")
	}
	p.ReadK(s, 0, 3, key)
	if key[0] != 3 {
		t.Fatalf("neighbour of the rewritten slot: %v", key)
	}
	for _, hd := range []int{-1, 4, 7} {
		if _, err := New(Config{Layers: 1, KVDim: kvDim, HeadDim: hd, MaxBlocks: 1}); err == nil || !strings.Contains(err.Error(), "HeadDim") {
			t.Errorf("HeadDim %d: err = %v", hd, err)
		}
	}
}

// TestSealedCopyOnWrite truncates into a sealed shared block and appends:
// the copy keeps the sealed layout, and a write into it lands in that
// layout over the stale slot.
func TestSealedCopyOnWrite(t *testing.T) {
	p := newPool(t, Config{Layers: 2, KVDim: 4, HeadDim: 2, BlockSize: 4, MaxBlocks: 8})
	a := p.NewSeq()
	grow(t, p, a, 6, 0)
	for l := range 2 {
		p.Seal(a, l, 0, 1) // head 0 stays staged
	}
	b := p.Fork(a)
	if err := p.Truncate(b, 2); err != nil {
		t.Fatal(err)
	}
	pos, err := p.Append(b) // copies block 0
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.CopyOnWrites != 1 || p.BlockID(a, 0) == p.BlockID(b, 0) {
		t.Fatalf("no copy: %+v", st)
	}
	if !p.KeySealed(b, 1, 0, 1) || p.KeySealed(b, 1, 0, 0) {
		t.Fatal("the copy lost the sealing")
	}
	for q := range 2 {
		if !hasFill(p, b, q, float32(q)) {
			t.Fatalf("copied position %d differs", q)
		}
	}
	fill(p, b, pos, 50)
	for q := range 6 {
		if !hasFill(p, a, q, float32(q)) {
			t.Fatalf("the original's position %d changed", q)
		}
	}
	if !hasFill(p, b, pos, 50) {
		t.Fatal("write into the sealed copy")
	}
	// NaN in a slot that a Truncate gives back, overwritten after the
	// next Append, in the sealed layout.
	writeNaN(p, b, pos)
	if err := p.Truncate(b, pos); err != nil {
		t.Fatal(err)
	}
	if pos, err = p.Append(b); err != nil || p.Stats().CopyOnWrites != 1 {
		t.Fatalf("Append = %d, %v; %+v", pos, err, p.Stats())
	}
	fill(p, b, pos, 60)
	for q := range pos {
		if !hasFill(p, b, q, float32(q)) {
			t.Fatalf("position %d changed", q)
		}
	}
	if !hasFill(p, b, pos, 60) || keyAt(p, b, 0, 0, 1, 1, pos) != 60+3 {
		t.Fatal("rewrite of a truncated slot in the sealed layout")
	}
	// Reusing a freed block resets its sealing.
	p.Free(a)
	p.Free(b)
	c := p.NewSeq()
	grow(t, p, c, 8, 0)
	for i := range 2 {
		for l := range 2 {
			for h := range 2 {
				if p.KeySealed(c, l, i, h) {
					t.Fatalf("reused block %d layer %d head %d is sealed", i, l, h)
				}
			}
		}
	}
}

func TestAccessorsDoNotAllocate(t *testing.T) {
	for _, dt := range []DType{F32, F16} {
		p := newPool(t, Config{Layers: 2, KVDim: 8, BlockSize: 16, MaxBlocks: 8, DType: dt})
		s := p.NewSeq()
		grow(t, p, s, 40, 0)
		var sum float32
		key, val := make([]float32, 8), make([]float32, 8)
		allocs := testing.AllocsPerRun(100, func() {
			for l := range 2 {
				for i := range p.Blocks(s) {
					if dt == F16 {
						sum += float32(p.KeyBlockF16(s, l, i)[0] + p.ValueBlockF16(s, l, i)[0])
					} else {
						sum += p.KeyBlock(s, l, i)[0] + p.ValueBlock(s, l, i)[0]
					}
				}
				for pos := range s.Len() {
					p.ReadK(s, l, pos, key)
					p.ReadV(s, l, pos, val)
					p.WriteKV(s, l, pos, key, val)
					sum += key[0]
				}
			}
			if p.Owned(s, 3) && p.KeySealed(s, 1, 1, 0) {
				sum++
			}
			p.Seal(s, 1, 0, 0)
		})
		if allocs != 0 {
			t.Errorf("%v: accessors allocate %v times per run", dt, allocs)
		}
	}
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

// TestDTypeText: a DType reads and writes its name, as in JSON reports.
func TestDTypeText(t *testing.T) {
	for _, d := range []DType{F32, F16} {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back DType
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("%v: JSON %s read back as %v, %v", d, b, back, err)
		}
	}
	var d DType
	if err := json.Unmarshal([]byte(`"q4"`), &d); err == nil {
		t.Error(`"q4" read as a DType`)
	}
}
