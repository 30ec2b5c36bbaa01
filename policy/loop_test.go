package policy

import (
	"math/rand/v2"
	"testing"
)

// TestLoopingAt: a sequence loops by the rule's first clause exactly when
// one of its prefixes ends in a loop, as LoopingAt finds it token by token
// (random sequences over small alphabets, where loops are common).
func TestLoopingAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range []LoopRule{DefaultLoopRule(), {MaxPeriod: 4, MinRepeats: 2, MinSpan: 3}, {MaxPeriod: 1, MinRepeats: 3}} {
		anywhere := r
		anywhere.TailSpan = 1 << 30 // the first clause alone
		for range 3000 {
			toks := make([]int, 1+rng.IntN(60))
			alpha := 1 + rng.IntN(4)
			for i := range toks {
				toks[i] = rng.IntN(alpha)
			}
			found := 0
			for n := 1; n <= len(toks) && found == 0; n++ {
				found = r.LoopingAt(toks[:n])
				if found > 0 && !anywhere.Loops(toks[:n]) {
					t.Fatalf("rule %+v: LoopingAt(%v) = %d, but Loops says no", r, toks[:n], found)
				}
			}
			if want := anywhere.Loops(toks); (found > 0) != want {
				t.Fatalf("rule %+v, %v: LoopingAt found %d, Loops %v", r, toks, found, want)
			}
		}
	}
	if p := DefaultLoopRule().LoopingAt([]int{7, 1, 2, 3, 1, 2, 3, 1, 2, 3}); p != 3 {
		t.Errorf("period %d, want 3", p)
	}
	if p := (LoopRule{}).LoopingAt([]int{1, 1, 1, 1, 1, 1, 1, 1, 1}); p != 0 {
		t.Errorf("the zero rule found period %d", p)
	}
}

// TestTrunkBreaksLoop: once the path's tokens loop, the next decision does
// not choose the token that would repeat the unit again; a clone carries
// the loop, and without a rule nothing is banned.
func TestTrunkBreaksLoop(t *testing.T) {
	row := make([]float32, 16)
	row[1], row[4] = 5, 4 // the argmax 1, then 4
	for _, mode := range []DecideMode{SinglePath, Search} {
		cfg := DefaultConfig()
		cfg.Mode = mode
		tr := newDecider(t, cfg)
		for _, tok := range []int{1, 2, 3, 1, 2, 3, 1, 2, 3} {
			if tr.Looping() != 0 {
				t.Fatalf("looping after %d", tok)
			}
			tr.Accept(tok)
		}
		if tr.Looping() != 3 {
			t.Fatalf("%v: period %d after (1 2 3) x 3, want 3", mode, tr.Looping())
		}
		for _, tr := range []*Decider{tr.Clone(), tr} {
			if d := decide(t, tr, Step{Logits: row}); d.Token == 1 || d.Action == Branch {
				t.Errorf("%v: the loop went on: %v", mode, d)
			}
		}
		cfg.Loop = LoopRule{}
		tr = newDecider(t, cfg)
		for _, tok := range []int{1, 2, 3, 1, 2, 3, 1, 2, 3} {
			tr.Accept(tok)
		}
		if d := decide(t, tr, Step{Logits: row}); tr.Looping() != 0 || d.Token != 1 {
			t.Errorf("%v: no loop rule, yet %v (period %d)", mode, d, tr.Looping())
		}
	}
}
