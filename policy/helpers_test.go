package policy

import (
	"math"
	"math/rand/v2"
)

// logs returns log(p) for each p as float32 logits.
func logs(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

// headAndTail returns logits for p0 on token 0 and (1-p0) shared by n others.
func headAndTail(p0 float64, n int) []float32 {
	ps := make([]float64, n+1)
	ps[0] = p0
	for i := 1; i <= n; i++ {
		ps[i] = (1 - p0) / float64(n)
	}
	return logs(ps...)
}

// refEntropy is a plain two-pass reference: log-softmax, then H and the
// centered variance, in nats.
func refEntropy(logits []float32) (h, v float64) {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) - mx)
	}
	logZ := mx + math.Log(z)
	for _, l := range logits {
		lp := float64(l) - logZ
		if p := math.Exp(lp); p > 0 {
			h -= p * lp
		}
	}
	for _, l := range logits {
		lp := float64(l) - logZ
		if p := math.Exp(lp); p > 0 {
			d := -lp - h
			v += p * d * d
		}
	}
	return h, v
}

// randomLogits returns n logits shaped like a language model's: a few
// strong tokens over a Gaussian floor, scaled by a random sharpness.
func randomLogits(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	scale := 0.5 + 3*r.Float64()
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	for range 1 + r.IntN(4) {
		out[r.IntN(n)] += float32(5 + 10*r.Float64())
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }
