package kernels_test

import (
	"fmt"
	"sync/atomic"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// A 2x3 weight matrix applied to a batch of two activation rows: the
// weights are read once for both.
func ExampleMat_MatMul() {
	w, err := kernels.NewF32Mat(2, 3, []float32{
		1, 2, 3, // output 0
		0, 1, 0, // output 1
	})
	if err != nil {
		panic(err)
	}
	x := []float32{
		1, 1, 1, // batch row 0
		4, 5, 6, // batch row 1
	}
	out := make([]float32, 2*2) // out[b*Rows+r]
	w.MatMul(out, x, 2)
	fmt.Println(out)
	// Output: [6 1 32 5]
}

// Parallel splits a loop over the default pool, e.g. attention over
// rows x heads.
func ExampleParallel() {
	const rows, heads = 3, 4
	var done atomic.Int32
	kernels.Parallel(rows*heads, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row, head := i/heads, i%heads
			_, _ = row, head // attend(row, head)
			done.Add(1)
		}
	})
	fmt.Println(done.Load())
	// Output: 12
}
