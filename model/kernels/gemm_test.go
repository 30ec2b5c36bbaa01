package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemm checks Gemm against a float64 product on every kernel level,
// for row-major and transposed A, with and without accumulation, at sizes
// that are not multiples of the tile and deeper than one block of k.
func TestGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][3]int{{1, 1, 1}, {6, 16, 8}, {7, 17, 3}, {13, 48, 300}, {64, 35, 513}, {5, 130, 1}, {3, 10, 0}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, trans := range []bool{false, true} {
			for _, accum := range []bool{false, true} {
				a := randVec(r, max(1, m*k))
				ldb, ldc := n+3, n+1
				b := randVec(r, max(1, k*ldb))
				as, ak := k, 1
				if trans {
					as, ak = 1, m
				}
				c0 := randVec(r, m*ldc)
				want := make([]float64, m*ldc)
				for i := 0; i < m; i++ {
					for j := 0; j < ldc; j++ {
						want[i*ldc+j] = float64(c0[i*ldc+j])
						if j >= n {
							continue // outside C: untouched
						}
						if !accum {
							want[i*ldc+j] = 0
						}
						for p := 0; p < k; p++ {
							want[i*ldc+j] += float64(a[i*as+p*ak]) * float64(b[p*ldb+j])
						}
					}
				}
				for _, l := range f32Levels() {
					c := append([]float32(nil), c0...)
					withLevels(t, l, q8Level, func() { Gemm(m, n, k, a, as, ak, b, ldb, c, ldc, accum) })
					for i := range c {
						if d := math.Abs(float64(c[i]) - want[i]); d > 1e-4*(1+math.Abs(want[i]))*math.Sqrt(float64(k+1)) {
							t.Fatalf("%v: Gemm %dx%dx%d trans %v accumulate %v: c[%d] = %g, want %g", l, m, n, k, trans, accum, i, c[i], want[i])
						}
					}
				}
			}
		}
	}
}

// BenchmarkGemm times the three products of a linear layer of the arith
// model's size (352 x 128) over a training batch of 8192 rows.
func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, rows, cols = 8192, 352, 128
	x, w, dy := randVec(r, n*cols), randVec(r, rows*cols), randVec(r, n*rows)
	out := make([]float32, n*max(rows, cols))
	for _, c := range []struct {
		name     string
		m, nn, k int
		a        []float32
		as, ak   int
		bm       []float32
		ldb      int
	}{
		{"x.Wt", n, rows, cols, x, cols, 1, w, rows}, // W^T made once: a cols x rows B (here w reused as data)
		{"dy.W", n, cols, rows, dy, rows, 1, w, cols},
		{"dyT.x", rows, cols, n, dy, 1, rows, x, cols},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				Gemm(c.m, c.nn, c.k, c.a, c.as, c.ak, c.bm, c.ldb, out, c.nn, false)
			}
			b.ReportMetric(2*float64(n*rows*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
