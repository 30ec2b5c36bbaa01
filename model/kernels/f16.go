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
//
// A kernel and its twin are one piece of code: the argument checks
// (vec.go), the drivers (dispatch_*.go) and the pure-Go kernels
// (generic.go) are generic over the element type, float32 or uint16, and
// asmgen emits both assembly versions from one generator.

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
	scoresTChecked("ScoresTF16", out, q, kt, bs)
}

// ScoresRowsF16 is [ScoresRows] with the keys stored as rows of halves:
// out[j] = sum_d q[d]*k[j*stride+d] over d < len(q), for every j <
// len(out). The result is bit for bit what ScoresRows computes on the
// widened keys, and thus what [ScoresTF16] computes for the same keys
// stored transposed.
func ScoresRowsF16(out, q []float32, k []uint16, stride int) {
	scoresRowsChecked("ScoresRowsF16", out, q, k, stride)
}

// ScoresTMultiF16 is [ScoresTMulti] with the keys stored as halves:
// out[i][j] = sum_d q[i][d]*kt[d*bs+j] for every i and j < n, where every
// out[i] has the same length n <= bs and every q[i] the same length. Each
// widened load of kt serves up to four queries (AVX-512). out[i] is bit
// for bit what ScoresTF16(out[i], q[i], kt, bs) computes.
func ScoresTMultiF16(out, q [][]float32, kt []uint16, bs int) {
	scoresTMultiChecked("ScoresTMultiF16", out, q, kt, bs)
}

// ScoresTBlocksF16 is [ScoresTBlocks] with the keys stored as halves:
// out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] for every block b and j < bs,
// out holding len(kt)*bs floats. out[b*bs:(b+1)*bs] is bit for bit what
// ScoresTF16(out[b*bs:(b+1)*bs], q, kt[b], bs) computes.
func ScoresTBlocksF16(out, q []float32, kt [][]uint16, bs int) {
	scoresTBlocksChecked("ScoresTBlocksF16", out, q, kt, bs)
}

// AxpyStridedF16 is [AxpyStrided] with the values stored as halves: it
// adds a[t] * v[t*stride:][:len(y)] to y for every t < len(a). y ends bit
// for bit as AxpyStrided leaves it with the widened values.
func AxpyStridedF16(y, a []float32, v []uint16, stride int) {
	axpyStridedChecked("AxpyStridedF16", y, a, v, stride)
}

// AxpyStridedMultiF16 is [AxpyStridedMulti] with the values stored as
// halves: y[i] += sum_t a[i][t] * v[t*stride:][:len(y[i])] for every i,
// where every a[i] has the same length and every y[i] the same length.
// Each widened load of a value row serves up to four sums (AVX-512). y[i]
// ends bit for bit as AxpyStridedF16(y[i], a[i], v, stride) leaves it.
// The y[i] must not overlap each other.
func AxpyStridedMultiF16(y, a [][]float32, v []uint16, stride int) {
	axpyStridedMultiChecked("AxpyStridedMultiF16", y, a, v, stride)
}

// Pure-Go conversions.

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
