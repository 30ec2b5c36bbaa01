package rowstat

import "math"

// LogitMoments returns, for a row of logits x whose largest is m, the
// three sums behind its softmax's normalizer, entropy and varentropy: with
// s_i = x_i - m and e_i = e^(s_i),
//
//	z = Σ e_i,  a = Σ e_i s_i,  b = Σ e_i s_i²
//
// in float64, terms whose e_i is 0 (masked logits of -Inf, or more than
// about 86 below the max) left out (the AVX2 kernel counts them at e^-86.5,
// 2.7e-38 each, against the max's 1). Then log p_i = s_i - log z, the
// entropy is log z - a/z nats and the varentropy b/z - (a/z)². A NaN
// among the logits makes z NaN. m must be finite.
//
// It is one pass over the row; the AVX2 kernel takes e_i from a float32
// exp (about 1 ulp) and sums in float32 over runs of 8 terms a lane, then
// in float64; the Go one uses math.Exp and float64: they agree to 1e-6
// relative.
func LogitMoments(x []float32, m float32) (z, a, b float64) {
	if len(x) == 0 {
		return 0, 0, 0
	}
	return logitMoments(x, m)
}

func logitMomentsGo(x []float32, m float32) (z, a, b float64) {
	var z1, a1, b1 float64
	mx := float64(m)
	i := 0
	// Two accumulator sets keep the dependency chains short.
	for ; i+2 <= len(x); i += 2 {
		s0, s1 := float64(x[i])-mx, float64(x[i+1])-mx
		e0, e1 := math.Exp(s0), math.Exp(s1)
		if e0 != 0 { // also skips -Inf, whose e·s would be NaN
			z, a, b = z+e0, a+e0*s0, b+e0*s0*s0
		}
		if e1 != 0 {
			z1, a1, b1 = z1+e1, a1+e1*s1, b1+e1*s1*s1
		}
	}
	for ; i < len(x); i++ {
		s := float64(x[i]) - mx
		if e := math.Exp(s); e != 0 {
			z, a, b = z+e, a+e*s, b+e*s*s
		}
	}
	return z + z1, a + a1, b + b1
}

// Top2 returns the largest value of x, the index of its first occurrence
// and the second largest value (equal to the largest when it occurs
// twice); NaNs are skipped, and a row of only -Inf or NaN gives -Inf, 0,
// -Inf. x must not be empty.
func Top2(x []float32) (m1 float32, arg int, m2 float32) {
	return top2(x)
}

func top2Go(x []float32) (m1 float32, arg int, m2 float32) {
	m1, m2 = float32(math.Inf(-1)), float32(math.Inf(-1))
	for i, l := range x {
		if l > m2 {
			if l > m1 {
				m1, m2, arg = l, m1, i
			} else {
				m2 = l
			}
		}
	}
	return m1, arg, m2
}

// top2Lanes combines the per-lane results of top2AVX2.
func top2Lanes(out *[24]uint32) (m1 float32, arg int, m2 float32) {
	m1, m2 = float32(math.Inf(-1)), float32(math.Inf(-1))
	best := -1
	for l := range 8 {
		v, a := math.Float32frombits(out[l]), int(out[16+l])
		if best < 0 || v > m1 || (v == m1 && a < arg) {
			m1, arg, best = v, a, l
		}
	}
	for l := range 8 {
		m2 = max(m2, math.Float32frombits(out[8+l]))
		if l != best {
			m2 = max(m2, math.Float32frombits(out[l]))
		}
	}
	return m1, arg, m2
}

// FirstAbove returns the index of the first element of x greater than thr
// (NaN is not), or len(x) when there is none.
func FirstAbove(x []float32, thr float32) int {
	i := firstAbove(x, thr)
	for ; i < len(x); i++ {
		if x[i] > thr {
			break
		}
	}
	return i
}

// Finite reports whether no element of x is NaN or +Inf (-Inf, a masked
// logit, is allowed).
func Finite(x []float32) bool {
	i := 0
	if badFloats(x, &i) {
		return false
	}
	for _, v := range x[i:] {
		if v != v || v > math.MaxFloat32 {
			return false
		}
	}
	return true
}
