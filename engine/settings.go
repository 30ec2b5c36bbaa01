package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/entropix-search/entropix-search/policy"
)

// Settings are a search's settings as data, JSON-able: the policy file's
// knobs (policy.File: thresholds, fork, clarify, backspace, penalties,
// score, clarify text, ...; in JSON a whole policy file under "policy",
// as in the server's entropix object) and the search's own (mode, token
// and row budgets, width, seed, sampling, answer, stop strings, ...).
// The command line's flags, the server's "entropix" object and
// --calibrate each fill one; Options and Budget turn it into the engine's
// options and a search's budget, the same way for all of them.
type Settings struct {
	policy.File `json:"policy"`
	// Mode is the decoding mode (the engine sets the policy's own mode,
	// policy.Config.Mode, for it).
	Mode Mode `json:"mode"`
	// MaxTokens bounds the new tokens (Budget.MaxTokens; default 256).
	MaxTokens int `json:"max_tokens"`
	// BudgetRows bounds the forward rows after the prompt
	// (Budget.MaxRows; 0: none, or the mode's default).
	BudgetRows int `json:"budget_rows"`
	// MaxWidth is the most live branches at once (Budget.MaxWidth): the
	// width K of beam, cot-decoding, self-consistency and best-of, and
	// beam-adaptive's; 0: the mode's default (Width for those four, 4
	// for beam-adaptive, 1 for the single-path modes).
	MaxWidth int `json:"max_width"`
	// Width is the default K of beam, cot-decoding, self-consistency and
	// best-of when MaxWidth is 0 (Options.Width; default 4).
	Width int    `json:"width"`
	Seed  uint64 `json:"seed"`
	// Sampling configures the sampler of sample, self-consistency and
	// best-of.
	Sampling Sampling `json:"sampling"`
	// Answer names how a path's answer is read for the votes of
	// self-consistency, cot-decoding and beam-adaptive (Options.Answer):
	// "marked" (policy.MarkedAnswer: the number after "####" or "answer
	// is"), "last-number" (policy.ExtractAnswer: that, else the last
	// number), "none" (the whole text), or "" for the mode's default
	// (beam-adaptive: marked; self-consistency and best-of:
	// last-number; the others: none).
	Answer string `json:"answer"`
	// Stop are stop strings (Options.StopStrings).
	Stop []string `json:"stop,omitempty"`
	// TopProbs keeps the most probable alternatives of every token in
	// the tree (Options.TopProbs).
	TopProbs int `json:"top_probs,omitempty"`
	// IgnoreEOS never lets the model end the text (Options.IgnoreEOS).
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
}

// DefaultSettings are the settings of a search nobody configured:
// beam-adaptive with the default policy, 256 tokens, seed 0.
func DefaultSettings() Settings {
	return Settings{File: policy.DefaultFile(), Mode: BeamAdaptive, MaxTokens: 256, Width: 4, Sampling: DefaultSampling()}
}

// answers are the answer readers Settings.Answer names.
var answers = map[string]func(string) (string, bool){
	"marked":      policy.MarkedAnswer,
	"last-number": policy.ExtractAnswer,
	"none":        nil,
}

// Validate checks every field.
func (st *Settings) Validate() error {
	var errs []error
	if err := st.File.Validate(); err != nil {
		errs = append(errs, err)
	}
	if int(st.Mode) >= len(modeNames) {
		errs = append(errs, fmt.Errorf("invalid mode %d", st.Mode))
	}
	if st.MaxTokens <= 0 {
		errs = append(errs, fmt.Errorf("max_tokens %d: must be positive", st.MaxTokens))
	}
	if st.BudgetRows < 0 {
		errs = append(errs, fmt.Errorf("budget_rows %d: must not be negative", st.BudgetRows))
	}
	if st.MaxWidth < 0 || st.MaxWidth > policy.MaxForkWidth {
		errs = append(errs, fmt.Errorf("max_width %d: want 0..%d", st.MaxWidth, policy.MaxForkWidth))
	}
	if st.Width < 1 || st.Width > policy.MaxForkWidth {
		errs = append(errs, fmt.Errorf("width %d: want 1..%d", st.Width, policy.MaxForkWidth))
	}
	if _, ok := answers[st.Answer]; !ok && st.Answer != "" {
		errs = append(errs, fmt.Errorf("answer %q: want marked, last-number or none", st.Answer))
	}
	for _, s := range st.Stop {
		if s == "" {
			errs = append(errs, errors.New("an empty stop string"))
		}
	}
	if st.TopProbs < 0 || st.TopProbs > 1000 {
		errs = append(errs, fmt.Errorf("top_probs %d: want 0..1000", st.TopProbs))
	}
	sp := st.Sampling
	if !(sp.Temperature >= 0) || math.IsInf(sp.Temperature, 0) || sp.TopK < 0 || !(sp.TopP >= 0 && sp.TopP <= 1) || !(sp.MinP >= 0 && sp.MinP <= 1) {
		errs = append(errs, errors.New("sampling: temperature must be >= 0, top_k >= 0, top_p and min_p in [0, 1]"))
	}
	for _, v := range []float64{sp.RepeatPenalty, sp.PresencePenalty, sp.FrequencyPenalty} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, errors.New("sampling: the penalties must be finite"))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: settings: %w", err)
	}
	return nil
}

// AnswerFunc returns the answer reader the settings name (nil: the whole
// text is the answer).
func (st *Settings) AnswerFunc() func(string) (string, bool) {
	name := st.Answer
	if name == "" && int(st.Mode) < len(decoders) {
		name = decoders[st.Mode](nil).defaultAnswer()
	}
	return answers[name]
}

// Options are the engine options the settings give. The options of a
// program rather than of a search (stream, logger, progress, KV cache,
// stop tokens of a chat template) are the caller's to add.
func (st *Settings) Options() []Option {
	return []Option{
		WithMode(st.Mode), WithSeed(st.Seed), WithPolicy(st.Config), WithScore(st.Score),
		WithClarifyText(st.ClarifyText), WithWidth(st.Width), WithSampling(st.Sampling),
		WithAnswer(st.AnswerFunc()), WithStopStrings(st.Stop...), WithTopProbs(st.TopProbs),
		WithIgnoreEOS(st.IgnoreEOS),
	}
}

// Budget is a search's budget under the settings (no deadline).
func (st *Settings) Budget() Budget {
	return Budget{MaxTokens: st.MaxTokens, MaxRows: st.BudgetRows, MaxWidth: st.MaxWidth}
}

// maxSettingsJSON bounds a settings document.
const maxSettingsJSON = 1 << 20

// ReadSettings reads and validates settings written as JSON: fields left
// out keep DefaultSettings' values; unknown fields are an error.
func ReadSettings(r io.Reader) (Settings, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSettingsJSON+1))
	if err != nil {
		return Settings{}, fmt.Errorf("engine: settings: %w", err)
	}
	if len(b) > maxSettingsJSON {
		return Settings{}, fmt.Errorf("engine: settings: larger than %d bytes", maxSettingsJSON)
	}
	st := DefaultSettings()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return Settings{}, fmt.Errorf("engine: settings: %w", err)
	}
	if dec.More() {
		return Settings{}, errors.New("engine: settings: more than one JSON value")
	}
	if len(st.Clarify) > 0 {
		return Settings{}, errors.New("engine: settings: clarify token ids are model-specific: give clarify_text")
	}
	return st, st.Validate()
}

// Write writes the settings as indented JSON (without the model-specific
// clarify token ids).
func (st Settings) Write(w io.Writer) error {
	if err := st.Validate(); err != nil {
		return err
	}
	st.Clarify = nil
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("engine: settings: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
