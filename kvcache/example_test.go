package kvcache_test

import (
	"errors"
	"fmt"

	"github.com/entropix-search/entropix-search/kvcache"
)

// A prompt of 20 positions is shared by two branches; only the partial last
// block is copied, when a branch first appends into it: the pool decides
// the copy, and a backend (the CPU's, model/cpu) performs it.
func Example() {
	p, err := kvcache.New(kvcache.Config{Layers: 2, KVDim: 4, BlockSize: 16, MaxBlocks: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	prompt := p.NewSeq()
	for range 20 {
		if _, err := p.Append(prompt); err != nil {
			fmt.Println(err)
			return
		}
	}
	a, b := p.Fork(prompt), p.Fork(prompt)
	st := p.Stats()
	fmt.Println("after forks: blocks", st.BlocksInUse, "shared", st.SharedBlocks, "private copies would need", st.LogicalBlocks)
	fmt.Println("blocks a's next append takes:", p.BlocksToAppend(a, 1))

	pos, _ := p.Append(a) // a takes a fresh block in place of block 1
	fmt.Println("a appended at", pos, "copies to perform:", p.TakeCopies(nil))

	p.Free(prompt)
	pos, _ = p.Append(b) // b now owns the original block 1: no copy
	st = p.Stats()
	fmt.Println("after b appends:", pos, "blocks", st.BlocksInUse, "copies", st.CopyOnWrites, p.TakeCopies(nil))

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
	// after forks: blocks 2 shared 2 private copies would need 6
	// blocks a's next append takes: 1
	// a appended at 20 copies to perform: [{1 2 4}]
	// after b appends: 20 blocks 3 copies 1 []
	// a stopped at 48 positions: kvcache: pool is full: all 4 blocks (1024 bytes each) in use
	// in use after Free: 0
}
