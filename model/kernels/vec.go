package kernels

import (
	"fmt"
	"math"
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

// AxpyStrided adds a[t] * v[t*stride:][:len(y)] to y for every t < len(a):
// attention's weighted sum of len(a) cached values stored stride floats
// apart, in one call (y stays in registers on AVX-512).
func AxpyStrided(y, a, v []float32, stride int) {
	n, dim := len(a), len(y)
	if n == 0 || dim == 0 {
		return
	}
	if stride < 0 || len(v) < (n-1)*stride+dim {
		panic(fmt.Sprintf("kernels: AxpyStrided of %d values of %d with stride %d: v has %d", n, dim, stride, len(v)))
	}
	axpyStrided(y, a, v, stride)
}

// RMSNorm writes x / rms(x) * w into out (out may alias x).
func RMSNorm(out, x, w []float32, eps float32) {
	if len(x) == 0 {
		return
	}
	ss := Dot(x, x)
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	out = out[:len(x)]
	w = w[:len(x)]
	for i, v := range x {
		out[i] = w[i] * (inv * v)
	}
}

// Softmax turns x into probabilities in place (max-subtracted for stability).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	softmax(x)
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
