package policy

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestForkMinP(t *testing.T) {
	f := DefaultFork()
	if got := f.MinP(0); got != 0.15 {
		t.Errorf("MinP(0) = %v", got)
	}
	if got := f.MinP(100); !near(got, 0.05, 1e-12) {
		t.Errorf("MinP(100) = %v", got)
	}
	// Geometric midpoint at the middle of the range.
	if got := f.MinP(15); !near(got, math.Sqrt(0.15*0.05), 1e-12) {
		t.Errorf("MinP(15) = %v", got)
	}
	prev := 1.0
	for v := 0.0; v < 40; v += 0.5 {
		m := f.MinP(v)
		if m > prev {
			t.Fatalf("MinP not monotone at %v", v)
		}
		prev = m
	}
}

func TestForkSelect(t *testing.T) {
	f := DefaultFork()
	// Three real options and a tail: (.4, .3, .2, 10 x .01).
	ps := []float64{.4, .3, .2}
	for range 10 {
		ps = append(ps, .01)
	}
	logits := logs(ps...)
	_, v := LogitEntropy(logits)
	got := f.Select(nil, logits, v, 8)
	if len(got) != 3 || got[0].Token != 0 || got[1].Token != 1 || got[2].Token != 2 {
		t.Fatalf("fork %+v, want tokens 0, 1, 2", got)
	}
	if !near(math.Exp(got[1].LogProb), .3, 1e-6) {
		t.Errorf("candidate logprob %v, want log .3", got[1].LogProb)
	}
	// Budget caps the width; below 2 there is no fork.
	if got := f.Select(nil, logits, v, 2); len(got) != 2 {
		t.Errorf("budget 2: %d candidates", len(got))
	}
	if got := f.Select(nil, logits, v, 1); len(got) != 0 {
		t.Errorf("budget 1: %d candidates", len(got))
	}
	// MaxWidth caps it too.
	f.MaxWidth = 2
	if got := f.Select(nil, logits, v, 8); len(got) != 2 {
		t.Errorf("max width 2: %d candidates", len(got))
	}
	// A dominant token with a noise tail does not fork: the runner-up is
	// below the cut and is not forced in.
	f = DefaultFork()
	l := headAndTail(.8, 1023)
	_, v = LogitEntropy(l)
	if got = f.Select(nil, l, v, 8); len(got) != 0 {
		t.Errorf("head and tail: %+v", got)
	}
	// Masked tokens never join.
	ninf := float32(math.Inf(-1))
	if got := f.Select(nil, []float32{1, ninf, ninf}, 5, 8); len(got) != 0 {
		t.Errorf("one live token: %+v", got)
	}
}

func TestForkSelectMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	f := Fork{MaxWidth: 16, MinPHigh: 0.5, MinPLow: 0.001, VarLow: 0, VarHigh: 10}
	for range 100 {
		logits := randomLogits(r, 2000)
		v := r.Float64() * 12
		got := f.Select(nil, logits, v, 64)
		mx := float64(logits[0])
		for _, l := range logits {
			mx = math.Max(mx, float64(l))
		}
		cut := mx + math.Log(f.MinP(v))
		n := 0
		for _, l := range logits {
			if float64(l) >= cut {
				n++
			}
		}
		want := min(n, 16)
		if want < 2 {
			want = 0
		}
		if len(got) != want {
			t.Fatalf("width %d, want %d", len(got), want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].LogProb > got[i-1].LogProb {
				t.Fatal("candidates not sorted")
			}
		}
	}
}

func TestForkValidate(t *testing.T) {
	if err := DefaultFork().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fork{
		{MaxWidth: 1, MinPHigh: .3, MinPLow: .05, VarHigh: 1},
		{MaxWidth: 4, MinPHigh: .01, MinPLow: .05, VarHigh: 1},
		{MaxWidth: 4, MinPHigh: .3, MinPLow: .05, VarLow: 2, VarHigh: 1},
		{MaxWidth: MaxForkWidth + 1, MinPHigh: .3, MinPLow: .05, VarHigh: 1},
	} {
		if f.Validate() == nil {
			t.Errorf("%+v validated", f)
		}
	}
}

// Both selections (the sorted list, the wide forks' heap) take what a
// full sort takes: the same tokens in the same order, ties at the boundary
// to the earlier token, the banned token never.
func TestTopLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for c := range 400 {
		n := 1 + r.IntN(3000)
		logits := make([]float32, n)
		levels := 2 + r.IntN(50) // few levels: many ties
		for i := range logits {
			logits[i] = float32(r.IntN(levels))
			if c%3 == 0 {
				logits[i] = float32(r.NormFloat64())
			}
		}
		width := 1 + r.IntN(64) // the sorted list up to 8, the heap beyond
		ban := r.IntN(n+1) - 1
		want := topLogitsSorted(logits, width, ban)
		got := topLogits(nil, logits, width, ban)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d (n=%d width=%d ban=%d): %v, want %v", c, n, width, ban, got, want)
		}
	}
}

// topLogitsSorted is the reference: every token but ban, by logit then
// token, the first width.
func topLogitsSorted(logits []float32, width, ban int) []Candidate {
	var all []Candidate
	for i, l := range logits {
		if i != ban {
			all = append(all, Candidate{Token: i, LogProb: float64(l)})
		}
	}
	slices.SortStableFunc(all, func(a, b Candidate) int { return cmp.Compare(b.LogProb, a.LogProb) })
	return all[:min(width, len(all))]
}
