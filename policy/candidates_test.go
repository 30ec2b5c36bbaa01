package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ResetAbove keeps exactly the logits >= cut, in order, whatever the cut:
// through the vectorized scan, at -Inf and at NaN.
func TestResetAboveCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(r.IntN(40)) / 4
	}
	logits[7] = float32(math.Inf(-1))
	var c Candidates
	for _, cut := range []float32{-1, 0, 5, 9.75, 10, float32(math.Inf(-1)), float32(math.NaN())} {
		c.ResetAbove(logits, cut)
		var want []int32
		for i, l := range logits {
			if l >= cut {
				want = append(want, int32(i))
			}
		}
		var got []int32
		for _, it := range c.Items {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("cut %g: kept %d tokens, want %d", cut, len(got), len(want))
		}
	}
}

// ResetAboveTopK is ResetAbove then KeepTopK: the same items in the same
// order (at most k passing: ResetAbove's; more: the k best, sorted, ties
// to the lower token).
func TestResetAboveTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, n := range []int{1, 5, 40, 1000, 5000} {
		for _, ties := range []bool{false, true} {
			logits := make([]float32, n)
			for i := range logits {
				if ties {
					logits[i] = float32(r.IntN(30)) / 3
				} else {
					logits[i] = float32(r.NormFloat64())
				}
			}
			for _, cut := range []float32{-10, 0, 1, 9, 100} {
				for _, k := range []int{0, 1, 3, 27, 2000} {
					var a, b Candidates
					a.ResetAbove(logits, cut)
					if ties {
						// KeepTopK's choice among ties at the boundary is
						// arbitrary: the reference is the stable order.
						if k > 0 && k < len(a.Items) {
							a.sort()
							a.Items = a.Items[:k]
						}
					} else {
						a.KeepTopK(k)
					}
					b.ResetAboveTopK(logits, cut, k)
					if !slices.Equal(a.Items, b.Items) {
						t.Fatalf("n=%d ties=%v cut=%g k=%d: %d items %v..., want %d %v...", n, ties, cut, k,
							len(b.Items), b.Items[:min(3, len(b.Items))], len(a.Items), a.Items[:min(3, len(a.Items))])
					}
				}
			}
		}
	}
}
