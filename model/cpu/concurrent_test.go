package cpu

import (
	"sync"
	"testing"
)

// TestConcurrentForwardStep plays the engine's concurrency model: between
// steps one goroutine reserves a position per branch with Append; during a
// step one goroutine per branch writes the new position in every layer and
// reads all keys/values of its branch (including the prefix it shares with
// the others), while extra goroutines read the shared root. Run with -race.
func TestConcurrentForwardStep(t *testing.T) {
	const (
		layers, kvDim, bs = 3, 8, 4
		headDim           = 4
		prefix, branches  = 10, 6
		steps             = 12
	)
	p := newPool(t, Config{Layers: layers, KVDim: kvDim, HeadDim: headDim, BlockSize: bs, MaxBlocks: 256})
	root := p.NewSeq()
	grow(t, p, root, prefix, 0)
	seqs := make([]*Seq, branches)
	for i := range seqs {
		seqs[i] = p.Fork(root)
		grow(t, p, seqs[i], i, float32(1000*(i+1))) // some branches copy the partial block, some not
	}
	tag := func(branch, pos int) float32 { return float32(100000*(branch+1) + pos) }

	sums := make([]float32, branches+2)
	for range steps {
		positions := make([]int, branches)
		for i, s := range seqs {
			pos, err := p.Append(s)
			if err != nil {
				t.Fatal(err)
			}
			positions[i] = pos
		}
		var wg sync.WaitGroup
		for i, s := range seqs {
			wg.Go(func() {
				pos := positions[i]
				if !p.Owned(s, pos) {
					t.Errorf("branch %d: reserved position %d not owned", i, pos)
					return
				}
				fill(p, s, pos, tag(i, pos))
				if (pos+1)%bs == 0 { // the block is full: seal it
					for l := range layers {
						for h := range kvDim / headDim {
							p.Seal(s, l, pos/bs, h)
						}
					}
				}
				var sum float32 // an attention-like scan over the whole branch
				for l := range layers {
					for b := range p.Blocks(s) {
						for _, f := range p.KeyBlock(s, l, b) {
							sum += f
						}
						for _, f := range p.ValueBlock(s, l, b) {
							sum -= f
						}
					}
				}
				sums[i] += sum
			})
		}
		for r := range 2 {
			wg.Go(func() {
				var sum float32
				key, val := make([]float32, kvDim), make([]float32, kvDim)
				for l := range layers {
					for pos := range root.Len() {
						p.ReadK(root, l, pos, key)
						p.ReadV(root, l, pos, val)
						sum += key[0] + val[kvDim-1]
					}
				}
				sums[branches+r] += sum
			})
		}
		wg.Wait()
	}

	for i, s := range seqs {
		if s.Len() != prefix+i+steps {
			t.Fatalf("branch %d: Len %d", i, s.Len())
		}
		for pos := range s.Len() {
			want := float32(pos)
			switch {
			case pos >= prefix+i:
				want = tag(i, pos)
			case pos >= prefix:
				want = float32(1000*(i+1) + pos)
			}
			if !hasFill(p, s, pos, want) {
				t.Fatalf("branch %d position %d: wrong data", i, pos)
			}
		}
	}
	for pos := range prefix {
		if !hasFill(p, root, pos, float32(pos)) {
			t.Fatalf("root position %d: wrong data", pos)
		}
	}
	checkInvariants(t, p, append(seqs, root))
}
