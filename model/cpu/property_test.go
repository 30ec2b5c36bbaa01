package cpu

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/kvcache/kvcachetest"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// storageStore runs the shared operation machine on a Cache, with the
// storage's own operation (sealing blocks, as a forward step does) and
// checks through both the per-position and the per-block accessors.
type storageStore struct{ *Pool }

func openStorage(cfg kvcache.Config) (kvcachetest.Store, error) {
	pool, err := kvcache.New(cfg)
	if err != nil {
		return nil, err
	}
	return storageStore{NewCache(pool)}, nil
}

func (p storageStore) Write(s *Seq, pos int, vals []float32) {
	d := p.kvDim
	for l := range p.layers {
		p.WriteKV(s, l, pos, vals[2*l*d:(2*l+1)*d], vals[(2*l+1)*d:(2*l+2)*d])
	}
}

func (p storageStore) PoisonFree() { poisonFree(p.Pool) }

// Op seals some full owned blocks of s, as a forward step does.
func (p storageStore) Op(_ testing.TB, c kvcachetest.Chooser, s *Seq, hits kvcachetest.Hits) {
	for i := range s.Len() / p.blockSize {
		if !p.Owned(s, i*p.blockSize) || c.Intn(2) == 0 {
			continue
		}
		for l := range p.layers {
			for h := range p.heads {
				if c.Intn(4) != 0 {
					p.Seal(s, l, i, h)
					hits["seals"]++
				}
			}
		}
	}
}

// Appended counts appends into a sealed block.
func (p storageStore) Appended(s *Seq, pos int, cow bool, hits kvcachetest.Hits) {
	if p.KeySealed(s, 0, pos/p.blockSize, 0) {
		if cow {
			hits["cowSealed"]++
		}
		hits["appendSealed"]++
	}
}

// Check compares every layer of every position of every live sequence with
// the model, through both the per-position and the per-block accessors.
func (sp storageStore) Check(t testing.TB, live []*Seq, want [][][]float32) {
	t.Helper()
	p := sp.Pool
	storage := map[int]unsafe.Pointer{} // BlockID -> layer 0 key storage
	for i, s := range live {
		for b := range p.Blocks(s) {
			id, ptr := p.BlockID(s, b), keyStorage(p, s, b)
			if q, ok := storage[id]; ok && q != ptr {
				t.Fatalf("sequence %d block %d: id %d names two storages", i, b, id)
			}
			storage[id] = ptr
		}
		d, bs := p.kvDim, p.blockSize
		key, val := make([]float32, d), make([]float32, d)
		for l := range p.layers {
			for pos, w := range want[i] {
				p.ReadK(s, l, pos, key)
				p.ReadV(s, l, pos, val)
				if !slices.Equal(key, w[2*l*d:(2*l+1)*d]) || !slices.Equal(val, w[(2*l+1)*d:(2*l+2)*d]) {
					t.Fatalf("sequence %d layer %d position %d: K %v V %v, want %v", i, l, pos, key, val, w)
				}
			}
			for b := range p.Blocks(s) {
				kb, vb := blocksF32(p, s, l, b)
				n := min(bs, s.Len()-b*bs)
				if len(kb) != bs*d || len(vb) != bs*d {
					t.Fatalf("sequence %d block %d: key length %d, value length %d", i, b, len(kb), len(vb))
				}
				hd := p.headDim
				for j := range n {
					w := want[i][b*bs+j]
					for e := range d {
						h, dd := e/hd, e%hd
						run := kb[h*hd*bs : (h+1)*hd*bs]
						if p.KeySealed(s, l, b, h) { // [HeadDim][slot]
							key[e] = run[dd*bs+j]
						} else { // [slot][HeadDim]
							key[e] = run[j*hd+dd]
						}
					}
					for e := range d {
						h, dd := e/hd, e%hd
						val[e] = vb[h*hd*bs+j*hd+dd] // [kv head][slot][HeadDim]
					}
					if !slices.Equal(key, w[2*l*d:(2*l+1)*d]) || !slices.Equal(val, w[(2*l+1)*d:(2*l+2)*d]) {
						t.Fatalf("sequence %d layer %d block %d slot %d differs from the model", i, l, b, j)
					}
				}
			}
		}
	}
	ids := map[unsafe.Pointer]int{}
	for id, ptr := range storage {
		if other, ok := ids[ptr]; ok {
			t.Fatalf("ids %d and %d name the same storage", id, other)
		}
		ids[ptr] = id
	}
	checkInvariants(t, p, live)
}

// keyStorage is the address of layer 0's keys in block b of s.
func keyStorage(p *Pool, s *Seq, b int) unsafe.Pointer {
	if p.DType() == F16 {
		return unsafe.Pointer(&p.KeyBlockF16(s, 0, b)[0])
	}
	return unsafe.Pointer(&p.KeyBlock(s, 0, b)[0])
}

// blocksF32 returns copies of KeyBlock and ValueBlock widened to float32
// in an F16 pool, the blocks themselves in an F32 pool.
func blocksF32(p *Pool, s *Seq, l, b int) (kb, vb []float32) {
	if p.DType() == F32 {
		return p.KeyBlock(s, l, b), p.ValueBlock(s, l, b)
	}
	k, v := p.KeyBlockF16(s, l, b), p.ValueBlockF16(s, l, b)
	kb, vb = make([]float32, len(k)), make([]float32, len(v))
	kernels.FromHalf(kb, k)
	kernels.FromHalf(vb, v)
	return kb, vb
}

// TestRandomStorageOps runs random operation sequences on random trees with random
// pool caps against the model.
func TestRandomStorageOps(t *testing.T) {
	trials, ops := 50, 500
	if testing.Short() {
		trials = 8
	}
	hits := kvcachetest.Hits{}
	for seed := range uint64(trials) {
		kvcachetest.Run(t, kvcachetest.Rand(seed), ops, hits, openStorage)
	}
	t.Logf("%d ops: %v", trials*ops, hits)
	few := hits.Barely(50, append(kvcachetest.Common, "seals")...)
	if !testing.Short() { // the paths through sealed partial blocks
		few = append(few, hits.Barely(3, "cowSealed")...)
		few = append(few, hits.Barely(10, "appendSealed")...)
	}
	if len(few) > 0 {
		t.Errorf("some paths were barely exercised (%v): %v", few, hits)
	}
}

// FuzzStorageOps interprets the input as an operation sequence.
func FuzzStorageOps(f *testing.F) {
	kvcachetest.Seeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		kvcachetest.Run(t, kvcachetest.Bytes(data), 2000, kvcachetest.Hits{}, openStorage)
	})
}
