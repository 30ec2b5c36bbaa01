package train

import (
	"github.com/entropix-search/entropix-search/model/kernels"
)

// The three products of a linear layer y = x W^T (W rows x cols) over n
// rows of x, all on kernels.Gemm: the forward product (with W^T made
// first: the weights are small next to a batch), the input gradient
// dx = dy W, and the weight gradient dW = dy^T x, for which Gemm reads dy
// transposed in place.

// mulT sets out (n x rows) = x (n x cols) W^T; wt is scratch of rows*cols
// values.
func mulT(out, x []float32, n int, w []float32, rows, cols int, wt []float32) {
	transpose(wt, w, rows, cols)
	kernels.Gemm(n, rows, cols, x, cols, 1, wt, rows, out, rows, false)
}

// mulN sets out (n x cols) = dy (n x rows) W, with W rows x cols, or adds
// the product to out with acc.
func mulN(out, dy []float32, n int, w []float32, rows, cols int, acc bool) {
	kernels.Gemm(n, cols, rows, dy, rows, 1, w, cols, out, cols, acc)
}

// mulTN sets out (rows x cols) = dy^T x, with dy n x rows and x n x cols.
func mulTN(out, dy []float32, n, rows int, x []float32, cols int) {
	kernels.Gemm(rows, cols, n, dy, 1, rows, x, cols, out, cols, false)
}

// transpose sets dst (cols x rows) to src (rows x cols) transposed.
func transpose(dst, src []float32, rows, cols int) {
	kernels.Transpose(dst[:rows*cols], src[:rows*cols], rows, cols)
}
