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

// BenchmarkPruneBranches measures the structural work of a search step
// that prunes, in a stories110M-shaped pool (12 layers, 12 kv heads of 64;
// 1.1 MiB blocks in F32): forking 16 branches off a 64-position prompt
// (whole blocks, so that no copy on write mixes in), appending 40
// positions to each (three blocks of its own) and freeing them all. The
// forward pass's writes are left out: what the releases cost is the
// pool's bookkeeping, and was the zeroing of the released blocks' used
// slots while the pool zeroed them.
func BenchmarkPruneBranches(b *testing.B) {
	const branches, own, prompt = 16, 40, 64
	for _, dt := range []ElemType{F32, F16} {
		b.Run(dt.String(), func(b *testing.B) {
			cfg := Config{Layers: 12, KVDim: 768, HeadDim: 64, BlockSize: 16, DType: dt, MaxBlocks: 128}
			p := newPool(b, cfg)
			root := benchSeq(b, p, prompt)
			ss := make([]*Seq, branches)
			b.ReportAllocs()
			for b.Loop() {
				for j := range ss {
					ss[j] = p.Fork(root)
					for range own {
						if _, err := p.Append(ss[j]); err != nil {
							b.Fatal(err)
						}
					}
				}
				for _, s := range ss {
					p.Free(s)
				}
			}
		})
	}
}
