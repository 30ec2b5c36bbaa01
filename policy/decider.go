package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// DefaultClarifyText is the text the engine tokenizes for Config.Clarify.
const DefaultClarifyText = " Wait,"

// DecideMode says whether the entropix policy decides alone or hands branch points to
// a search engine.
type DecideMode uint8

const (
	// SinglePath is the entropix sampler: every step yields a token.
	SinglePath DecideMode = iota
	// Search explores by branching instead of by chance: LELV takes the
	// argmax; any other row where at least two tokens pass the fork's
	// min-p cut is a Branch; HELV may still clarify, and HEHV hands
	// Backspace to the engine when the token it follows was uncertain;
	// every other row takes the argmax. Nothing is sampled.
	Search
)

var modeNames = [...]string{"single", "search"}

func (m DecideMode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("DecideMode(%d)", m)
}

// MarshalText encodes the mode by name ("single" or "search").
func (m DecideMode) MarshalText() ([]byte, error) {
	if int(m) >= len(modeNames) {
		return nil, fmt.Errorf("policy: invalid mode %d", m)
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText decodes "single" or "search".
func (m *DecideMode) UnmarshalText(b []byte) error {
	for i, n := range modeNames {
		if n == string(b) {
			*m = DecideMode(i)
			return nil
		}
	}
	return fmt.Errorf("policy: unknown mode %q (want single or search)", b)
}

// Action is what the entropix policy decided for one step.
type Action uint8

const (
	// Greedy appends the most probable token (LELV).
	Greedy Action = iota
	// Sample appends one draw: HELV while the clarify text is cooling down,
	// or LEHV in single-path mode (the reference's adjusted sample).
	Sample
	// Clarify appends the clarify tokens (HELV).
	Clarify
	// Resample appends a hot draw (HEHV).
	Resample
	// Backspace asks the engine to drop the previous token and choose it
	// again (HEHV, search mode): see Decider.Rewind.
	Backspace
	// Branch asks the engine to fork over Decision.Candidates (LEHV,
	// search mode).
	Branch
	// MultiSample appends the best by score of several adaptive draws.
	MultiSample
)

var actionNames = [...]string{"greedy", "sample", "clarify", "resample", "backspace", "branch", "adaptive"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", a)
}

// MarshalText encodes the action by name.
func (a Action) MarshalText() ([]byte, error) {
	if int(a) >= len(actionNames) {
		return nil, fmt.Errorf("policy: invalid action %d", a)
	}
	return []byte(actionNames[a]), nil
}

// UnmarshalText decodes an action name.
func (a *Action) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if n == string(b) {
			*a = Action(i)
			return nil
		}
	}
	return fmt.Errorf("policy: unknown action %q", b)
}

// Config configures the entropix policy. Build one with DefaultConfig and
// adjust it; NewDecider validates it.
type Config struct {
	Mode       DecideMode `json:"mode"`
	Thresholds Thresholds `json:"thresholds"`
	// Base are the base sampling parameters the quadrant formulas scale.
	Base Params `json:"base"`
	// Clarify are the token ids of the clarify text (DefaultClarifyText
	// tokenized for the loaded model, without BOS). Empty: HELV never
	// inserts, it samples hotter.
	Clarify []int `json:"clarify,omitempty"`
	// ClarifyCooldown is how many tokens must be accepted after a Clarify
	// decision (its own tokens included) before another.
	ClarifyCooldown int `json:"clarify_cooldown"`
	// ClarifyMinP is the least probability the model must give the
	// clarify text's first token where it would be inserted (0: no test).
	// A model that cannot read the text there (a task model that never
	// saw it, a model of another language) is not made to: the row is
	// decided as if there were no clarify text.
	ClarifyMinP float64 `json:"clarify_min_p"`
	// MaxClarifies bounds the insertions on one path (0: none). An
	// insertion that did not leave the model surer (the entropy of the row
	// after it not below the row's that called for it) also ends them on
	// that path.
	MaxClarifies int `json:"max_clarifies"`
	// AdaptiveSamples is the number of draws of the adaptive quadrant.
	AdaptiveSamples int  `json:"adaptive_samples"`
	Fork            Fork `json:"fork"`
	// Backspace lets HEHV hand Backspace to the engine in search mode, at
	// most MaxBackspaces times per branch, and only when the token it
	// would take back had p below BackspaceBelow (a confident token is
	// not the mistake); otherwise HEHV forks or takes the argmax.
	Backspace      bool    `json:"backspace"`
	MaxBackspaces  int     `json:"max_backspaces"`
	BackspaceBelow float64 `json:"backspace_below"`
	// Penalties on recently accepted tokens; zero value: off.
	Penalties Penalties `json:"penalties"`
	// Loop is when a path's own tokens are caught in a repetition loop
	// (the first clause of LoopRule; zero value: never). The next decision
	// then may not choose the token that goes on with the loop (as
	// llama.cpp's DRY sampler does), and a search cuts such a path while
	// another remains.
	Loop LoopRule `json:"loop"`
	// NoiseFloor drops tokens below this probability from the logit
	// entropy and varentropy (0: none); see NoiseFloor.
	NoiseFloor float64 `json:"noise_floor"`
	// Scales put the terms of the entropix score on a common scale (zero
	// value: the reference's log p + C).
	Scales Scales `json:"scales,omitzero"`
}

// DefaultConfig returns the single-path entropix sampler with the
// reference's constants. Clarify is empty: set it to the model's tokens for
// DefaultClarifyText.
func DefaultConfig() Config {
	return Config{
		Mode:            SinglePath,
		Thresholds:      EntropixV1,
		Base:            DefaultParams(),
		ClarifyCooldown: 32,
		ClarifyMinP:     DefaultClarifyMinP,
		MaxClarifies:    3,
		AdaptiveSamples: 5,
		Fork:            DefaultFork(),
		Backspace:       true,
		MaxBackspaces:   4,
		BackspaceBelow:  0.5,
		Loop:            DefaultLoopRule(),
	}
}

// DefaultClarifyMinP is Config.ClarifyMinP's default: the clarify text's
// first token must have p >= 1e-4 where it goes. On the arith models
// trained here " Wait," starts with p 1e-10 to 1e-8 at every HELV row (it
// is byte-fallback text they never saw), and inserting it wrecked them.
const DefaultClarifyMinP = 1e-4

// MaxAdaptiveSamples bounds Config.AdaptiveSamples.
const MaxAdaptiveSamples = 64

// Validate checks every field.
func (c *Config) Validate() error {
	if c.Mode > Search {
		return fmt.Errorf("config: invalid mode %d", c.Mode)
	}
	if err := c.Thresholds.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Base.Validate(); err != nil {
		return fmt.Errorf("config: base: %w", err)
	}
	for i, t := range c.Clarify {
		if t < 0 || t > math.MaxInt32 {
			return fmt.Errorf("config: clarify token %d is %d, want a token id", i, t)
		}
	}
	if c.ClarifyCooldown < 0 {
		return fmt.Errorf("config: clarify_cooldown %d, want >= 0", c.ClarifyCooldown)
	}
	if !(c.ClarifyMinP >= 0 && c.ClarifyMinP <= 1) {
		return fmt.Errorf("config: clarify_min_p %v, want [0, 1]", c.ClarifyMinP)
	}
	if c.MaxClarifies < 0 {
		return fmt.Errorf("config: max_clarifies %d, want >= 0", c.MaxClarifies)
	}
	if c.AdaptiveSamples < 1 || c.AdaptiveSamples > MaxAdaptiveSamples {
		return fmt.Errorf("config: adaptive_samples %d outside [1, %d]", c.AdaptiveSamples, MaxAdaptiveSamples)
	}
	if err := c.Fork.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.MaxBackspaces < 0 {
		return fmt.Errorf("config: max_backspaces %d, want >= 0", c.MaxBackspaces)
	}
	if !(c.BackspaceBelow >= 0 && c.BackspaceBelow <= 1) {
		return fmt.Errorf("config: backspace_below %v, want [0, 1]", c.BackspaceBelow)
	}
	p := &c.Penalties
	if p.Window < 0 || p.Window > 1<<16 || !(p.Repeat >= 0) || math.IsInf(p.Repeat, 0) ||
		math.IsNaN(p.Frequency) || math.IsInf(p.Frequency, 0) || math.IsNaN(p.Presence) || math.IsInf(p.Presence, 0) {
		return fmt.Errorf("config: penalties window %d repeat %v frequency %v presence %v out of range",
			p.Window, p.Repeat, p.Frequency, p.Presence)
	}
	if err := c.Scales.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Loop.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if !(c.NoiseFloor >= 0 && c.NoiseFloor < 1) {
		return fmt.Errorf("config: noise_floor %v, want [0, 1)", c.NoiseFloor)
	}
	return nil
}

// Step is the input of one decision.
type Step struct {
	// Logits of the row (len = vocabulary), or nil when Fetch gives them.
	Logits []float32
	// Fetch, when Logits is nil, gives the row, which Decide then reads
	// only where Measure (from MeasureMoments) cannot answer: a draw, a
	// penalty or a banned token, the clarify test, a fork wider than the
	// measured top tokens, a noise floor.
	Fetch func() []float32
	// Attention of the layers to average, normally just the last layer
	// (see MeasureAttention); may be empty.
	Attention []Attention
	// AttentionSums, when Attention is empty, are the layers' attention
	// summed where it was computed (MeasureAttentionSums); may be empty.
	AttentionSums []AttentionSums
	// Budget is the most branches a fork here may produce (search mode);
	// below 2, Branch is not an option.
	Budget int
	// PrevLogProb is log p of the token this row follows, as it was
	// chosen (nats); 0 (p = 1) when unknown. Search mode takes a token
	// back only when it was itself uncertain (Config.BackspaceBelow).
	PrevLogProb float64
	// Measure, when set, holds Logits' statistics measured ahead
	// (RowMeasurer, or MeasureMoments) with the configuration's noise
	// floor; otherwise, or with another floor, Decide measures the row
	// itself.
	Measure *RowMeasure
}

// row returns the step's logits, fetching them the first time.
func (s *Step) row() []float32 {
	if s.Logits == nil && s.Fetch != nil {
		s.Logits = s.Fetch()
	}
	return s.Logits
}

// n is the row's length.
func (s *Step) n() int {
	if s.Logits == nil && s.Measure != nil && s.Fetch != nil {
		return s.Measure.n
	}
	return len(s.row())
}

// logit returns token tok's logit, from the measured statistics when the
// row has not been fetched and they hold it.
func (s *Step) logit(st *rowStats, tok int) float32 {
	if s.Logits == nil {
		if tok == st.arg {
			return float32(st.max)
		}
		if m := s.Measure; m != nil {
			if i := slices.Index(m.top, int32(tok)); i >= 0 {
				return m.topLogits[i]
			}
		}
	}
	return s.row()[tok]
}

// topLogits appends to dst[:0] the width largest logits other than ban's
// (see topLogits), from the measured top tokens when the row has not been
// fetched and they hold that many.
func (s *Step) topLogits(dst []Candidate, width, ban int) []Candidate {
	if m := s.Measure; s.Logits == nil && m != nil {
		dst = dst[:0]
		for i, t := range m.top {
			if len(dst) == width {
				break
			}
			if int(t) != ban {
				dst = append(dst, Candidate{Token: int(t), LogProb: float64(m.topLogits[i])})
			}
		}
		if len(dst) == width || len(m.top) >= m.n {
			return dst
		}
	}
	return topLogits(dst, s.row(), width, ban)
}

// Decision is the outcome of one step, with its reason.
type Decision struct {
	Action Action `json:"action"`
	// Token is the token to append (the first clarify token for Clarify),
	// -1 for Branch and Backspace.
	Token int `json:"token"`
	// Tokens are the clarify tokens to append (Clarify only). Read-only:
	// it is the configuration's slice.
	Tokens []int `json:"tokens,omitempty"`
	// Candidates are the fork, most probable first (Branch only). They
	// live in the Decider's scratch until its next Decide: copy to keep.
	Candidates []Candidate `json:"candidates,omitempty"`
	Quadrant   Quadrant    `json:"quadrant"`
	Metrics    Metrics     `json:"metrics"`
	// Params are the sampling parameters used (zero when nothing was
	// drawn), Samples the number of draws.
	Params  Params `json:"params,omitzero"`
	Samples int    `json:"samples,omitempty"`
	// LogProb is log p(Token) at temperature 1 before any truncation
	// (nats; 0 when Token is -1), Confidence the step's entropix
	// confidence, Margin p(top1) - p(top2), Score = LogProb + Confidence.
	LogProb    float64 `json:"logprob"`
	Confidence float64 `json:"confidence"`
	Margin     float64 `json:"margin"`
	Score      float64 `json:"score"`
	// LogZ is log Σ exp(logits) of the row decided on (nats): log p(t) =
	// logits[t] - LogZ for any token t, without a second pass.
	LogZ float64 `json:"-"`
}

// StepScore returns the step's contribution to its path's score.
func (d *Decision) StepScore() StepScore {
	return StepScore{LogProb: d.LogProb, Confidence: d.Confidence, Margin: d.Margin, Score: d.Score}
}

// CandidateScore returns the step score of the branch that takes candidate
// c of a Branch decision.
func (d *Decision) CandidateScore(c Candidate) StepScore {
	return StepScore{LogProb: c.LogProb, Confidence: d.Confidence, Margin: d.Margin, Score: c.Score}
}

// String gives the decision and its reason, e.g.
// "LEHV H=2.722 V=23.035: branch ×2 [13 p=0.800, 7 p=0.000]".
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", d.Quadrant, d.Metrics, d.Action)
	switch d.Action {
	case Branch:
		fmt.Fprintf(&b, " ×%d [", len(d.Candidates))
		for i, c := range d.Candidates {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d p=%.3f", c.Token, math.Exp(c.LogProb))
		}
		b.WriteString("]")
	case Backspace:
	case Clarify:
		fmt.Fprintf(&b, " %v", d.Tokens)
	case Greedy:
		fmt.Fprintf(&b, " → %d", d.Token)
	default:
		if d.Samples > 1 {
			fmt.Fprintf(&b, " best of %d", d.Samples)
		}
		fmt.Fprintf(&b, " (%s) → %d", d.Params, d.Token)
	}
	if d.Token >= 0 {
		fmt.Fprintf(&b, " logp=%.3f score=%.3f", d.LogProb, d.Score)
	}
	return b.String()
}

// Decider is the per-branch state of the entropix policy: the generator, the
// penalty history, the clarify cooldown and the backspace count, plus
// scratch buffers. A branch that forks gets its own copy with Clone (or
// Split). A Decider is not safe for concurrent use; distinct Deciders are.
type Decider struct {
	cfg          *Config // shared by clones, never modified
	rng          RNG
	pen          Penalties
	sinceClarify int // tokens accepted since the last Clarify decision
	clarifies    int // Clarify decisions on this path
	// clarifyH is the entropy of the row that called for the last
	// insertion, until the row after it is compared with it (NaN: none
	// pending); clarifyOff ends insertions on the path (one did not help).
	clarifyH   float64
	clarifyOff bool
	generated  int // tokens accepted since Reset/Prime (prompt excluded)
	// recent are the last tokens accepted (prompt excluded), as far back
	// as a loop reaches; loop is the period of the loop the last one
	// completed (0: none).
	recent     []int
	loop       int
	backspaces int
	ban        int // token the next Decide may not choose (after Rewind), -1 none

	cand Candidates
	fork []Candidate
}

// NewDecider validates cfg and returns a policy whose generator is
// NewRNG(seed, stream).
func NewDecider(cfg Config, seed, stream uint64) (*Decider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg
	c.Clarify = slices.Clone(cfg.Clarify)
	c.Penalties.hist = nil
	t := &Decider{cfg: &c, rng: NewRNG(seed, stream), pen: c.Penalties}
	t.Reset()
	return t, nil
}

// Config returns the configuration (do not modify its slices).
func (t *Decider) Config() Config { return *t.cfg }

// Reset rewinds the generator and forgets all history.
func (t *Decider) Reset() {
	t.rng.Reset()
	t.pen.Reset()
	t.sinceClarify = t.cfg.ClarifyCooldown
	t.clarifies = 0
	t.clarifyH = math.NaN()
	t.clarifyOff = false
	t.generated = 0
	t.recent = t.recent[:0]
	t.loop = 0
	t.backspaces = 0
	t.ban = -1
}

// Prime feeds the prompt to the penalty history; prompt tokens are never
// backspaced over.
func (t *Decider) Prime(prompt []int) {
	for _, tok := range prompt {
		t.pen.Accept(tok)
	}
}

// Accept records a token appended to the branch: every one, including
// clarify tokens and the token a fork forced.
func (t *Decider) Accept(token int) {
	t.pen.Accept(token)
	if t.sinceClarify < math.MaxInt32 {
		t.sinceClarify++
	}
	t.generated++
	if r := &t.cfg.Loop; r.MaxPeriod > 0 {
		// Keep twice the reach, shifting half of it out when full.
		if reach := max(r.MaxPeriod*r.MinRepeats, r.MinSpan); len(t.recent) >= 2*reach {
			t.recent = append(t.recent[:0], t.recent[len(t.recent)-reach:]...)
		}
		t.recent = append(t.recent, token)
		t.loop = r.LoopingAt(t.recent)
	}
}

// Looping returns the period of the repetition loop (Config.Loop) the
// path's last token completed, or 0.
func (t *Decider) Looping() int { return t.loop }

// Rewind undoes the Accept of the last token after a Backspace decision: the
// engine drops token from the branch and calls Decide again with the logits
// that chose it; that decision will neither choose token again nor
// backspace.
func (t *Decider) Rewind(token int) {
	t.pen.Unaccept()
	if t.generated > 0 {
		t.generated--
	}
	if t.sinceClarify > 0 {
		t.sinceClarify--
	}
	t.backspaces++
	t.ban = token
	if n := len(t.recent); n > 0 {
		t.recent = t.recent[:n-1]
		t.loop = t.cfg.Loop.LoopingAt(t.recent)
	}
}

// Clone returns an independent copy whose generator continues from the same
// state (the same draws, given the same logits).
func (t *Decider) Clone() *Decider {
	c := &Decider{
		cfg:          t.cfg,
		rng:          t.rng,
		pen:          *t.pen.clone(),
		sinceClarify: t.sinceClarify,
		clarifies:    t.clarifies,
		clarifyH:     t.clarifyH,
		clarifyOff:   t.clarifyOff,
		generated:    t.generated,
		recent:       slices.Clone(t.recent),
		loop:         t.loop,
		backspaces:   t.backspaces,
		ban:          t.ban,
	}
	return c
}

// Split is Clone with a generator derived for stream (t's generator
// advances by one draw), so sibling branches draw independently.
func (t *Decider) Split(stream uint64) *Decider {
	c := t.Clone()
	c.rng = t.rng.Split(stream)
	return c
}

var errNoLogits = errors.New("policy: empty logits")

// Decide measures the row, classifies it and decides. It allocates nothing
// once its scratch has grown (Decision.String aside).
func (t *Decider) Decide(s Step) (Decision, error) {
	n := s.n()
	if n == 0 {
		return Decision{Token: -1}, errNoLogits
	}
	cfg := t.cfg
	var st rowStats
	if m := s.Measure; m != nil && m.ok && m.floor == cfg.NoiseFloor {
		st = m.st
	} else {
		st = measureLogits(s.row(), cfg.NoiseFloor)
	}
	if math.IsNaN(st.h) || math.IsNaN(st.v) {
		return Decision{Token: -1}, fmt.Errorf("policy: row of %d logits: %w", n, errBadLogits)
	}
	if math.IsInf(st.max, -1) {
		return Decision{Token: -1}, fmt.Errorf("policy: every one of %d logits is -Inf", n)
	}
	m := Metrics{Entropy: st.h, Varentropy: st.v}
	if len(s.Attention) > 0 {
		am, err := MeasureAttention(s.Attention...)
		if err != nil {
			return Decision{Token: -1}, fmt.Errorf("policy: %w", err)
		}
		m.Attention = am
	} else if len(s.AttentionSums) > 0 {
		am, err := MeasureAttentionSums(s.AttentionSums...)
		if err != nil {
			return Decision{Token: -1}, fmt.Errorf("policy: %w", err)
		}
		m.Attention = am
	}
	if !math.IsNaN(t.clarifyH) && t.sinceClarify >= len(cfg.Clarify) {
		// The row after an insertion: it helped if the model is surer.
		if !(m.Entropy < t.clarifyH) {
			t.clarifyOff = true
		}
		t.clarifyH = math.NaN()
	}
	ban := t.ban
	t.ban = -1
	if ban < 0 && t.loop > 0 {
		// Break the loop: not the token that repeats the unit again.
		ban = t.recent[len(t.recent)-t.loop]
	}
	if ban >= n {
		ban = -1
	}
	d := Decision{
		Token:      -1,
		Quadrant:   cfg.Thresholds.Quadrant(m),
		Metrics:    m,
		Confidence: Confidence(m),
		Margin:     st.margin(),
		LogZ:       st.max + st.logZ,
	}

	var err error
	if cfg.Mode == Search {
		err = t.decideSearch(&d, &s, &st, ban)
	} else {
		err = t.decideSingle(&d, &s, &st, ban)
	}
	if err != nil {
		return Decision{Token: -1}, err
	}
	if d.Token >= 0 {
		d.LogProb = st.logProb(s.logit(&st, d.Token))
		d.Score = cfg.Scales.Score(m, d.LogProb)
	} else if d.Action != Branch && d.Action != Backspace {
		return Decision{Token: -1}, fmt.Errorf("policy: no token left to choose from a row of %d logits", n)
	}
	return d, nil
}

// greedy returns the most probable token after penalties, never ban.
func (t *Decider) greedy(s *Step, st *rowStats, ban int) int {
	if ban < 0 && !t.pen.Active() {
		return st.arg
	}
	c := &t.cand
	c.Reset(s.row())
	t.pen.Apply(c)
	if ban >= 0 {
		c.Remove(ban)
	}
	return c.ArgMax()
}

// sample runs penalties → temperature → min-p → top-k → top-p and draws n
// tokens, returning the most probable one under the untruncated
// distribution (the best entropix score, since every draw of one step has
// the same confidence) and the number of draws.
func (t *Decider) sample(s *Step, st *rowStats, p Params, n, ban int) (int, int) {
	logits := s.row()
	c := &t.cand
	if ban < 0 && !t.pen.Active() && p.Temperature > 0 && p.MinP > 0 {
		// min-p while loading: p_i/p_max >= min_p at temperature T
		// iff l_i >= max + T·ln(min_p).
		c.ResetAboveTopK(logits, float32(st.max+p.Temperature*math.Log(p.MinP)), p.TopK)
		c.Scale(p.Temperature)
	} else {
		c.Reset(logits)
		t.pen.Apply(c)
		if ban >= 0 {
			c.Remove(ban)
		}
		c.Scale(p.Temperature)
		c.KeepMinP(p.MinP)
	}
	c.KeepTopK(p.TopK)
	c.KeepTopP(p.TopP)
	if !c.prepareDraw() {
		return -1, 0
	}
	best, bestLogit := -1, float32(math.Inf(-1))
	for range n {
		tok := c.drawPrepared(&t.rng)
		if l := logits[tok]; best < 0 || l > bestLogit {
			best, bestLogit = tok, l
		}
	}
	return best, n
}

// decideSingle is Decide for the single-path sampler: every quadrant
// yields a token (or the clarify text).
func (t *Decider) decideSingle(d *Decision, s *Step, st *rowStats, ban int) error {
	cfg := t.cfg
	switch d.Quadrant {
	case LELV:
		d.Action = Greedy
		d.Token = t.greedy(s, st, ban)
	case HELV:
		if ok, err := t.clarify(d, s); ok || err != nil {
			return err
		}
		d.Action = Sample
		d.Params = UnsureParams(d.Metrics, cfg.Base)
		d.Token, d.Samples = t.sample(s, st, d.Params, 1, ban)
	case LEHV:
		d.Action = Sample
		d.Params = BranchParams(d.Metrics, cfg.Base)
		d.Token, d.Samples = t.sample(s, st, d.Params, 1, ban)
	case HEHV:
		d.Action = Resample
		d.Params = LostParams(d.Metrics, cfg.Base)
		d.Token, d.Samples = t.sample(s, st, d.Params, 1, ban)
	default:
		d.Action = MultiSample
		d.Params = AdaptiveParams(d.Metrics, cfg.Base)
		d.Token, d.Samples = t.sample(s, st, d.Params, cfg.AdaptiveSamples, ban)
	}
	return nil
}

// clarify makes d a Clarify decision when the clarify text may be
// inserted here: there is one, its cooldown has passed, the path has
// insertions left and none failed, and the model gives its first token p
// >= ClarifyMinP in this row. It reports whether it did.
func (t *Decider) clarify(d *Decision, s *Step) (bool, error) {
	cfg := t.cfg
	if len(cfg.Clarify) == 0 || t.sinceClarify < cfg.ClarifyCooldown || t.clarifyOff || t.clarifies >= cfg.MaxClarifies {
		return false, nil
	}
	n := s.n()
	if i := slices.IndexFunc(cfg.Clarify, func(tok int) bool { return tok >= n }); i >= 0 {
		return false, fmt.Errorf("policy: clarify token %d outside the vocabulary of %d", cfg.Clarify[i], n)
	}
	if cfg.ClarifyMinP > 0 && float64(s.row()[cfg.Clarify[0]])-d.LogZ < math.Log(cfg.ClarifyMinP) {
		return false, nil
	}
	d.Action = Clarify
	d.Tokens = cfg.Clarify
	d.Token = cfg.Clarify[0]
	t.sinceClarify = 0
	t.clarifies++
	t.clarifyH = d.Metrics.Entropy
	return true, nil
}

// decideSearch is Decide in search mode: forks where the min-p set holds
// two tokens or more, argmax elsewhere; HELV may clarify, HEHV may take an
// uncertain token back.
func (t *Decider) decideSearch(d *Decision, s *Step, st *rowStats, ban int) error {
	cfg := t.cfg
	switch d.Quadrant {
	case LELV:
		d.Action = Greedy
		d.Token = t.greedy(s, st, ban)
		return nil
	case HELV:
		if ok, err := t.clarify(d, s); ok || err != nil {
			return err
		}
		// Uniformly unsure is not a choice between a few options: a
		// fork here would explore interchangeable tokens (on the arith
		// models, the item words, 16 of them about equally likely).
		d.Action = Greedy
		d.Token = t.greedy(s, st, ban)
		return nil
	case HEHV:
		if cfg.Backspace && t.generated > 0 && t.backspaces < cfg.MaxBackspaces && ban < 0 &&
			math.Exp(s.PrevLogProb) < cfg.BackspaceBelow {
			d.Action = Backspace
			return nil
		}
	}
	t.fork = cfg.Fork.selectStats(t.fork[:0], s, st, d.Metrics.Varentropy, s.Budget, ban)
	if len(t.fork) >= 2 {
		for i := range t.fork {
			t.fork[i].Score = cfg.Scales.Score(d.Metrics, t.fork[i].LogProb)
		}
		d.Action = Branch
		d.Candidates = t.fork
		return nil
	}
	d.Action = Greedy
	d.Token = t.greedy(s, st, ban)
	return nil
}
