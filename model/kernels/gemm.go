package kernels

import "fmt"

// Gemm computes C = A B, or C += A B with accumulate, for C of m x n
// (row-major, row stride ldc), B of k x n (row-major, row stride ldb) and
// A of m x k read through two strides: A[i][p] = a[i*as + p*ak]. With
// as = k, ak = 1 A is row-major; with as = 1, ak = m it is the transpose
// of a row-major k x m matrix, so that the three products of a linear
// layer's training (x W^T with W^T made once, dy W, and dy^T x) need no
// transposed copy of the activations.
//
// Unlike MatMul, which is built for a few activation rows against large
// weights (decode), Gemm is built for many rows on both sides (training
// batches): register tiles of up to 6 rows of C by 16 columns, each step
// one row of B against broadcast values of A, over blocks of k that keep
// the rows of B in the cache. Rows of C are split across the default
// pool's threads.
func Gemm(m, n, k int, a []float32, as, ak int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if m < 0 || n < 0 || k < 0 || as < 0 || ak < 0 || ldb < n || ldc < n {
		panic(fmt.Sprintf("kernels: Gemm of %dx%dx%d with strides %d, %d, %d, %d", m, n, k, as, ak, ldb, ldc))
	}
	if m == 0 || n == 0 {
		return
	}
	if k > 0 && (len(a) <= (m-1)*as+(k-1)*ak || len(b) < (k-1)*ldb+n) || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("kernels: Gemm of %dx%dx%d: A %d, B %d, C %d values", m, n, k, len(a), len(b), len(c)))
	}
	blocks := (m + gemmMR - 1) / gemmMR
	run := func(lo, hi int) {
		gemmRows(lo*gemmMR, min(m, hi*gemmMR), n, k, a, as, ak, b, ldb, c, ldc, accumulate)
	}
	if 2*m*n*k < parallelWork {
		run(0, blocks)
		return
	}
	Parallel(blocks, run)
}

// gemmMR and gemmKC are the tile height and the depth of a block of k.
const (
	gemmMR = 6
	gemmKC = 256
)

// gemmRows computes rows [i0, i1) of C.
func gemmRows(i0, i1, n, k int, a []float32, as, ak int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if k == 0 {
		if !accumulate {
			for i := i0; i < i1; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	tiled := gemmTiles() && n >= 16
	n16 := n &^ 15
	if !tiled {
		n16 = 0
	}
	for p0 := 0; p0 < k; p0 += gemmKC {
		kc := min(gemmKC, k-p0)
		acc := accumulate || p0 > 0
		for i := i0; i < i1; i += gemmMR {
			mr := min(gemmMR, i1-i)
			if tiled {
				gemmTileRow(mr, a[i*as+p0*ak:], as, ak, b[p0*ldb:], ldb, c[i*ldc:], ldc, n16, kc, acc)
			}
			if n16 < n {
				gemmGo(mr, n16, n, kc, a[i*as+p0*ak:], as, ak, b[p0*ldb:], ldb, c[i*ldc:], ldc, acc)
			}
		}
	}
}

// gemmGo computes columns [j0, j1) of an mr-row block of C over kc steps
// in pure Go.
func gemmGo(mr, j0, j1, kc int, a []float32, as, ak int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for i := 0; i < mr; i++ {
		ci := c[i*ldc+j0 : i*ldc+j1]
		if !acc {
			clear(ci)
		}
		for p := 0; p < kc; p++ {
			av := a[i*as+p*ak]
			bp := b[p*ldb+j0 : p*ldb+j1]
			for j, bv := range bp {
				ci[j] += av * bv
			}
		}
	}
}
