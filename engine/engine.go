package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
)

// Mode is a decoding strategy. All modes run in the same engine with the
// same budget accounting, so they can be compared at equal compute.
type Mode uint8

const (
	Greedy Mode = iota // argmax at every step
)

func (m Mode) String() string {
	switch m {
	case Greedy:
		return "greedy"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Budget bounds a search. Zero fields take defaults; MaxTokens must be
// positive.
type Budget struct {
	MaxTokens int           // new tokens on the committed path
	MaxRows   int           // forward rows (the compute budget); 0 = no limit
	Deadline  time.Time     // zero = none (ctx may carry one too)
	Timeout   time.Duration // relative deadline, from the start of Search
}

// Options configure an Engine.
type Options struct {
	Mode Mode
	// CacheTokens is the KV cache capacity in token positions over all
	// branches; 0 picks a default from the context length.
	CacheTokens int
	// Stream, if set, receives committed text as soon as it is decided.
	Stream func(text string)
}

// Option changes Options.
type Option func(*Options)

// WithMode selects the decoding mode.
func WithMode(m Mode) Option { return func(o *Options) { o.Mode = m } }

// WithStream delivers committed text as it is decided.
func WithStream(f func(text string)) Option { return func(o *Options) { o.Stream = f } }

// Engine searches over one model. It is not safe for concurrent use.
type Engine struct {
	m    *model.Model
	opts Options
	kv   *kvcache.Pool
	run  *model.Runner
}

// New returns an engine for m.
func New(m *model.Model, opts ...Option) (*Engine, error) {
	e := &Engine{m: m}
	for _, o := range opts {
		o(&e.opts)
	}
	if e.opts.CacheTokens <= 0 {
		e.opts.CacheTokens = m.Config.ContextLen
	}
	kv, err := m.NewCache(e.opts.CacheTokens, 16)
	if err != nil {
		return nil, err
	}
	e.kv = kv
	e.run = m.NewRunner(kv)
	return e, nil
}

// Cache returns the engine's KV cache pool (for inspection).
func (e *Engine) Cache() *kvcache.Pool { return e.kv }

// Stats describe the work a search did.
type Stats struct {
	ForwardPasses int
	Rows          int // forward rows, prompt included
	PromptTokens  int
	Generated     int
	Wall          time.Duration
}

// Result is the outcome of a search.
type Result struct {
	Text   string // the committed continuation (the prompt excluded)
	Tokens []int  // its token ids
	Stats  Stats
	// Stopped says why the search ended: "eos", "max-tokens", "budget",
	// "deadline", "canceled" or "context-full".
	Stopped string
}

// ErrEmptyPrompt is returned for an empty prompt.
var ErrEmptyPrompt = errors.New("engine: empty prompt")

// Search continues prompt within the budget. On cancellation or deadline
// it returns the partial result together with the context's error.
func (e *Engine) Search(ctx context.Context, prompt string, b Budget) (*Result, error) {
	if prompt == "" {
		return nil, ErrEmptyPrompt
	}
	if b.MaxTokens <= 0 {
		return nil, fmt.Errorf("engine: budget of %d tokens: must be positive", b.MaxTokens)
	}
	if b.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.Timeout)
		defer cancel()
	}
	if !b.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, b.Deadline)
		defer cancel()
	}
	start := time.Now()
	tok := e.m.Tokenizer
	ids := tok.Encode(prompt, true)
	if len(ids) == 0 {
		return nil, ErrEmptyPrompt
	}
	if len(ids) >= e.m.Config.ContextLen {
		return nil, fmt.Errorf("engine: prompt of %d tokens does not fit the context of %d", len(ids), e.m.Config.ContextLen)
	}
	res := &Result{}
	res.Stats.PromptTokens = len(ids)
	seq := e.kv.NewSeq()
	defer e.kv.Free(seq)

	err := e.greedy(ctx, seq, ids, b, res)
	// Decode the continuation after the prompt's last token, so that its
	// first piece keeps its leading space.
	dec := tok.NewDecoder(ids[len(ids)-1])
	var text []byte
	for _, t := range res.Tokens {
		text = append(text, dec.Next(t)...)
	}
	res.Text = string(append(text, dec.Flush()...))
	res.Stats.Wall = time.Since(start)
	return res, err
}

func (e *Engine) forward(rows []model.Row, res *Result) (*model.Output, error) {
	out, err := e.run.Forward(rows)
	if err != nil {
		return nil, err
	}
	res.Stats.ForwardPasses++
	res.Stats.Rows += len(rows)
	return out, nil
}

func (e *Engine) greedy(ctx context.Context, seq *kvcache.Seq, prompt []int, b Budget, res *Result) error {
	rows := make([]model.Row, len(prompt))
	for i, t := range prompt {
		rows[i] = model.Row{Seq: seq, Token: t, NoLogits: i < len(prompt)-1}
	}
	out, err := e.forward(rows, res)
	if err != nil {
		return err
	}
	logits := out.Logits(len(rows) - 1)
	dec := e.m.Tokenizer.NewDecoder(prompt[len(prompt)-1])
	defer func() {
		if e.opts.Stream != nil {
			if s := dec.Flush(); s != "" {
				e.opts.Stream(s)
			}
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			res.Stopped = stopReason(err)
			return err
		}
		next := argmax(logits)
		if next == e.m.Tokenizer.EOS() {
			res.Stopped = "eos"
			return nil
		}
		res.Tokens = append(res.Tokens, next)
		res.Stats.Generated++
		if e.opts.Stream != nil {
			e.opts.Stream(dec.Next(next))
		}
		if len(res.Tokens) >= b.MaxTokens {
			res.Stopped = "max-tokens"
			return nil
		}
		if b.MaxRows > 0 && res.Stats.Rows >= b.MaxRows {
			res.Stopped = "budget"
			return nil
		}
		out, err = e.forward([]model.Row{{Seq: seq, Token: next}}, res)
		if errors.Is(err, model.ErrContextFull) {
			res.Stopped = "context-full"
			return nil
		}
		if err != nil {
			return err
		}
		logits = out.Logits(0)
	}
}

func stopReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline"
	}
	return "canceled"
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
