package cpu

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
)

// The storage tests, moved here from package kvcache with the storage:
// their pool is a Cache over a block manager.
type (
	Pool   = Cache
	Config = kvcache.Config
	Seq    = kvcache.Seq
	DType  = kvcache.ElemType
	Stats  = kvcache.Stats
)

const (
	F32 = kvcache.F32
	F16 = kvcache.F16
)

var ErrCacheFull = kvcache.ErrCacheFull

func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := kvcache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewCache(p)
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

// checkInvariants checks the storage against the manager: a block for
// every block handed out, one sealing flag per layer and head of each, and
// the manager's logical blocks against the live tables.
func checkInvariants(t testing.TB, p *Pool, live []*Seq) {
	t.Helper()
	st := p.Stats()
	if n := len(p.f32) + len(p.f16); n != st.AllocatedBlocks || len(p.f32) > 0 && len(p.f16) > 0 {
		t.Fatalf("%d F32 and %d F16 blocks of storage for %d blocks", len(p.f32), len(p.f16), st.AllocatedBlocks)
	}
	if len(p.sealed) != st.AllocatedBlocks*p.layers*p.heads {
		t.Fatalf("%d sealing flags for %d blocks", len(p.sealed), st.AllocatedBlocks)
	}
	logical := 0
	for _, s := range live {
		logical += p.Blocks(s)
	}
	if live != nil && logical != st.LogicalBlocks {
		t.Fatalf("live tables hold %d blocks, Stats %+v", logical, st)
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}

// poisonFree fills every block on the free list with NaN, keys and
// values of every layer: the stale data a block's earlier owner could
// leave there, which no reader may see.
func poisonFree(p *Pool) {
	for id := range p.f32 {
		if p.Referenced(id) {
			continue
		}
		b := p.f32[id]
		for i := range b {
			b[i] = float32(math.NaN())
		}
	}
	for id := range p.f16 {
		if p.Referenced(id) {
			continue
		}
		if true {
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

func TestStorageMisusePanics(t *testing.T) {
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
		if _, err := kvcache.New(Config{Layers: 1, KVDim: kvDim, HeadDim: hd, MaxBlocks: 1}); err == nil || !strings.Contains(err.Error(), "HeadDim") {
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
}
