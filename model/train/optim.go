package train

import (
	"math"
)

// AdamW is Adam with decoupled weight decay (Loshchilov and Hutter),
// applied to matrices only: norms are not decayed.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64

	t    int         // steps taken
	m, v [][]float32 // moments, per tensor
}

// NewAdamW returns the optimizer with GPT-style settings for the tensors
// ts: beta1 0.9, beta2 0.95, eps 1e-8, and the given weight decay.
func NewAdamW(ts []*Tensor, weightDecay float64) *AdamW {
	o := &AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: weightDecay}
	for _, t := range ts {
		o.m = append(o.m, make([]float32, len(t.W)))
		o.v = append(o.v, make([]float32, len(t.W)))
	}
	return o
}

// Step updates every tensor from its gradient at learning rate lr.
func (o *AdamW) Step(ts []*Tensor, lr float64) {
	o.t++
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	c1 := 1 - math.Pow(o.Beta1, float64(o.t))
	c2 := 1 - math.Pow(o.Beta2, float64(o.t))
	step := float32(lr / c1)
	rc2 := float32(1 / math.Sqrt(c2))
	eps := float32(o.Eps)
	for k, t := range ts {
		decay := float32(1)
		if !t.Vec {
			decay = float32(1 - lr*o.WeightDecay)
		}
		m, v := o.m[k], o.v[k]
		for i, g := range t.G {
			m[i] = b1*m[i] + (1-b1)*g
			v[i] = b2*v[i] + (1-b2)*g*g
			t.W[i] = t.W[i]*decay - step*m[i]/(float32(math.Sqrt(float64(v[i])))*rc2+eps)
		}
	}
}

// GradNorm returns the global L2 norm of the gradients.
func GradNorm(ts []*Tensor) float64 {
	var s float64
	for _, t := range ts {
		for _, g := range t.G {
			s += float64(g) * float64(g)
		}
	}
	return math.Sqrt(s)
}

// ClipGrads scales the gradients down so that their global norm is at
// most maxNorm, and returns the norm before clipping.
func ClipGrads(ts []*Tensor, maxNorm float64) float64 {
	n := GradNorm(ts)
	if maxNorm > 0 && n > maxNorm {
		s := float32(maxNorm / n)
		for _, t := range ts {
			for i := range t.G {
				t.G[i] *= s
			}
		}
	}
	return n
}

// Schedule is the learning rate: a linear warmup to Peak over Warmup steps,
// then a cosine decay to Min at step Steps.
type Schedule struct {
	Peak, Min     float64
	Warmup, Steps int
}

// At returns the learning rate of step s (0-based).
func (c Schedule) At(s int) float64 {
	if s < c.Warmup {
		return c.Peak * float64(s+1) / float64(c.Warmup)
	}
	if c.Steps <= c.Warmup {
		return c.Peak
	}
	p := math.Min(1, float64(s-c.Warmup)/float64(c.Steps-c.Warmup))
	return c.Min + (c.Peak-c.Min)*0.5*(1+math.Cos(math.Pi*p))
}
