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

// maxLogit's four folds give the one fold's result bit for bit: NaN when
// there is one, +0 over -0, -Inf for an empty set.
func TestMaxLogitOneFold(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	vals := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), 1, -1, 2.5}
	var c Candidates
	for i := range 3000 {
		n := i % 40
		if i%100 == 0 {
			n = 1000 + r.IntN(1000)
		}
		c.Items = c.Items[:0]
		for j := range n {
			l := float32(r.NormFloat64())
			if r.IntN(3) == 0 {
				l = vals[r.IntN(len(vals))]
				if l == l && r.IntN(4) != 0 && l != 0 {
					l = vals[3+r.IntN(2)] // mostly signed zeros
				}
			}
			if r.IntN(200) > 1 && l != l {
				l = 0 // NaN now and then only
			}
			c.Items = append(c.Items, TokenLogit{ID: int32(j), Logit: l})
		}
		want := float32(math.Inf(-1))
		for _, it := range c.Items {
			want = max(want, it.Logit)
		}
		if got := c.maxLogit(); math.Float64bits(got) != math.Float64bits(float64(want)) {
			t.Fatalf("case %d (%d items): maxLogit %v (%x), one fold %v (%x)", i, n, got, math.Float64bits(got), want, math.Float64bits(float64(want)))
		}
	}
}
