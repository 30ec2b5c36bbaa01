package kvcache

import (
	"fmt"
	"math"
	"sync"
)

// shadow is the storage of a test backend: per block id and slot, the
// values last written there (Layers*2*KVDim floats: [layer][K, V][KVDim]),
// copied on write as the pool decides (TakeCopies), as a backend does.
type shadow struct {
	blocks map[int32][][]float32
}

var (
	shadowMu sync.Mutex
	shadows  = map[*Pool]*shadow{}
)

// storage returns p's shadow storage, with the copies p queued performed.
func storage(p *Pool) *shadow {
	shadowMu.Lock()
	defer shadowMu.Unlock()
	sh := shadows[p]
	if sh == nil {
		sh = &shadow{blocks: map[int32][][]float32{}}
		shadows[p] = sh
	}
	for _, c := range p.TakeCopies(nil) {
		copy(sh.block(p, c.Dst)[:c.Used], sh.block(p, c.Src)[:c.Used])
	}
	return sh
}

func (sh *shadow) block(p *Pool, id int32) [][]float32 {
	b := sh.blocks[id]
	if b == nil {
		b = make([][]float32, p.blockSize)
		sh.blocks[id] = b
	}
	return b
}

// writeSlot stores vals at position pos of s, which must be owned.
func writeSlot(p *Pool, s *Seq, pos int, vals []float32) {
	sh := storage(p)
	if uint(pos) >= uint(s.n) || !p.Owned(s, pos) {
		panic(fmt.Sprintf("kvcache test: write at position %d of %d, owned %v", pos, s.n, p.Owned(s, pos)))
	}
	sh.block(p, s.table[pos/p.blockSize])[pos%p.blockSize] = vals
}

// readSlot returns what position pos of s holds (nil: never written).
func readSlot(p *Pool, s *Seq, pos int) []float32 {
	return storage(p).block(p, s.table[pos/p.blockSize])[pos%p.blockSize]
}

func nanVals(p *Pool) []float32 {
	v := make([]float32, p.layers*2*p.kvDim)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// poisonFree fills every slot of every block on the free list with NaN:
// the stale data a block's earlier owner could leave there, which no
// reader may see.
func poisonFree(p *Pool) {
	sh := storage(p)
	for _, id := range p.free {
		b := sh.block(p, id)
		for j := range b {
			b[j] = nanVals(p)
		}
	}
}

// fill writes recognizable values into every layer of position pos of s.
func fill(p *Pool, s *Seq, pos int, tag float32) {
	v := make([]float32, 0, p.layers*2*p.kvDim)
	for l := range p.layers {
		for j := range p.kvDim {
			v = append(v, tag+float32(l*1000+j))
		}
		for j := range p.kvDim {
			v = append(v, -tag-float32(l*1000+j))
		}
	}
	writeSlot(p, s, pos, v)
}

// hasFill reports whether position pos of s holds what fill wrote with tag.
func hasFill(p *Pool, s *Seq, pos int, tag float32) bool {
	v := readSlot(p, s, pos)
	if len(v) != p.layers*2*p.kvDim {
		return false
	}
	i := 0
	for l := range p.layers {
		for j := range p.kvDim {
			if v[i] != tag+float32(l*1000+j) {
				return false
			}
			i++
		}
		for j := range p.kvDim {
			if v[i] != -tag-float32(l*1000+j) {
				return false
			}
			i++
		}
	}
	return true
}
