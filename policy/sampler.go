package policy

import (
	"fmt"
	"math"
	"strings"

	"github.com/entropix-search/entropix-search/policy/rowstat"
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
//
// The result, c included, is bit for bit that of c.Reset(logits) then
// ch.Apply(c), but the common chains skip the work on the whole vocabulary
// that cannot change it: see load.
func (ch *Chain) Sample(c *Candidates, logits []float32) int {
	for _, s := range ch.s[ch.load(c, logits):] {
		s.Apply(c)
	}
	return c.Token()
}

// load leaves c as c.Reset(logits) followed by the chain's first stages
// would, and returns how many stages it has so applied. It fuses the
// leading stages (penalties, then a temperature, then a min-p or a top-k
// cut, a top-k after the min-p) into the loading of the row, so that only
// the tokens that pass the cut are loaded:
//
//   - penalties change a few logits of a copy of the row;
//   - temperature 0 or less (or NaN) keeps the row's first argmax;
//   - min-p at temperature T keeps l·(1/T) >= max·(1/T) + ln p, compared
//     in float32 as KeepMinP compares them: that is l >= L for the least
//     float32 L that passes (the rounded product is monotone in l), and
//     one scan loads the logits above the L of the largest seen so far
//     (loadMinP), then scales them;
//   - top-k (alone, or after a min-p that many pass) loads only the k
//     best (ResetAboveTopK) when they are the only k best after scaling:
//     with a tie at the k-th scaled logit, KeepTopK's choice among the
//     tied tokens depends on its partitioning of the whole set, so that
//     set is loaded and cut as the stages would.
//
// A row with a NaN or +Inf, a temperature whose reciprocal is 0 or +Inf
// as a float32, or any other order falls back to the stages themselves,
// as does everything after the fused stages (then the set is small).
func (ch *Chain) load(c *Candidates, logits []float32) int {
	st := ch.s
	if len(logits) == 0 {
		c.Reset(logits)
		return 0
	}
	row, i := logits, 0
	for ; i < len(st); i++ {
		p, ok := st[i].(*Penalties)
		if !ok {
			break
		}
		if !p.Active() || len(p.hist) == 0 {
			continue // a no-op
		}
		if &row[0] == &logits[0] {
			c.row = append(c.row[:0], logits...)
			row = c.row
		}
		p.applyRow(row)
	}
	j := i // the first stage not fused yet
	inv, scaled := float32(1), false
	if j < len(st) {
		if t, ok := st[j].(Temperature); ok {
			j++
			switch tf := float64(t); {
			case tf == 1:
			case tf <= 0 || math.IsNaN(tf):
				c.resetArgMax(row)
				return j
			default:
				inv, scaled = float32(1/tf), true
				if inv == 0 || math.IsInf(float64(inv), 1) {
					c.Reset(row)
					return i
				}
			}
		}
	}
	j = skipNoOps(st, j)
	if j == len(st) {
		c.resetScaled(row, inv, scaled)
		return j
	}
	switch s := st[j].(type) {
	case MinP: // > 0: skipNoOps passed it
		if !rowstat.Finite(row) {
			break
		}
		next := skipNoOps(st, j+1)
		k, ok := topK(st, next)
		switch c.loadCut(row, inv, float64(s), k) {
		case cutDone:
			if ok {
				return next + 1
			}
			return next
		case cutTied:
			break // (the stages from min-p on)
		default:
			m, _, _ := rowstat.Top2(row)
			// KeepMinP's cut, with the row's largest scaled logit.
			lo := leastScaledAtLeast(inv, float32(float64(m*inv)+math.Log(min(float64(s), 1))))
			if ok && !math.IsInf(float64(lo), -1) {
				c.loadTopK(row, lo, inv, k)
				return next + 1
			}
			c.ResetAbove(row, lo)
			c.scale(inv)
			return next
		}
	case TopK: // > 0: skipNoOps passed it
		// (Without a floor, below 1024 logits, the scan loads them all.)
		if int(s) >= len(row) || len(row) < 1024 || !rowstat.Finite(row) {
			break
		}
		switch c.loadCut(row, inv, 0, int(s)) {
		case cutDone:
			return j + 1
		case cutGiveUp:
			c.ResetAboveTopK(row, -math.MaxFloat32, int(s))
			if c.sorted && !c.tiedAtK(row, inv) { // else at most k finite logits, or a tie at the k-th
				c.scaleSorted(inv)
				return j + 1
			}
		}
	}
	c.resetScaled(row, inv, scaled)
	return j
}

// skipNoOps returns the index of the first stage from i that is not a
// no-op whatever the candidates: MinP <= 0 or NaN, TopK <= 0, TopP >= 1
// or NaN.
func skipNoOps(st []Sampler, i int) int {
	for ; i < len(st); i++ {
		switch s := st[i].(type) {
		case MinP:
			if s > 0 {
				return i
			}
		case TopK:
			if s > 0 {
				return i
			}
		case TopP:
			if s < 1 {
				return i
			}
		default:
			return i
		}
	}
	return i
}

// topK returns stage i's k when it is a TopK above 0.
func topK(st []Sampler, i int) (int, bool) {
	if i < len(st) {
		if k, ok := st[i].(TopK); ok && k > 0 {
			return int(k), true
		}
	}
	return 0, false
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

// seen yields every token of the recent history once, with its count
// there, in the order of first appearance.
func (p *Penalties) seen(yield func(t int32, count int) bool) {
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
		if !yield(t, count) {
			return
		}
	}
}

// applyRow penalizes a whole row of logits indexed by token, as Apply
// penalizes a freshly loaded one.
func (p *Penalties) applyRow(row []float32) {
	for t, count := range p.seen {
		if int(t) >= 0 && int(t) < len(row) {
			p.penalize(&row[t], count)
		}
	}
}

// Apply penalizes the candidates seen in the recent history.
func (p *Penalties) Apply(c *Candidates) {
	if !p.Active() || len(p.hist) == 0 {
		return
	}
	for t, count := range p.seen {
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
