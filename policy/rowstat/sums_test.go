package rowstat

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The attention sums agree with float64 loops at every level, to 1e-6
// relative: lengths around the vector and block sizes, masked scores.
func TestAttentionSums(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	ninf := float32(math.Inf(-1))
	for _, l := range levels() {
		for _, n := range []int{1, 3, 7, 8, 9, 63, 64, 65, 100, 1000, 4097} {
			x, y := randVec(r, n), randVec(r, n)
			p, s := make([]float32, n), make([]float32, n)
			var z float64
			for i := range s {
				s[i] = float32(r.NormFloat64() * 3)
				z += math.Exp(float64(s[i]))
			}
			for i := range p {
				p[i] = float32(math.Exp(float64(s[i])) / z)
			}
			if n > 4 { // a masked position: p 0, score -Inf
				p[2], s[2] = 0, ninf
			}
			c := float32(math.Log(z))
			var wa, wd, ws float64
			for i := range x {
				wa += math.Abs(float64(x[i]))
				wd += math.Abs(float64(x[i]) - float64(y[i]))
				if p[i] > 0 {
					ws += float64(p[i]) * (float64(c) - float64(s[i]))
				}
			}
			var ga, gd, gs float64
			withLevel(t, l, func() {
				ga, gd, gs = AbsSum(x), AbsDiffSum(x, y), SurprisalSum(p, s, c)
			})
			for _, v := range [][3]float64{{ga, wa, 0}, {gd, wd, 1}, {gs, ws, 2}} {
				if math.Abs(v[0]-v[1]) > 1e-6*math.Abs(v[1])+1e-12 {
					t.Fatalf("%v, n=%d, sum %v: got %.10g, want %.10g", l, n, v[2], v[0], v[1])
				}
			}
		}
		// NaN: |NaN| is NaN; SurprisalSum skips a NaN probability and
		// carries a NaN score.
		nan := float32(math.NaN())
		x := []float32{1, 2, nan, 4, 5, 6, 7, 8, 9}
		var a, d, s1, s2 float64
		withLevel(t, l, func() {
			a, d = AbsSum(x), AbsDiffSum(x, make([]float32, 9))
			s1 = SurprisalSum(x, make([]float32, 9), 1)
			s2 = SurprisalSum(make([]float32, 9), x, 1)
		})
		if !math.IsNaN(a) || !math.IsNaN(d) || s1 != 1+2+4+5+6+7+8+9 || s2 != 0 {
			t.Errorf("%v: NaN gave %v %v %v %v", l, a, d, s1, s2)
		}
	}
	if AbsSum(nil) != 0 || AbsDiffSum(nil, nil) != 0 || SurprisalSum(nil, nil, 1) != 0 {
		t.Error("empty input: nonzero sum")
	}
}

func BenchmarkAttentionSums(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, y := randVec(r, 1024), randVec(r, 1024)
	for _, l := range levels() {
		b.Run(l.String(), func(b *testing.B) {
			withLevel(b, l, func() {
				for b.Loop() {
					AbsSum(x)
					AbsDiffSum(x, y)
					SurprisalSum(x, y, 1)
				}
			})
		})
	}
}
