package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Dot returns sum a[i]*b[i] over len(a) elements.
func Dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	return dot(a, b[:len(a)])
}

// Axpy computes y += a*x over len(x) elements.
func Axpy(a float32, x, y []float32) {
	if len(x) == 0 {
		return
	}
	axpy(a, x, y[:len(x)])
}

// DotStrided sets out[t] = Dot(q, k[t*stride:][:len(q)]) for every t <
// len(out): one query's attention scores against len(out) cached keys
// stored stride floats apart, in one call (four keys per pass on AVX-512).
func DotStrided(out, q, k []float32, stride int) {
	n, dim := len(out), len(q)
	if n == 0 {
		return
	}
	if stride < 0 || len(k) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: DotStrided of %d keys of %d with stride %d: k has %d", n, dim, stride, len(k)))
	}
	if dim == 0 {
		clear(out)
		return
	}
	dotStrided(out, q, k, stride)
}

// ScoresT sets out[j] = sum_d q[d]*kt[d*bs+j] over d < len(q), for every
// j < len(out) <= bs: one query's attention scores against bs cached keys
// stored transposed, dimension-major (len(q) rows of bs floats, one slot per
// key), as the CPU backend's cache keeps them. Slots from len(out) to bs are not read, so
// they may hold anything. Each q[d] multiplies 16 keys at once, with no
// horizontal sum per key.
//
// The result for a slot depends only on q and that slot's key, never on
// len(out) or bs: a position scores the same whether its block is full.
func ScoresT(out, q, kt []float32, bs int) {
	scoresTChecked("ScoresT", out, q, kt, bs)
}

// ScoresRows sets out[j] = sum_d q[d]*k[j*stride+d] over d < len(q), for
// every j < len(out): one query's scores against keys stored as rows
// stride floats apart (a cache block still being filled), with exactly
// the arithmetic of [ScoresT]: a key's score is bit for bit the same
// whether it is read as a row here or from the transposed block by
// ScoresT.
func ScoresRows(out, q, k []float32, stride int) {
	scoresRowsChecked("ScoresRows", out, q, k, stride)
}

// ScoresTMulti is [ScoresT] for several queries against the same keys:
// out[i][j] = sum_d q[i][d]*kt[d*bs+j] for every i and j < n, where every
// out[i] has the same length n <= bs and every q[i] the same length. Each
// load of kt serves up to four queries (AVX-512), so the attention heads of
// a GQA group, or batch rows whose sequences share a cache block, read the
// block once. out[i] is bit for bit what ScoresT(out[i], q[i], kt, bs)
// computes.
func ScoresTMulti(out, q [][]float32, kt []float32, bs int) {
	scoresTMultiChecked("ScoresTMulti", out, q, kt, bs)
}

// ScoresTBlocks is [ScoresT] for one query against several full blocks:
// out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] for every block b and j < bs, out
// holding len(kt)*bs floats. Each broadcast of a q[d] serves up to four
// blocks (AVX-512). out[b*bs:(b+1)*bs] is bit for bit what
// ScoresT(out[b*bs:(b+1)*bs], q, kt[b], bs) computes.
func ScoresTBlocks(out, q []float32, kt [][]float32, bs int) {
	scoresTBlocksChecked("ScoresTBlocks", out, q, kt, bs)
}

// AxpyStridedMulti is [AxpyStrided] for several weight vectors over the
// same values: y[i] += sum_t a[i][t] * v[t*stride:][:len(y[i])] for every
// i, where every a[i] has the same length and every y[i] the same length.
// Each load of a value row serves up to four sums (AVX-512). y[i] ends bit
// for bit as AxpyStrided(y[i], a[i], v, stride) leaves it. The y[i] must
// not overlap each other.
func AxpyStridedMulti(y, a [][]float32, v []float32, stride int) {
	axpyStridedMultiChecked("AxpyStridedMulti", y, a, v, stride)
}

// AxpyStrided adds a[t] * v[t*stride:][:len(y)] to y for every t < len(a):
// attention's weighted sum of len(a) cached values stored stride floats
// apart, in one call (y stays in registers on AVX-512).
func AxpyStrided(y, a, v []float32, stride int) {
	axpyStridedChecked("AxpyStrided", y, a, v, stride)
}

// RMSNorm writes x / rms(x) * w into out (out may alias x).
func RMSNorm(out, x, w []float32, eps float32) {
	if len(x) == 0 {
		return
	}
	ss := Dot(x, x)
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	normScale(out[:len(x)], x, w[:len(x)], inv)
}

// Softmax turns x into probabilities in place (max-subtracted for stability).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	softmax(x)
}

// SoftmaxScaled sets x[i] *= a and then x to its softmax: Scale then
// Softmax, bit for bit, in one pass over the calls (attention's scores
// times 1/sqrt(head size)).
func SoftmaxScaled(x []float32, a float32) {
	if len(x) == 0 {
		return
	}
	softmaxScaled(x, a)
}

// Scale sets x[i] *= a.
func Scale(x []float32, a float32) {
	if len(x) == 0 {
		return
	}
	scale(x, a)
}

// SwiGLU computes h[i] = silu(h[i]) * g[i] in place.
func SwiGLU(h, g []float32) {
	if len(h) == 0 {
		return
	}
	swiGLU(h, g[:len(h)])
}

// Add computes y += x.
func Add(y, x []float32) {
	Axpy(1, x[:len(y)], y)
}

// The argument checks of the attention kernels, shared by the float32
// ones above and their F16 twins (f16.go): a panic names fn, the exported
// function called.

func scoresTChecked[E float32 | uint16](fn string, out, q []float32, kt []E, bs int) {
	n, dim := len(out), len(q)
	if n == 0 {
		return
	}
	if n > bs || len(kt) < (dim-1)*bs+n {
		panic(fmt.Sprintf("kernels: %s of %d slots of %d by %d dims: kt has %d", fn, n, bs, dim, len(kt)))
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresT(out, q, kt, bs)
}

func scoresRowsChecked[E float32 | uint16](fn string, out, q []float32, k []E, stride int) {
	n, dim := len(out), len(q)
	if n == 0 {
		return
	}
	if stride < 0 || len(k) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: %s of %d keys of %d with stride %d: k has %d", fn, n, dim, stride, len(k)))
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresRows(out, q, k, stride)
}

func scoresTMultiChecked[E float32 | uint16](fn string, out, q [][]float32, kt []E, bs int) {
	if len(out) != len(q) {
		panic(fmt.Sprintf("kernels: %s of %d outputs for %d queries", fn, len(out), len(q)))
	}
	if len(out) == 0 {
		return
	}
	n, dim := len(out[0]), len(q[0])
	for i := range out {
		if len(out[i]) != n || len(q[i]) != dim {
			panic(fmt.Sprintf("kernels: %s query %d: %d scores of %d dims, query 0 %d of %d",
				fn, i, len(out[i]), len(q[i]), n, dim))
		}
	}
	if n == 0 {
		return
	}
	if n > bs || len(kt) < (dim-1)*bs+n {
		panic(fmt.Sprintf("kernels: %s of %d slots of %d by %d dims: kt has %d", fn, n, bs, dim, len(kt)))
	}
	if dim == 0 {
		for _, o := range out {
			clear(o)
		}
		return
	}
	scoresTMulti(out, q, kt, bs)
}

func scoresTBlocksChecked[E float32 | uint16](fn string, out, q []float32, kt [][]E, bs int) {
	dim := len(q)
	if bs <= 0 || len(out) != len(kt)*bs {
		panic(fmt.Sprintf("kernels: %s of %d blocks of %d into %d scores", fn, len(kt), bs, len(out)))
	}
	for b, k := range kt {
		if len(k) < dim*bs {
			panic(fmt.Sprintf("kernels: %s block %d of %d slots by %d dims: %d %s", fn, b, bs, dim, len(k), elemNoun[E]()))
		}
	}
	if len(kt) == 0 {
		return
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresTBlocks(out, q, kt, bs)
}

func axpyStridedMultiChecked[E float32 | uint16](fn string, y, a [][]float32, v []E, stride int) {
	if len(y) != len(a) {
		panic(fmt.Sprintf("kernels: %s of %d outputs for %d weight vectors", fn, len(y), len(a)))
	}
	if len(y) == 0 {
		return
	}
	n, dim := len(a[0]), len(y[0])
	for i := range y {
		if len(a[i]) != n || len(y[i]) != dim {
			panic(fmt.Sprintf("kernels: %s sum %d: %d weights into %d, sum 0 %d into %d",
				fn, i, len(a[i]), len(y[i]), n, dim))
		}
	}
	if n == 0 || dim == 0 {
		return
	}
	if stride < 0 || len(v) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: %s of %d values of %d with stride %d: v has %d", fn, n, dim, stride, len(v)))
	}
	axpyStridedMulti(y, a, v, stride)
}

func axpyStridedChecked[E float32 | uint16](fn string, y, a []float32, v []E, stride int) {
	n, dim := len(a), len(y)
	if n == 0 || dim == 0 {
		return
	}
	if stride < 0 || len(v) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: %s of %d values of %d with stride %d: v has %d", fn, n, dim, stride, len(v)))
	}
	axpyStrided(y, a, v, stride)
}

// Transpose sets dst (cols rows of rows elements) to the transpose of src
// (rows rows of cols elements): dst[c*rows+r] = src[r*cols+c]. dst and src
// must not overlap. It moves the elements as they are (halves stay
// halves). Sixteen rows, a KV block's slots, go through assembly where
// there is some: a gather per column.
func Transpose[E float32 | uint16](dst, src []E, rows, cols int) {
	if rows < 0 || cols < 0 || len(src) < rows*cols || len(dst) < rows*cols {
		panic(fmt.Sprintf("kernels: Transpose of %dx%d with %d and %d elements", rows, cols, len(src), len(dst)))
	}
	if rows*cols == 0 {
		return
	}
	transpose(dst[:rows*cols], src[:rows*cols], rows, cols)
}

// PrefetchRows asks the CPU to bring rows rows of rowLen elements of x,
// stride elements apart (clipped to x), into its caches ahead of use: for
// keys and values that the weights streamed through the caches since
// they were written. A hint: it computes nothing, never faults, and does
// nothing without assembly.
func PrefetchRows[E float32 | uint16](x []E, rows, rowLen, stride int) {
	if rows <= 0 || rowLen <= 0 || len(x) < rowLen {
		return
	}
	if stride > 0 {
		rows = min(rows, (len(x)-rowLen)/stride+1)
	} else {
		rows = 1
	}
	var e E
	size := int(unsafe.Sizeof(e))
	prefetch(unsafe.Pointer(&x[0]), rows, rowLen*size, stride*size)
}
