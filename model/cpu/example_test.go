package cpu_test

import (
	"errors"
	"fmt"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/cpu"
)

// A prompt of 20 positions is shared by two branches; only the partial last
// block is copied, when a branch first writes into it: the block manager
// decides the copy, the Cache performs it.
func ExampleCache() {
	pool, err := kvcache.New(kvcache.Config{Layers: 2, KVDim: 4, BlockSize: 16, MaxBlocks: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := cpu.NewCache(pool)
	prompt := p.NewSeq()
	for range 20 {
		pos, err := p.Append(prompt)
		if err != nil {
			fmt.Println(err)
			return
		}
		for l := range 2 { // the forward pass writes K and V of every layer
			p.WriteKV(prompt, l, pos, []float32{float32(pos), 0, 0, 0}, []float32{-float32(pos), 0, 0, 0})
		}
	}

	// Block 0 is full: seal it (transpose its keys) for fast attention.
	for l := range 2 {
		p.Seal(prompt, l, 0, 0)
	}
	kb := p.KeyBlock(prompt, 0, 0) // sealed: dimension d of slot j at d*16+j
	fmt.Println("block 0, dimension 0 of slots 0..4:", kb[0:5])

	a, b := p.Fork(prompt), p.Fork(prompt)
	st := p.Stats()
	fmt.Println("after forks: blocks", st.BlocksInUse, "shared", st.SharedBlocks, "private copies would need", st.LogicalBlocks)

	pos, _ := p.Append(a) // copies block 1 (positions 16..19) for a
	p.WriteKV(a, 0, pos, []float32{100, 0, 0, 0}, make([]float32, 4))
	key := make([]float32, 4)
	p.ReadK(prompt, 0, 19, key)
	st = p.Stats()
	fmt.Println("after a appends: blocks", st.BlocksInUse, "copies", st.CopyOnWrites, "prompt:", prompt.Len(), key[0])

	// Block 1 is partial, so staged: slot j's key at j*4.
	kb = p.KeyBlock(a, 0, 1)
	fmt.Println("a's block 1, slot 4:", kb[16:20], "sealed:", p.KeySealed(a, 0, 1, 0))

	p.Free(prompt)
	pos, _ = p.Append(b) // b now owns the original block 1: no copy
	st = p.Stats()
	fmt.Println("after b appends:", pos, "blocks", st.BlocksInUse, "copies", st.CopyOnWrites)

	for {
		if _, err := p.Append(a); errors.Is(err, kvcache.ErrCacheFull) {
			fmt.Println("a stopped at", a.Len(), "positions:", err)
			break
		}
	}
	p.Free(a)
	p.Free(b)
	fmt.Println("in use after Free:", p.Stats().BlocksInUse)
	// Output:
	// block 0, dimension 0 of slots 0..4: [0 1 2 3 4]
	// after forks: blocks 2 shared 2 private copies would need 6
	// after a appends: blocks 3 copies 1 prompt: 20 19
	// a's block 1, slot 4: [100 0 0 0] sealed: false
	// after b appends: 20 blocks 3 copies 1
	// a stopped at 48 positions: kvcache: pool is full: all 4 blocks (1024 bytes each) in use
	// in use after Free: 0
}
