package rowstat

// The sums behind the attention metrics (policy.MeasureAttention): one
// vectorized pass each over a head's positions, float64 totals. The AVX2
// kernels add their float32 terms in float32 over runs of 8 a lane, then
// in float64 (as LogitMoments): with terms of one sign they agree with the
// Go loops, float64 throughout, to 1e-6 relative.

// AbsSum returns Σ |x[i]|.
func AbsSum(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return absSum(x)
}

// AbsDiffSum returns Σ |x[i] - y[i]| over len(x) elements.
func AbsDiffSum(x, y []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return absDiffSum(x, y[:len(x)])
}

// SurprisalSum returns Σ p[i]·(c - s[i]) over the i < len(p) with p[i] >
// 0 (NaN is not): for a softmax p of scores s whose log-normalizer is c
// (log p[i] = s[i] - c), the entropy of p in nats, as a sum of terms of
// one sign. A p[i] of 0 adds nothing even where s[i] is -Inf.
func SurprisalSum(p, s []float32, c float32) float64 {
	if len(p) == 0 {
		return 0
	}
	return surprisalSum(p, s[:len(p)], c)
}

// Axpy computes y += a*x over len(x) elements (fused multiply-adds on
// AVX2 and AVX-512, as the kernels' Axpy).
func Axpy(a float32, x, y []float32) {
	if len(x) == 0 {
		return
	}
	axpy(a, x, y[:len(x)])
}

// Scale sets x[i] *= a.
func Scale(x []float32, a float32) {
	if len(x) == 0 {
		return
	}
	scale(x, a)
}

func absSumGo(x []float32) float64 {
	var a float64
	for _, v := range x {
		a += float64(max(v, -v))
	}
	return a
}

func absDiffSumGo(x, y []float32) float64 {
	var a float64
	for i, v := range x {
		d := float64(v) - float64(y[i])
		a += max(d, -d)
	}
	return a
}

func surprisalSumGo(p, s []float32, c float32) float64 {
	var a float64
	cf := float64(c)
	for i, v := range p {
		if v > 0 {
			a += float64(v) * (cf - float64(s[i]))
		}
	}
	return a
}

func axpyGo(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

func scaleGo(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}
