package kvcache

import (
	"fmt"
	"testing"
)

// benchConfig is shaped like stories260K (5 layers, 4 kv heads of 8).
var benchConfig = Config{Layers: 5, KVDim: 32, BlockSize: 16, MaxBlocks: 1 << 14}

func benchSeq(b *testing.B, p *Pool, n int) *Seq {
	s := p.NewSeq()
	for range n {
		if _, err := p.Append(s); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkFork measures Fork+Free of a sequence with a prefix of n
// positions: the cost is the block-table copy and one reference count per
// block, no K/V data.
func BenchmarkFork(b *testing.B) {
	for _, n := range []int{64, 256, 1024, 4096} {
		b.Run(fmt.Sprintf("prefix=%d", n), func(b *testing.B) {
			p := newPool(b, benchConfig)
			s := benchSeq(b, p, n+5) // a partial last block, as after a prompt
			b.ReportAllocs()
			for b.Loop() {
				p.Free(p.Fork(s))
			}
		})
	}
}

// BenchmarkAppend measures reserving a position (a fresh block every
// BlockSize appends, from the free list in steady state).
func BenchmarkAppend(b *testing.B) {
	p := newPool(b, benchConfig)
	s := p.NewSeq()
	b.ReportAllocs()
	for b.Loop() {
		if s.Len() == 4096 {
			if err := p.Truncate(s, 0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := p.Append(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendCopyOnWrite measures a fork inside a block followed by the
// child's first Append, which copies the shared partial block, and Free.
func BenchmarkAppendCopyOnWrite(b *testing.B) {
	p := newPool(b, benchConfig)
	s := benchSeq(b, p, 256+8) // last block half full
	b.ReportAllocs()
	for b.Loop() {
		c := p.Fork(s)
		if _, err := p.Append(c); err != nil {
			b.Fatal(err)
		}
		p.Free(c)
	}
}

// BenchmarkAccessors measures the per-call overhead of the accessors: one
// call per position of K and V and one per block of KeyBlock and ValueBlock,
// over one layer of a 1024-position sequence (2*1024 + 2*64 calls per op).
func BenchmarkAccessors(b *testing.B) {
	p := newPool(b, benchConfig)
	s := benchSeq(b, p, 1024)
	var sum float32
	for b.Loop() {
		for pos := range s.Len() {
			sum += p.K(s, 2, pos)[0] + p.V(s, 2, pos)[1]
		}
		for i := range p.Blocks(s) {
			sum += p.KeyBlock(s, 2, i)[0] + p.ValueBlock(s, 2, i)[1]
		}
	}
	_ = sum
}

// BenchmarkTreeBytes builds a 512-position prompt with N branches of 64
// positions and reports the cache bytes with sharing against one private copy
// per branch (Stats.BytesInUse against Stats.LogicalBytes, root excluded).
func BenchmarkTreeBytes(b *testing.B) {
	for _, n := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("branches=%d", n), func(b *testing.B) {
			var st Stats
			for b.Loop() {
				p := newPool(b, benchConfig)
				root := benchSeq(b, p, 512)
				for range n {
					c := p.Fork(root)
					for range 64 {
						if _, err := p.Append(c); err != nil {
							b.Fatal(err)
						}
					}
				}
				p.Free(root)
				st = p.Stats()
			}
			b.ReportMetric(float64(st.BytesInUse)/(1<<20), "shared-MiB")
			b.ReportMetric(float64(st.LogicalBytes)/(1<<20), "private-MiB")
			b.ReportMetric(float64(st.LogicalBytes)/float64(st.BytesInUse), "saving-x")
		})
	}
}
