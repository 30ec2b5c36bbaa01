package train

import (
	"fmt"
	"math/rand/v2"
)

// Example is one training sequence. The model learns to continue its first
// PromptLen tokens with the rest: only the tokens after the prompt are
// predicted (they carry the loss).
type Example struct {
	Tokens    []int32
	PromptLen int
}

// Loader cuts a fixed set of examples into batches in an order fixed by a
// seed: epoch e visits the examples in a permutation drawn from PCG(seed,
// e), and step s takes the next PerStep examples of that endless sequence.
// Batch(s) depends only on s, so a resumed run sees exactly the batches the
// interrupted one would have.
type Loader struct {
	examples []Example
	perStep  int
	rowLen   int
	seed     uint64

	permEpoch int
	perm      []int
}

// NewLoader returns a loader of perStep examples a step, packed into rows
// of at most rowLen tokens.
func NewLoader(examples []Example, perStep, rowLen int, seed uint64) (*Loader, error) {
	switch {
	case len(examples) == 0:
		return nil, fmt.Errorf("train: no examples")
	case perStep <= 0:
		return nil, fmt.Errorf("train: %d examples a step", perStep)
	}
	for i, e := range examples {
		if len(e.Tokens) < 2 || len(e.Tokens) > rowLen || e.PromptLen < 1 || e.PromptLen >= len(e.Tokens) {
			return nil, fmt.Errorf("train: example %d has %d tokens with a prompt of %d (rows hold %d)", i, len(e.Tokens), e.PromptLen, rowLen)
		}
	}
	return &Loader{examples: examples, perStep: perStep, rowLen: rowLen, seed: seed, permEpoch: -1}, nil
}

// Epoch returns the (fractional) number of passes over the examples made
// after step s.
func (l *Loader) Epoch(s int) float64 {
	return float64(s) * float64(l.perStep) / float64(len(l.examples))
}

// example returns the k-th example of the endless shuffled sequence.
func (l *Loader) example(k int) *Example {
	n := len(l.examples)
	if e := k / n; e != l.permEpoch {
		r := rand.New(rand.NewPCG(l.seed, uint64(e)))
		l.perm = r.Perm(n)
		l.permEpoch = e
	}
	return &l.examples[l.perm[k%n]]
}

// Batch returns the batch of step s: its examples packed first-fit into
// rows, each example at positions from 0, the rows as long as the longest.
func (l *Loader) Batch(s int) *Batch {
	type row struct {
		used int
		ex   []*Example
	}
	var rows []row
	for k := s * l.perStep; k < (s+1)*l.perStep; k++ {
		e := l.example(k)
		placed := false
		for i := range rows {
			if rows[i].used+len(e.Tokens) <= l.rowLen {
				rows[i].used += len(e.Tokens)
				rows[i].ex = append(rows[i].ex, e)
				placed = true
				break
			}
		}
		if !placed {
			rows = append(rows, row{used: len(e.Tokens), ex: []*Example{e}})
		}
	}
	t := 0
	for _, r := range rows {
		t = max(t, r.used)
	}
	b := &Batch{B: len(rows), T: t, Tokens: make([]int32, len(rows)*t), Targets: make([]int32, len(rows)*t), Pos: make([]int32, len(rows)*t)}
	for i, r := range rows {
		o := i * t
		for _, e := range r.ex {
			n := len(e.Tokens)
			copy(b.Tokens[o:], e.Tokens)
			for j := 0; j < n; j++ {
				b.Pos[o+j] = int32(j)
				b.Targets[o+j] = -1
				if j+1 < n && j+1 >= e.PromptLen {
					b.Targets[o+j] = e.Tokens[j+1]
				}
			}
			o += n
		}
		// Padding: a sequence of its own, token 0, without targets.
		for j := 0; o < (i+1)*t; j, o = j+1, o+1 {
			b.Pos[o], b.Targets[o] = int32(j), -1
		}
	}
	return b
}
