package kernels

import "fmt"

// F16 (IEEE 754 binary16) operands for attention: a KV cache stored as
// halves reads half the bytes. Each kernel here is the twin of a float32
// kernel in vec.go with the keys or values as halves, and computes bit for
// bit what its twin computes on the widened keys or values (FromHalf): the
// same operations in the same order, the halves widened exactly where the
// twin loads floats. The queries, weights and results stay float32.
// (An amd64 CPU with AVX2 but without F16C, practically none,
// runs the pure-Go F16 kernels, which match the pure-Go float32 ones.)

// ToHalf sets dst[i] = FloatToHalf(src[i]) for i < len(src) (len(dst) >=
// len(src)), rounding to nearest even. The amd64 versions (VCVTPS2PH)
// agree with FloatToHalf on every input except NaNs: a NaN becomes a NaN
// of the same sign, but its payload may differ.
func ToHalf(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("kernels: ToHalf of %d floats into %d halves", len(src), len(dst)))
	}
	if len(src) == 0 {
		return
	}
	toHalf(dst[:len(src)], src)
}

// FromHalf sets dst[i] = HalfToFloat(src[i]) for i < len(src) (len(dst) >=
// len(src)). The conversion is exact; the amd64 versions (VCVTPH2PS) agree
// with HalfToFloat on every input except signalling NaNs, which they
// return quieted (the payload kept).
func FromHalf(dst []float32, src []uint16) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("kernels: FromHalf of %d halves into %d floats", len(src), len(dst)))
	}
	if len(src) == 0 {
		return
	}
	fromHalf(dst[:len(src)], src)
}

// ScoresTF16 is [ScoresT] with the keys stored as halves: out[j] =
// sum_d q[d]*kt[d*bs+j] over d < len(q), for every j < len(out) <= bs.
// The result is bit for bit what ScoresT computes on the widened keys;
// slots from len(out) to bs are not read.
func ScoresTF16(out, q []float32, kt []uint16, bs int) {
	n, dim := len(out), len(q)
	if n == 0 {
		return
	}
	if n > bs || len(kt) < (dim-1)*bs+n {
		panic(fmt.Sprintf("kernels: ScoresTF16 of %d slots of %d by %d dims: kt has %d", n, bs, dim, len(kt)))
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresTF16(out, q, kt, bs)
}

// ScoresRowsF16 is [ScoresRows] with the keys stored as rows of halves:
// out[j] = sum_d q[d]*k[j*stride+d] over d < len(q), for every j <
// len(out). The result is bit for bit what ScoresRows computes on the
// widened keys, and thus what [ScoresTF16] computes for the same keys
// stored transposed.
func ScoresRowsF16(out, q []float32, k []uint16, stride int) {
	n, dim := len(out), len(q)
	if n == 0 {
		return
	}
	if stride < 0 || len(k) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: ScoresRowsF16 of %d keys of %d with stride %d: k has %d", n, dim, stride, len(k)))
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresRowsF16(out, q, k, stride)
}

// ScoresTMultiF16 is [ScoresTMulti] with the keys stored as halves:
// out[i][j] = sum_d q[i][d]*kt[d*bs+j] for every i and j < n, where every
// out[i] has the same length n <= bs and every q[i] the same length. Each
// widened load of kt serves up to four queries (AVX-512). out[i] is bit
// for bit what ScoresTF16(out[i], q[i], kt, bs) computes.
func ScoresTMultiF16(out, q [][]float32, kt []uint16, bs int) {
	if len(out) != len(q) {
		panic(fmt.Sprintf("kernels: ScoresTMultiF16 of %d outputs for %d queries", len(out), len(q)))
	}
	if len(out) == 0 {
		return
	}
	n, dim := len(out[0]), len(q[0])
	for i := range out {
		if len(out[i]) != n || len(q[i]) != dim {
			panic(fmt.Sprintf("kernels: ScoresTMultiF16 query %d: %d scores of %d dims, query 0 %d of %d",
				i, len(out[i]), len(q[i]), n, dim))
		}
	}
	if n == 0 {
		return
	}
	if n > bs || len(kt) < (dim-1)*bs+n {
		panic(fmt.Sprintf("kernels: ScoresTMultiF16 of %d slots of %d by %d dims: kt has %d", n, bs, dim, len(kt)))
	}
	if dim == 0 {
		for _, o := range out {
			clear(o)
		}
		return
	}
	scoresTMultiF16(out, q, kt, bs)
}

// ScoresTBlocksF16 is [ScoresTBlocks] with the keys stored as halves:
// out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] for every block b and j < bs,
// out holding len(kt)*bs floats. out[b*bs:(b+1)*bs] is bit for bit what
// ScoresTF16(out[b*bs:(b+1)*bs], q, kt[b], bs) computes.
func ScoresTBlocksF16(out, q []float32, kt [][]uint16, bs int) {
	dim := len(q)
	if bs <= 0 || len(out) != len(kt)*bs {
		panic(fmt.Sprintf("kernels: ScoresTBlocksF16 of %d blocks of %d into %d scores", len(kt), bs, len(out)))
	}
	for b, k := range kt {
		if len(k) < dim*bs {
			panic(fmt.Sprintf("kernels: ScoresTBlocksF16 block %d of %d slots by %d dims: %d halves", b, bs, dim, len(k)))
		}
	}
	if len(kt) == 0 {
		return
	}
	if dim == 0 {
		clear(out)
		return
	}
	scoresTBlocksF16(out, q, kt, bs)
}

// AxpyStridedF16 is [AxpyStrided] with the values stored as halves: it
// adds a[t] * v[t*stride:][:len(y)] to y for every t < len(a). y ends bit
// for bit as AxpyStrided leaves it with the widened values.
func AxpyStridedF16(y, a []float32, v []uint16, stride int) {
	n, dim := len(a), len(y)
	if n == 0 || dim == 0 {
		return
	}
	if stride < 0 || len(v) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: AxpyStridedF16 of %d values of %d with stride %d: v has %d", n, dim, stride, len(v)))
	}
	axpyStridedF16(y, a, v, stride)
}

// AxpyStridedMultiF16 is [AxpyStridedMulti] with the values stored as
// halves: y[i] += sum_t a[i][t] * v[t*stride:][:len(y[i])] for every i,
// where every a[i] has the same length and every y[i] the same length.
// Each widened load of a value row serves up to four sums (AVX-512). y[i]
// ends bit for bit as AxpyStridedF16(y[i], a[i], v, stride) leaves it.
// The y[i] must not overlap each other.
func AxpyStridedMultiF16(y, a [][]float32, v []uint16, stride int) {
	if len(y) != len(a) {
		panic(fmt.Sprintf("kernels: AxpyStridedMultiF16 of %d outputs for %d weight vectors", len(y), len(a)))
	}
	if len(y) == 0 {
		return
	}
	n, dim := len(a[0]), len(y[0])
	for i := range y {
		if len(a[i]) != n || len(y[i]) != dim {
			panic(fmt.Sprintf("kernels: AxpyStridedMultiF16 sum %d: %d weights into %d, sum 0 %d into %d",
				i, len(a[i]), len(y[i]), n, dim))
		}
	}
	if n == 0 || dim == 0 {
		return
	}
	if stride < 0 || len(v) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: AxpyStridedMultiF16 of %d values of %d with stride %d: v has %d", n, dim, stride, len(v)))
	}
	axpyStridedMultiF16(y, a, v, stride)
}

// Pure-Go F16 kernels: the float32 Go kernels (generic.go) with each half
// widened by HalfToFloat where they load a float, in the same order of
// operations.

func toHalfGo(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = FloatToHalf(f)
	}
}

func fromHalfGo(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = HalfToFloat(h)
	}
}

// scoresTF16Go is scoresTGo with halves.
func scoresTF16Go(out, q []float32, kt []uint16, bs int) {
	var acc [4][16]float32
	for j0 := 0; j0 < len(out); j0 += 16 {
		w := min(16, len(out)-j0)
		acc = [4][16]float32{}
		for d, qd := range q {
			a := &acc[d&3]
			row := kt[d*bs+j0:][:w]
			for j, h := range row {
				a[j] += qd * HalfToFloat(h)
			}
		}
		for j := range w {
			out[j0+j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])
		}
	}
}

// scoresRowsF16Go is scoresRowsGo with halves.
func scoresRowsF16Go(out, q []float32, k []uint16, stride int) {
	for j := range out {
		key := k[j*stride:][:len(q)]
		var a [4]float32
		for d, qd := range q {
			a[d&3] += qd * HalfToFloat(key[d])
		}
		out[j] = (a[0] + a[1]) + (a[2] + a[3])
	}
}

// axpyStridedF16Go is axpyStridedGo (axpyGo per value) with halves.
func axpyStridedF16Go(y, a []float32, v []uint16, stride int) {
	for t, at := range a {
		row := v[t*stride:][:len(y)]
		for i, h := range row {
			y[i] += at * HalfToFloat(h)
		}
	}
}
