package rowstat

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every level's LogitMoments agrees with the float64 sums to 1e-6
// relative, masked logits and all; a NaN makes z NaN.
func TestLogitMoments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, l := range levels() {
		for _, n := range []int{1, 2, 7, 8, 9, 31, 100, 1000, 32000} {
			x := randVec(r, n)
			for i := range x {
				x[i] *= 12
			}
			if n > 4 {
				x[1], x[3] = float32(math.Inf(-1)), -500
			}
			m := x[0]
			for _, v := range x {
				m = max(m, v)
			}
			var wz, wa, wb float64
			for _, v := range x {
				s := float64(v) - float64(m)
				if e := math.Exp(s); e != 0 {
					wz, wa, wb = wz+e, wa+e*s, wb+e*s*s
				}
			}
			var z, a, b float64
			withLevel(t, l, func() { z, a, b = LogitMoments(x, m) })
			for _, c := range [][2]float64{{z, wz}, {a, wa}, {b, wb}} {
				if math.Abs(c[0]-c[1]) > 1e-6*math.Abs(c[1])+1e-12 {
					t.Fatalf("%v, n=%d: got (%g, %g, %g), want (%g, %g, %g)", l, n, z, a, b, wz, wa, wb)
				}
			}
			if n > 2 {
				x[2] = float32(math.NaN())
				withLevel(t, l, func() { z, _, _ = LogitMoments(x, m) })
				if !math.IsNaN(z) {
					t.Fatalf("%v, n=%d: a NaN logit gave z = %g", l, n, z)
				}
			}
		}
	}
	if z, a, b := LogitMoments(nil, 0); z != 0 || a != 0 || b != 0 {
		t.Errorf("empty row: %g %g %g", z, a, b)
	}
}

func BenchmarkLogitMoments(b *testing.B) {
	x := randVec(rand.New(rand.NewPCG(1, 2)), 128256)
	for _, l := range levels() {
		b.Run(l.String(), func(b *testing.B) {
			withLevel(b, l, func() {
				for b.Loop() {
					LogitMoments(x, 1)
				}
			})
		})
	}
}

// Top2 agrees with the scalar scan at every level: ties, NaNs, -Inf rows.
func TestTop2(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ninf := float32(math.Inf(-1))
	for _, l := range levels() {
		for _, n := range []int{1, 2, 15, 16, 17, 33, 100, 1000, 32000} {
			for c := range 6 {
				x := randVec(r, n)
				switch c {
				case 1: // the max twice
					i, j := r.IntN(n), r.IntN(n)
					x[i], x[j] = 9, 9
				case 2: // NaNs and -Infs
					for i := range x {
						if r.IntN(3) == 0 {
							x[i] = float32(math.NaN())
						} else if r.IntN(3) == 0 {
							x[i] = ninf
						}
					}
				case 3: // all -Inf
					for i := range x {
						x[i] = ninf
					}
				case 4: // small integers: many ties
					for i := range x {
						x[i] = float32(r.IntN(4))
					}
				case 5: // the max at the end
					x[n-1] = 100
				}
				w1, wa, w2 := top2Go(x)
				var g1, g2 float32
				var ga int
				withLevel(t, l, func() { g1, ga, g2 = Top2(x) })
				if g1 != w1 || ga != wa || g2 != w2 {
					t.Fatalf("%v n=%d case %d: Top2 = %g, %d, %g; want %g, %d, %g", l, n, c, g1, ga, g2, w1, wa, w2)
				}
			}
		}
	}
}

func TestFirstAbove(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, l := range levels() {
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, 1000} {
			x := randVec(r, n)
			for i := range x {
				if r.IntN(5) == 0 {
					x[i] = float32(math.NaN())
				}
			}
			for _, thr := range []float32{-10, 0, 1, 2, 3, 10} {
				want := n
				for i, v := range x {
					if v > thr {
						want = i
						break
					}
				}
				var got int
				withLevel(t, l, func() { got = FirstAbove(x, thr) })
				if got != want {
					t.Fatalf("%v n=%d thr=%g: FirstAbove = %d, want %d", l, n, thr, got, want)
				}
				if n > 2 {
					withLevel(t, l, func() { got = FirstAbove(x[2:], thr) })
					if want2 := max(want, 2) - 2; want >= 2 && got != want2 {
						t.Fatalf("%v n=%d thr=%g: FirstAbove(x[2:]) = %d, want %d", l, n, thr, got, want2)
					}
				}
			}
		}
	}
}

func TestFinite(t *testing.T) {
	for _, l := range levels() {
		for _, n := range []int{0, 1, 8, 9, 100} {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				for _, at := range []int{0, n / 2, n - 1} {
					if n == 0 {
						continue
					}
					x := make([]float32, n)
					x[at] = bad
					want := !(bad != bad || bad > math.MaxFloat32)
					var got bool
					withLevel(t, l, func() { got = Finite(x) })
					if got != want {
						t.Fatalf("%v n=%d x[%d]=%g: Finite = %v", l, n, at, bad, got)
					}
				}
			}
		}
	}
}
