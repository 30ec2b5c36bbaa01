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
