package engine

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/policy"
)

// Mode is a decoding strategy. Every mode runs in the same engine with the
// same budget accounting, so modes compare at equal compute.
type Mode uint8

const (
	Greedy          Mode = iota // argmax at every step
	Sample                      // the sampler chain (temperature, top-k, top-p, min-p, penalties)
	Entropix                    // the single-path entropix sampler (quadrants, clarify)
	Beam                        // fixed-width beam search, length-normalised log-probability
	CoTDecoding                 // top-k first tokens, then greedy; best by answer margin
	BeamAdaptive                // varentropy-driven tree search (the product)
	SelfConsistency             // K samples in one batch; the answer most of them reach (Wang et al., 2023)
	BestOfN                     // K samples in one batch; the one of highest mean log-probability
)

var modeNames = [...]string{"greedy", "sample", "entropix", "beam", "cot-decoding", "beam-adaptive", "self-consistency", "best-of"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Modes lists every mode, in order.
func Modes() []Mode {
	return []Mode{Greedy, Sample, Entropix, Beam, CoTDecoding, BeamAdaptive, SelfConsistency, BestOfN}
}

// ParseMode reads a mode name ("beam-adaptive", ...).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("engine: unknown mode %q (want one of %v)", s, modeNames)
}

// MarshalText encodes the mode by name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText decodes a mode name.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	*m = v
	return err
}

// Budget bounds a search. MaxTokens must be positive; zero elsewhere means
// the default (or no limit, for MaxRows and the deadlines).
type Budget struct {
	// MaxTokens bounds the new tokens of the committed path (and the depth
	// of every branch below the prompt).
	MaxTokens int
	// MaxRows bounds the forward rows spent after the prompt: the compute
	// budget, comparable across modes (a step over B branches costs B rows;
	// the prompt's prefill is counted in Stats.PromptRows, not here).
	MaxRows int
	// MaxWidth bounds the live branches at any time (default: Options.Width
	// for beam, cot-decoding and the sampling modes, 4 for beam-adaptive;
	// 1 for single-path modes).
	MaxWidth int
	// Deadline and Timeout stop the search with its best result so far;
	// the context passed to Search may carry a deadline too.
	Deadline time.Time
	Timeout  time.Duration
}

// Sampling configures the Sample mode's chain.
type Sampling struct {
	Temperature float64 `json:"temperature"` // default 0.8
	TopK        int     `json:"top_k"`       // 0: off
	TopP        float64 `json:"top_p"`       // 0 or 1: off
	MinP        float64 `json:"min_p"`       // 0: off
	// RepeatPenalty divides (or multiplies, when negative) the logits of
	// the last RepeatWindow tokens; 0 or 1: off. PresencePenalty subtracts
	// from the logit of every token among them, FrequencyPenalty that
	// much per occurrence (OpenAI's and llama.cpp's penalties; 0: off).
	RepeatPenalty    float64 `json:"repeat_penalty"`
	RepeatWindow     int     `json:"repeat_window"`
	PresencePenalty  float64 `json:"presence_penalty"`
	FrequencyPenalty float64 `json:"frequency_penalty"`
}

// DefaultSampling returns llama.cpp-like defaults.
func DefaultSampling() Sampling {
	return Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}
}

// Options configure an Engine.
type Options struct {
	Mode Mode
	Seed uint64
	// Width is K of beam, cot-decoding, self-consistency and best-of
	// (default 4).
	Width int
	// Policy configures the entropix policy (thresholds, clarify cooldown,
	// fork width, ...). Its Clarify tokens are filled from ClarifyText.
	Policy policy.Config
	// ClarifyText is inserted when the model is uniformly unsure
	// (default policy.DefaultClarifyText); "-" disables insertion.
	ClarifyText string
	Sampling    Sampling
	// Score weighs beam-adaptive's finished paths in the vote on the
	// answer (default: policy.ScoreLogProb, the path's probability);
	// cot-decoding always uses the margin.
	Score policy.ScoreKind
	// CacheTokens is the KV cache capacity in token positions over all
	// branches (default: 4 contexts' worth, at most 65536).
	CacheTokens int

	// KVType is the element type of the KV cache: kvcache.F32 (the zero
	// value) keeps keys and values exactly; kvcache.F16 stores them in
	// half the memory and attention reads half the bytes, rounding each to
	// about 3 significant digits (llama.cpp's default).
	KVType kvcache.ElemType
	// Backend names the model.Backend that runs the forward pass (default
	// "cpu"): a program imports its package for its side effect (the
	// CPU's: import _ "github.com/entropix-search/entropix-search/model/cpu").
	Backend string
	// StopTokens end a branch like end of text (e.g. a chat template's
	// end-of-turn token); they are not part of the result.
	StopTokens []int
	// StopStrings end a branch at the token whose text completes one of
	// them, in every mode; the result's text ends before it (see
	// stopstr.go for Text, Tokens, the tree and the stream).
	StopStrings []string
	// Stream, if set, receives committed text as soon as it is decided.
	Stream func(text string)
	// Log receives debug decisions (zerolog; default: disabled, at no cost).
	Log zerolog.Logger
	// Progress, if set, is called after every step.
	Progress func(Progress)
	// Answer extracts the final answer of a completion (for a math task,
	// the number after "####"), reporting false when it has none.
	// Self-consistency votes on it; without it, it votes on the whole
	// text.
	Answer func(completion string) (string, bool)
	// TopProbs, when above 0, keeps in every tree node the TopProbs most
	// probable tokens of the distribution its token was chosen from
	// (tree.Node.Top; llama.cpp's n_probs).
	TopProbs int
	// IgnoreEOS never lets the model end the text: the end-of-sequence
	// token gets probability 0 (llama.cpp's --ignore-eos).
	IgnoreEOS bool
	// Observe, if set, receives every decision row of beam-adaptive
	// search (for calibration: policy.CalibrateSearch).
	Observe func(policy.Observation)
	// Verifier, if set, judges the complete paths of beam-adaptive, beam,
	// self-consistency and best-of-N, whose answer vote it then weighs
	// (see Verifier); its rows count in the budget. An engine's verifier
	// is fixed at New: a search may only turn it off (nil).
	Verifier *Verifier
}

// Progress is a snapshot of a running search.
type Progress struct {
	Step      int
	Live      int // live branches
	Committed int // tokens on the committed path
	Deepest   int // tokens of the deepest live branch (beam commits only at the end)
	Stats     Stats
	Budget    Budget
}

// Option changes Options.
type Option func(*Options)

// WithVerifier judges the complete paths with v and weighs the answer
// vote by its verdicts (nil: none, the model's own confidence).
func WithVerifier(v *Verifier) Option { return func(o *Options) { o.Verifier = v } }

// WithMode selects the decoding mode.
func WithMode(m Mode) Option { return func(o *Options) { o.Mode = m } }

// WithSeed sets the seed of every random draw.
func WithSeed(seed uint64) Option { return func(o *Options) { o.Seed = seed } }

// WithTopProbs sets Options.TopProbs.
func WithTopProbs(n int) Option { return func(o *Options) { o.TopProbs = n } }

// WithIgnoreEOS sets Options.IgnoreEOS.
func WithIgnoreEOS(on bool) Option { return func(o *Options) { o.IgnoreEOS = on } }

// WithObserver sets Options.Observe.
func WithObserver(f func(policy.Observation)) Option { return func(o *Options) { o.Observe = f } }

// WithAnswer sets the answer extractor self-consistency votes with.
func WithAnswer(f func(completion string) (string, bool)) Option {
	return func(o *Options) { o.Answer = f }
}

// WithWidth sets K for beam, cot-decoding, self-consistency and best-of.
func WithWidth(k int) Option { return func(o *Options) { o.Width = k } }

// WithPolicy sets the entropix policy configuration.
func WithPolicy(c policy.Config) Option { return func(o *Options) { o.Policy = c } }

// WithThresholds sets the quadrant thresholds.
func WithThresholds(t policy.Thresholds) Option { return func(o *Options) { o.Policy.Thresholds = t } }

// WithClarifyText sets the text inserted when the model is uniformly unsure.
func WithClarifyText(s string) Option { return func(o *Options) { o.ClarifyText = s } }

// WithSampling configures the Sample mode.
func WithSampling(s Sampling) Option { return func(o *Options) { o.Sampling = s } }

// WithScore picks how beam-adaptive weighs its finished paths.
func WithScore(k policy.ScoreKind) Option { return func(o *Options) { o.Score = k } }

// WithStream delivers committed text as it is decided.
func WithStream(f func(text string)) Option { return func(o *Options) { o.Stream = f } }

// WithStopTokens ends branches at these tokens as at end of text.
func WithStopTokens(ids ...int) Option { return func(o *Options) { o.StopTokens = ids } }

// WithStopStrings ends branches at these strings of text (Options.StopStrings).
func WithStopStrings(s ...string) Option { return func(o *Options) { o.StopStrings = s } }

// WithProgress calls f after every step.
func WithProgress(f func(Progress)) Option { return func(o *Options) { o.Progress = f } }

// WithLogger logs decisions at debug level.
func WithLogger(l zerolog.Logger) Option { return func(o *Options) { o.Log = l } }

// WithKVType sets the element type of the KV cache (kvcache.F32 exactly,
// the default, or kvcache.F16 in half the memory).
func WithKVType(t kvcache.ElemType) Option { return func(o *Options) { o.KVType = t } }

// WithBackend sets the model.Backend that runs the forward pass, by the
// name it is registered under (model.RegisterBackend); "cpu" by default.
func WithBackend(name string) Option { return func(o *Options) { o.Backend = name } }

// WithCacheTokens sets the KV cache capacity in token positions.
func WithCacheTokens(n int) Option { return func(o *Options) { o.CacheTokens = n } }

func defaultOptions() Options {
	return Options{
		Mode:        BeamAdaptive,
		Width:       4,
		Policy:      policy.DefaultConfig(),
		ClarifyText: policy.DefaultClarifyText,
		Sampling:    DefaultSampling(),
		Score:       policy.ScoreLogProb,
		Log:         zerolog.Nop(),
	}
}
