package kernels

import "math"

// Dot returns sum a[i]*b[i] over len(a) elements.
func Dot(a, b []float32) float32 {
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

// Axpy computes y += a*x over len(x) elements.
func Axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// RMSNorm writes x / rms(x) * w into out (out may alias x).
func RMSNorm(out, x, w []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	out = out[:len(x)]
	for i, v := range x {
		out[i] = w[i] * (inv * v)
	}
}

// Softmax turns x into probabilities in place (max-subtracted for stability).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
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

// SwiGLU computes h[i] = silu(h[i]) * g[i] in place.
func SwiGLU(h, g []float32) {
	g = g[:len(h)]
	for i, v := range h {
		h[i] = v / (1 + float32(math.Exp(float64(-v)))) * g[i]
	}
}

// Add computes y += x.
func Add(y, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}
