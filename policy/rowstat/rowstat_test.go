package rowstat

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// withLevel runs fn with the implementation l in use.
func withLevel(t testing.TB, l level, fn func()) {
	t.Helper()
	old := lvl
	lvl = l
	defer func() { lvl = old }()
	fn()
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// Axpy agrees with the float64 sum at every level, to a float32 rounding
// of its terms, and writes nothing past len(x); unaligned starts and
// lengths around the vector sizes.
func TestAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range levels() {
		for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099} {
			for _, off := range []int{0, 1, 3} {
				x := randVec(r, n+off)[off:]
				y0 := randVec(r, n+off)[off:]
				y := append(slices.Clone(y0), 777)
				const a = 0.37
				withLevel(t, l, func() { Axpy(a, x, y[:n]) })
				for i := range n {
					want := float64(y0[i]) + a*float64(x[i])
					tol := 1e-6 * (math.Abs(float64(y0[i])) + math.Abs(a*float64(x[i])))
					if math.Abs(float64(y[i])-want) > tol {
						t.Fatalf("%v: Axpy(len %d)[%d] = %g, want %g", l, n, i, y[i], want)
					}
				}
				if y[n] != 777 {
					t.Fatalf("%v: Axpy(len %d) wrote past the end", l, n)
				}
			}
		}
	}
}

// Scale is the float32 product, exactly, at every level.
func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, l := range levels() {
		for _, n := range []int{0, 1, 15, 16, 17, 100} {
			x := randVec(r, n+1)
			want := slices.Clone(x)
			for i := range n {
				want[i] *= 0.125 + 1e-3
			}
			withLevel(t, l, func() { Scale(x[:n], 0.125+1e-3) })
			if !slices.Equal(x, want) {
				t.Fatalf("%v: Scale(len %d) = %v, want %v", l, n, x, want)
			}
		}
	}
}

func TestImplementation(t *testing.T) {
	if got, want := Implementation(), best.String(); got != want {
		t.Errorf("Implementation() = %q, want %q", got, want)
	}
}
