package cpu

import "testing"

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

// BenchmarkAccessors measures the per-call overhead of the accessors: one
// call per position of WriteKV and V and one per block of KeyBlock and
// ValueBlock, over one layer of a 1024-position sequence (2*1024 + 2*64
// calls per op).
func BenchmarkAccessors(b *testing.B) {
	p := newPool(b, benchConfig)
	s := benchSeq(b, p, 1024)
	var sum float32
	k, v := make([]float32, benchConfig.KVDim), make([]float32, benchConfig.KVDim)
	for b.Loop() {
		for pos := range s.Len() {
			p.WriteKV(s, 2, pos, k, v)
			p.ReadV(s, 2, pos, v)
			sum += v[1]
		}
		for i := range p.Blocks(s) {
			sum += p.KeyBlock(s, 2, i)[0] + p.ValueBlock(s, 2, i)[1]
		}
	}
	_ = sum
}

// BenchmarkWriteKV measures writing one position's keys and values in
// every layer of a stories110M-shaped pool (12 layers, 12 kv heads of 64),
// position after position over 64 sequences, so that the blocks come from
// memory as in a batch of branches: into staged blocks (one contiguous row
// per head and position), as the forward pass writes the block being
// filled, and into sealed blocks, which scatters each head's key over
// HeadDim cache lines, as writing every key transposed would.
func BenchmarkWriteKV(b *testing.B) {
	const seqs, n = 64, 16 * 4
	cfg := Config{Layers: 12, KVDim: 768, HeadDim: 64, BlockSize: 16, MaxBlocks: seqs * n / 16}
	k, v := make([]float32, cfg.KVDim), make([]float32, cfg.KVDim)
	for _, mode := range []string{"staged", "sealed"} {
		b.Run(mode, func(b *testing.B) {
			p := newPool(b, cfg)
			ss := make([]*Seq, seqs)
			for i := range ss {
				ss[i] = benchSeq(b, p, n)
				for blk := range n / 16 {
					for l := range cfg.Layers {
						for h := range 12 {
							if mode == "sealed" {
								p.Seal(ss[i], l, blk, h)
							}
						}
					}
				}
			}
			pos := 0
			for b.Loop() {
				for _, s := range ss {
					for l := range cfg.Layers {
						p.WriteKV(s, l, pos, k, v)
					}
				}
				pos = (pos + 1) % n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*seqs), "ns/position")
		})
	}
}
