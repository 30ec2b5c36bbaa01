package policy

import "fmt"

// LoopRule defines when a token sequence is caught in a repetition loop. A
// "unit" is a run of P consecutive tokens, 1 <= P <= MaxPeriod; the
// sequence loops when
//
//   - some unit occurs at least MinRepeats times in a row, the
//     occurrences covering at least MinSpan tokens, or
//   - the sequence ends in at least two occurrences in a row of a unit that
//     cover at least TailSpan tokens (a loop cut short by the token limit).
//
// Occurrences in a row means tokens[j] == tokens[j-P] throughout: a final
// partial occurrence counts toward the span, not toward the repeats. The
// evaluation counts outputs with Loops; a search cuts a path with
// LoopingAt as soon as its last token completes a loop (the first clause).
type LoopRule struct {
	MaxPeriod  int `json:"max_period"`
	MinRepeats int `json:"min_repeats"`
	MinSpan    int `json:"min_span"`
	TailSpan   int `json:"tail_span"`
}

// DefaultLoopRule: units of up to 32 tokens, 3 repeats covering at least
// 8 tokens anywhere, or 2 covering at least 16 tokens at the end.
func DefaultLoopRule() LoopRule {
	return LoopRule{MaxPeriod: 32, MinRepeats: 3, MinSpan: 8, TailSpan: 16}
}

// Validate checks the rule; the zero rule (no loop detection) is valid.
func (r LoopRule) Validate() error {
	if r == (LoopRule{}) {
		return nil
	}
	if r.MaxPeriod < 1 || r.MinRepeats < 2 || r.MinSpan < 0 || r.TailSpan < 0 {
		return fmt.Errorf("loop rule %+v: want max period >= 1, min repeats >= 2, spans >= 0", r)
	}
	return nil
}

// Loops reports whether toks is caught in a repetition loop.
func (r LoopRule) Loops(toks []int) bool {
	n := len(toks)
	for p := 1; p <= r.MaxPeriod && 2*p <= n; p++ {
		run := 0 // j's with toks[j] == toks[j-p], ending at the current j
		for j := p; j < n; j++ {
			if toks[j] != toks[j-p] {
				run = 0
				continue
			}
			run++
			// The run covers p+run tokens: 1+run/p whole occurrences.
			if span := p + run; 1+run/p >= r.MinRepeats && span >= r.MinSpan {
				return true
			}
		}
		if run >= p && p+run >= r.TailSpan {
			return true
		}
	}
	return false
}

// LoopingAt returns the period of the loop that toks' last token completes
// (MinRepeats occurrences in a row of a unit, covering MinSpan tokens, at
// the end of toks), or 0 when it completes none. It looks back only as far
// as a loop may reach (MaxPeriod·MinRepeats tokens at most), and for most
// periods stops at the first token that breaks the run, so a search can
// ask at every token.
func (r LoopRule) LoopingAt(toks []int) int {
	if r.MaxPeriod < 1 || r.MinRepeats < 2 {
		return 0
	}
	n := len(toks)
	for p := 1; p <= r.MaxPeriod && 2*p <= n; p++ {
		need := max((r.MinRepeats-1)*p, r.MinSpan-p) // run of j's with toks[j] == toks[j-p]
		if need > n-p {
			continue
		}
		run := 0
		for j := n - 1; j >= p && run < need && toks[j] == toks[j-p]; j-- {
			run++
		}
		if run >= need {
			return p
		}
	}
	return 0
}
