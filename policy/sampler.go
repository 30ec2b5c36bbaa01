package policy

import (
	"fmt"
	"math"
	"strings"
)

// Sampler is one composable stage of token selection, in the llama.cpp
// spirit. Apply transforms the candidates (or selects one); Accept observes
// the token finally chosen; Reset forgets all state; Clone returns an
// independent copy, so that a branch gets its own state.
type Sampler interface {
	Name() string
	Apply(c *Candidates)
	Accept(token int)
	Reset()
	Clone() Sampler
}

// Temperature divides the logits by its value; 0 or less keeps only the
// most probable token.
type Temperature float64

func (t Temperature) Name() string        { return fmt.Sprintf("temp=%g", float64(t)) }
func (t Temperature) Apply(c *Candidates) { c.Scale(float64(t)) }
func (Temperature) Accept(int)            {}
func (Temperature) Reset()                {}
func (t Temperature) Clone() Sampler      { return t }

// TopK keeps the K most probable tokens; 0 or less is a no-op.
type TopK int

func (k TopK) Name() string        { return fmt.Sprintf("top-k=%d", int(k)) }
func (k TopK) Apply(c *Candidates) { c.KeepTopK(int(k)) }
func (TopK) Accept(int)            {}
func (TopK) Reset()                {}
func (k TopK) Clone() Sampler      { return k }

// TopP keeps the smallest set of most probable tokens whose mass reaches P.
type TopP float64

func (p TopP) Name() string        { return fmt.Sprintf("top-p=%g", float64(p)) }
func (p TopP) Apply(c *Candidates) { c.KeepTopP(float64(p)) }
func (TopP) Accept(int)            {}
func (TopP) Reset()                {}
func (p TopP) Clone() Sampler      { return p }

// MinP drops the tokens less probable than P times the most probable one.
type MinP float64

func (p MinP) Name() string        { return fmt.Sprintf("min-p=%g", float64(p)) }
func (p MinP) Apply(c *Candidates) { c.KeepMinP(float64(p)) }
func (MinP) Accept(int)            {}
func (MinP) Reset()                {}
func (p MinP) Clone() Sampler      { return p }

// ArgMax selects the most probable token.
type ArgMax struct{}

func (ArgMax) Name() string        { return "argmax" }
func (ArgMax) Apply(c *Candidates) { c.ArgMax() }
func (ArgMax) Accept(int)          {}
func (ArgMax) Reset()              {}
func (a ArgMax) Clone() Sampler    { return a }

// Dist selects a token at random from softmax of the candidates' logits,
// with a seeded generator that advances with every draw (inverse CDF over
// float64 cumulative weights). Reset rewinds the generator; a clone carries
// on from the same state independently.
type Dist struct{ RNG RNG }

// NewDist returns a Dist drawing from NewRNG(seed, stream).
func NewDist(seed, stream uint64) *Dist { return &Dist{RNG: NewRNG(seed, stream)} }

func (d *Dist) Name() string        { return "dist" }
func (d *Dist) Apply(c *Candidates) { c.Draw(&d.RNG) }
func (*Dist) Accept(int)            {}
func (d *Dist) Reset()              { d.RNG.Reset() }
func (d *Dist) Clone() Sampler      { e := *d; return &e }

// Chain runs its stages in order; the last one usually selects (ArgMax or
// Dist). Accept, Reset and Clone reach every stage.
type Chain struct{ s []Sampler }

// NewChain returns a chain of the given stages.
func NewChain(stages ...Sampler) *Chain { return &Chain{s: stages} }

// Sample loads logits into c, runs the chain and returns the selected token
// (-1 if no stage selected one). The caller then Accepts the token it keeps.
func (ch *Chain) Sample(c *Candidates, logits []float32) int {
	c.Reset(logits)
	ch.Apply(c)
	return c.Token()
}

// Samplers returns the stages.
func (ch *Chain) Samplers() []Sampler { return ch.s }

// Name lists the stages.
func (ch *Chain) Name() string {
	names := make([]string, len(ch.s))
	for i, s := range ch.s {
		names[i] = s.Name()
	}
	return "chain(" + strings.Join(names, ", ") + ")"
}

// Apply runs every stage in order.
func (ch *Chain) Apply(c *Candidates) {
	for _, s := range ch.s {
		s.Apply(c)
	}
}

// Accept passes token to every stage.
func (ch *Chain) Accept(token int) {
	for _, s := range ch.s {
		s.Accept(token)
	}
}

// Reset resets every stage.
func (ch *Chain) Reset() {
	for _, s := range ch.s {
		s.Reset()
	}
}

// Clone clones every stage.
func (ch *Chain) Clone() Sampler {
	out := &Chain{s: make([]Sampler, len(ch.s))}
	for i, s := range ch.s {
		out.s[i] = s.Clone()
	}
	return out
}

// DefaultPenaltyWindow is the window used when Penalties.Window is 0.
const DefaultPenaltyWindow = 64

// Penalties discourages the tokens seen among the last Window accepted ones
// (llama.cpp semantics): a seen token's logit is divided by Repeat when
// positive and multiplied by it when negative, then count·Frequency and, once,
// Presence are subtracted. Repeat 1 (or 0), Frequency 0 and Presence 0
// disable it. Apply it first in a chain, while the candidates are still a
// whole row: there it costs O(Window²); later it costs O(Len·Window).
type Penalties struct {
	Window    int     `json:"window,omitempty"`
	Repeat    float64 `json:"repeat,omitempty"`
	Frequency float64 `json:"frequency,omitempty"`
	Presence  float64 `json:"presence,omitempty"`

	hist []int32 // accepted tokens, oldest first; compacted at 2·window
}

// Active reports whether the penalties change anything.
func (p *Penalties) Active() bool {
	return (p.Repeat > 0 && p.Repeat != 1) || p.Frequency != 0 || p.Presence != 0
}

func (p *Penalties) window() int {
	if p.Window <= 0 {
		return DefaultPenaltyWindow
	}
	return p.Window
}

func (p *Penalties) recent() []int32 {
	return p.hist[max(0, len(p.hist)-p.window()):]
}

// Accept records token in the history.
func (p *Penalties) Accept(token int) {
	w := p.window()
	if len(p.hist) >= 2*w {
		n := copy(p.hist, p.hist[len(p.hist)-w:])
		p.hist = p.hist[:n]
	}
	p.hist = append(p.hist, int32(token))
}

// Unaccept removes the most recently accepted token (for a backspace).
func (p *Penalties) Unaccept() {
	if len(p.hist) > 0 {
		p.hist = p.hist[:len(p.hist)-1]
	}
}

// Name returns "penalties".
func (p *Penalties) Name() string { return "penalties" }

// Reset forgets the history.
func (p *Penalties) Reset() { p.hist = p.hist[:0] }

// Clone returns a copy with its own history.
func (p *Penalties) Clone() Sampler { return p.clone() }

func (p *Penalties) clone() *Penalties {
	q := *p
	q.hist = append([]int32(nil), p.hist...)
	return &q
}

// Apply penalizes the candidates seen in the recent history.
func (p *Penalties) Apply(c *Candidates) {
	if !p.Active() || len(p.hist) == 0 {
		return
	}
	rec := p.recent()
	for i, t := range rec {
		if seenBefore(rec[:i], t) {
			continue
		}
		count := 1
		for _, u := range rec[i+1:] {
			if u == t {
				count++
			}
		}
		if c.identity {
			if int(t) >= 0 && int(t) < len(c.Items) {
				p.penalize(&c.Items[t].Logit, count)
			}
			continue
		}
		for j := range c.Items {
			if c.Items[j].ID == t {
				p.penalize(&c.Items[j].Logit, count)
				break
			}
		}
	}
	c.sorted = false
}

func seenBefore(s []int32, t int32) bool {
	for _, u := range s {
		if u == t {
			return true
		}
	}
	return false
}

func (p *Penalties) penalize(l *float32, count int) {
	x := float64(*l)
	if math.IsInf(x, -1) {
		return
	}
	if r := p.Repeat; r > 0 && r != 1 {
		if x > 0 {
			x /= r
		} else {
			x *= r
		}
	}
	x -= float64(count)*p.Frequency + p.Presence
	*l = float32(x)
}
