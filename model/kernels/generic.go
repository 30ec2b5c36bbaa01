package kernels

import (
	"math"
	"unsafe"
)

// Pure-Go kernels: the whole implementation under the purego build tag and
// on other architectures, the reference the assembly is tested against, and
// the fallback for CPUs without AVX2.
//
// The attention kernels take their keys or values as float32 or as IEEE
// binary16 halves (E = uint16, see f16.go): one generic body serves both,
// widening each element where it loads it, so that the F16 kernels compute
// bit for bit what the float32 ones compute on the widened data.

// isHalf reports whether E is the binary16 element type. The test is on
// E's size, which the compiler knows for each instantiation.
func isHalf[E float32 | uint16]() bool {
	var e E
	return unsafe.Sizeof(e) == 2
}

// asFloat returns an element of keys or values as a float32: a float32 as
// it is, a half widened by HalfToFloat. It is inlined (it tests the size
// itself, to stay within the inlining budget), so that the test and the
// call vanish from the float32 kernels.
func asFloat[E float32 | uint16](e E) float32 {
	if unsafe.Sizeof(e) == 4 {
		return float32(e)
	}
	return HalfToFloat(uint16(e))
}

// elemNoun names the elements of type E in messages.
func elemNoun[E float32 | uint16]() string {
	if isHalf[E]() {
		return "halves"
	}
	return "floats"
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGo(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

func softmaxGo(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

func swiGLUGo(h, g []float32) {
	g = g[:len(h)]
	for i, v := range h {
		h[i] = v / (1 + float32(math.Exp(float64(-v)))) * g[i]
	}
}

func dotStridedGo(out, q, k []float32, stride int) {
	for t := range out {
		out[t] = dot(q, k[t*stride:][:len(q)])
	}
}

// axpyStridedGo is axpyGo once per value.
func axpyStridedGo[E float32 | uint16](y, a []float32, v []E, stride int) {
	for t, at := range a {
		row := v[t*stride:][:len(y)]
		for i, e := range row {
			y[i] += at * asFloat(e)
		}
	}
}

// scoresTGo mirrors the assembly's order: 16 slots at a time, four partial
// sums over d mod 4, added as (s0+s1)+(s2+s3).
func scoresTGo[E float32 | uint16](out, q []float32, kt []E, bs int) {
	var acc [4][16]float32
	for j0 := 0; j0 < len(out); j0 += 16 {
		w := min(16, len(out)-j0)
		acc = [4][16]float32{}
		for d, qd := range q {
			a := &acc[d&3]
			row := kt[d*bs+j0:][:w]
			for j, k := range row {
				a[j] += qd * asFloat(k)
			}
		}
		for j := range w {
			out[j0+j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])
		}
	}
}

// normScaleGo is RMSNorm's second pass: out[i] = w[i] * (a * x[i]).
func normScaleGo(out, x, w []float32, a float32) {
	out, w = out[:len(x)], w[:len(x)]
	for i, v := range x {
		out[i] = w[i] * (a * v)
	}
}

func scaleGo(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// scoresRowsGo is scoresTGo's arithmetic for keys stored as rows.
func scoresRowsGo[E float32 | uint16](out, q []float32, k []E, stride int) {
	for j := range out {
		key := k[j*stride:][:len(q)]
		var a [4]float32
		for d, qd := range q {
			a[d&3] += qd * asFloat(key[d])
		}
		out[j] = (a[0] + a[1]) + (a[2] + a[3])
	}
}

// The multi-query kernels one query or block at a time, as they run
// without AVX-512.

func scoresTMultiEach[E float32 | uint16](out, q [][]float32, kt []E, bs int) {
	for i := range out {
		scoresT(out[i], q[i], kt, bs)
	}
}

func scoresTBlocksEach[E float32 | uint16](out, q []float32, kt [][]E, bs int) {
	for b, k := range kt {
		scoresT(out[b*bs:(b+1)*bs], q, k, bs)
	}
}

func axpyStridedMultiEach[E float32 | uint16](y, a [][]float32, v []E, stride int) {
	for i := range y {
		axpyStrided(y[i], a[i], v, stride)
	}
}

func transposeGo[E float32 | uint16](dst, src []E, rows, cols int) {
	for r := range rows {
		row := src[r*cols : (r+1)*cols]
		for c, v := range row {
			dst[c*rows+r] = v
		}
	}
}
