package kernels

import "math"

// Pure-Go kernels: the whole implementation under the purego build tag and
// on other architectures, the reference the assembly is tested against, and
// the fallback for CPUs without AVX2.

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

func axpyStridedGo(y, a, v []float32, stride int) {
	for t, at := range a {
		axpy(at, v[t*stride:][:len(y)], y)
	}
}

// scoresTGo mirrors the assembly's order: 16 slots at a time, four partial
// sums over d mod 4, added as (s0+s1)+(s2+s3).
func scoresTGo(out, q, kt []float32, bs int) {
	var acc [4][16]float32
	for j0 := 0; j0 < len(out); j0 += 16 {
		w := min(16, len(out)-j0)
		acc = [4][16]float32{}
		for d, qd := range q {
			a := &acc[d&3]
			row := kt[d*bs+j0:][:w]
			for j, k := range row {
				a[j] += qd * k
			}
		}
		for j := range w {
			out[j0+j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])
		}
	}
}

func scoresTMultiGo(out, q [][]float32, kt []float32, bs int) {
	for i := range out {
		scoresTGo(out[i], q[i], kt, bs)
	}
}

func scaleGo(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// scoresRowsGo is scoresTGo's arithmetic for keys stored as rows.
func scoresRowsGo(out, q, k []float32, stride int) {
	for j := range out {
		key := k[j*stride:][:len(q)]
		var a [4]float32
		for d, qd := range q {
			a[d&3] += qd * key[d]
		}
		out[j] = (a[0] + a[1]) + (a[2] + a[3])
	}
}
