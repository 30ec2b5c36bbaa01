//go:build !amd64 || purego

package kernels

import "unsafe"

// Without amd64 assembly (other architectures, or the purego build tag)
// every kernel is the pure-Go one.

func f32Levels() []level { return []level{levelGo} }
func q8Levels() []level  { return []level{levelGo} }

func dot(a, b []float32) float32 { return dotGo(a, b) }

func axpy(a float32, x, y []float32) { axpyGo(a, x, y) }

func f32Rows(out, x, w []float32, n, rows, cols, r0, r1 int) {
	f32RowsGo(out, x, w, n, rows, cols, r0, r1)
}

// hasGFNI: no GFNI tiles here.
var hasGFNI bool

// k16Tiles is whether the 16-row layouts' VNNI tiles run here: never.
const k16Tiles = false

func halfRows(out []float32, m *Mat, x []float32, n, r0, r1 int) {
	halfRowsGo(out, m, x, n, r0, r1)
}

func quantizeQ8Rows(dst []byte, x []float32, n, cols int) { quantizeQ8RowsGo(dst, x, n, cols) }

func q8Rows(out []float32, m *Mat, xq []byte, n, r0, r1 int) { q8RowsGo(out, m, xq, n, r0, r1) }

func softmax(x []float32) { softmaxGo(x) }

func swiGLU(h, g []float32) { swiGLUGo(h, g) }

func dotStrided(out, q, k []float32, stride int) { dotStridedGo(out, q, k, stride) }

func scale(x []float32, a float32) { scaleGo(x, a) }

func softmaxScaled(x []float32, a float32) {
	scaleGo(x, a)
	softmaxGo(x)
}

func normScale(out, x, w []float32, a float32) { normScaleGo(out, x, w, a) }

// The attention kernels, for float32 and F16 keys and values.

func scoresT[E float32 | uint16](out, q []float32, kt []E, bs int) { scoresTGo(out, q, kt, bs) }

func scoresRows[E float32 | uint16](out, q []float32, k []E, stride int) {
	scoresRowsGo(out, q, k, stride)
}

func scoresTMulti[E float32 | uint16](out, q [][]float32, kt []E, bs int) {
	scoresTMultiEach(out, q, kt, bs)
}

func scoresTBlocks[E float32 | uint16](out, q []float32, kt [][]E, bs int) {
	scoresTBlocksEach(out, q, kt, bs)
}

func axpyStrided[E float32 | uint16](y, a []float32, v []E, stride int) {
	axpyStridedGo(y, a, v, stride)
}

func axpyStridedMulti[E float32 | uint16](y, a [][]float32, v []E, stride int) {
	axpyStridedMultiEach(y, a, v, stride)
}

func prefetch(p unsafe.Pointer, rows, rowBytes, stride int) {}

func transpose[E float32 | uint16](dst, src []E, rows, cols int) { transposeGo(dst, src, rows, cols) }

func rope(x, cos, sin []float32, interleaved bool) bool { return false }

func gemmTiles() bool { return false }

func gemmTileRow(mr int, a []float32, as, ak int, b []float32, ldb int, c []float32, ldc, n16, kc int, acc bool) {
	panic("kernels: no Gemm tiles")
}

func q4kRows(out []float32, m *Mat, xq []byte, n, r0, r1 int) { q4kRowsGo(out, m, xq, n, r0, r1) }

func q6kRows(out []float32, m *Mat, xq []byte, n, r0, r1 int) { q6kRowsGo(out, m, xq, n, r0, r1) }

func q5kRows(out []float32, m *Mat, xq []byte, n, r0, r1 int) { q5kRowsGo(out, m, xq, n, r0, r1) }

func q40Rows(out []float32, m *Mat, xq []byte, n, r0, r1 int) { q40RowsGo(out, m, xq, n, r0, r1) }

func quantizeQ8K(dst []byte, x []float32) { quantizeQ8KRow(dst, x) }
