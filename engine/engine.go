package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// Engine searches over one model. It owns a backend (model.Backend: the
// KV cache and the forward pass's scratch, on the CPU or a device), which
// Close releases; a closed engine's searches return ErrClosed. Concurrent
// Search calls are safe and batched together: one driver goroutine
// advances every running search by one step per forward pass (continuous
// batching: searches join and leave between steps), so their branches
// share each pass's weight reads.
type Engine struct {
	mu      sync.Mutex // guards queue, driving and closed
	queue   []*search  // submitted, not yet driven
	driving bool       // a driver goroutine runs
	idle    sync.Cond  // signalled (on mu) when the driver stops
	closed  bool       // Close was called
	// passes and rows count the driver's forward passes and their rows,
	// over every search (the batching: rows per pass).
	passes, rows atomic.Int64
	// inUse is the KV blocks in use after the driver's last step (0 when
	// idle), readable while searches run.
	inUse atomic.Int64
	m     *model.Model
	opts  Options
	kv    *kvcache.Pool // the backend's block manager
	be    model.Backend
	// ver is the verifier at work (Options.Verifier), nil without one.
	ver *verifierRun
	// active is the driver's searches, oldest first, and crowded says a
	// search was preempted since one last ended (the driver's own).
	active  []*search
	crowded bool

	// stepHook, when set (by tests), runs before every step and may fail it.
	stepHook func(step int) error
}

// resolve checks o's search-level fields for m and tokenizes its clarify
// text.
func (o *Options) resolve(m *model.Model) error {
	if int(o.Mode) >= len(modeNames) {
		return fmt.Errorf("engine: invalid mode %d", o.Mode)
	}
	if o.Width < 1 || o.Width > policy.MaxForkWidth {
		return fmt.Errorf("engine: width %d outside [1, %d]", o.Width, policy.MaxForkWidth)
	}
	if m.Tokenizer == nil {
		return errors.New("engine: the model has no tokenizer")
	}
	if o.ClarifyText != "" && o.ClarifyText != "-" {
		o.Policy.Clarify = m.Tokenizer.EncodeContinuation(o.ClarifyText)
	} else {
		o.Policy.Clarify = nil
	}
	if err := o.Policy.Validate(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	for _, st := range o.StopStrings {
		if st == "" {
			return errors.New("engine: an empty stop string")
		}
	}
	if o.TopProbs < 0 || o.TopProbs > 1000 {
		return fmt.Errorf("engine: %d top probabilities per token: want 0..1000", o.TopProbs)
	}
	return nil
}

// New returns an engine for m.
func New(m *model.Model, opts ...Option) (*Engine, error) {
	if m == nil {
		return nil, errors.New("engine: nil model")
	}
	if m.Closed() {
		return nil, fmt.Errorf("engine: %w", model.ErrClosed)
	}
	o := defaultOptions()
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if err := o.resolve(m); err != nil {
		return nil, err
	}
	if o.CacheTokens < 0 {
		return nil, fmt.Errorf("engine: cache of %d tokens: want > 0 (or 0 for the default)", o.CacheTokens)
	}
	if o.CacheTokens == 0 {
		o.CacheTokens = min(4*m.Config.ContextLen, 65536)
	}
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	if o.Verifier != nil {
		if err := o.Verifier.Fits(m); err != nil {
			return nil, err
		}
	}
	be, err := model.NewBackend(o.Backend, m, model.CacheConfig{Tokens: o.CacheTokens, BlockSize: 16, DType: o.KVType})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{m: m, opts: o, kv: be.Cache(), be: be}
	e.idle.L = &e.mu
	if o.Verifier != nil {
		if e.ver, err = newVerifierRun(o.Verifier, o.Backend); err != nil {
			be.Close()
			return nil, err
		}
	}
	return e, nil
}

// Options returns the engine's options (with Policy.Clarify tokenized).
func (e *Engine) Options() Options { return e.opts }

// Model returns the engine's model.
func (e *Engine) Model() *model.Model { return e.m }

// Batching reports the forward passes the engine ran and their rows, over
// every search: rows/passes is how many rows a pass carried on average.
func (e *Engine) Batching() (passes, rows int64) { return e.passes.Load(), e.rows.Load() }

// Backend returns the backend the engine runs its passes on (for
// inspection: it is not safe to use while searches run).
func (e *Engine) Backend() model.Backend { return e.be }

// BlocksInUse is the KV blocks in use after the last step: unlike
// Cache().Stats(), safe to call while searches run (metrics).
func (e *Engine) BlocksInUse() int { return int(e.inUse.Load()) }

// Cache returns the engine's KV cache pool (for inspection; its methods
// are not safe while searches run: see BlocksInUse).
func (e *Engine) Cache() *kvcache.Pool { return e.kv }

// Stats describe the work a search did.
type Stats struct {
	ForwardPasses int `json:"forward_passes"`
	// Rows are the forward rows spent after the prompt (what
	// Budget.MaxRows bounds); PromptRows those of the prompt's prefill.
	Rows       int `json:"rows"`
	PromptRows int `json:"prompt_rows"`
	// Generated counts the tokens of the committed path; TokensExplored
	// every token fed to the model after the prompt, in all branches.
	Generated      int `json:"generated"`
	TokensExplored int `json:"tokens_explored"`
	// Forks counts fork points: nodes where the search split into
	// several branches (beam-adaptive's forks, beam's parents that kept
	// two or more children, CoT-decoding's and the sampling modes' root).
	Forks  int `json:"forks"`
	Prunes int `json:"prunes"`
	// KVBlocksPeak is the most KV blocks in use in the engine's pool
	// during the search: with searches running beside it (a server),
	// theirs count too.
	KVBlocksPeak int           `json:"kv_blocks_peak"`
	MaxLive      int           `json:"max_live"`
	Wall         time.Duration `json:"wall_ns"`
	// ForwardTime is the part of Wall spent in forward passes.
	ForwardTime time.Duration `json:"forward_ns"`
	// With searches beside it in the engine's KV pool (a server) the
	// search may wait and run again, never cut short for want of blocks
	// another search holds: Waits counts the steps it sat out until an
	// older search freed blocks, Restarts the times it was preempted for
	// one (its blocks freed and the search run again from its prompt:
	// the result is the one it gets alone), and RestartRows the forward
	// rows, prompt included, those runs had spent (not in Rows).
	Waits       int `json:"waits,omitempty"`
	Restarts    int `json:"restarts,omitempty"`
	RestartRows int `json:"restart_rows,omitempty"`
}

// Result is the outcome of a search.
type Result struct {
	Mode Mode   `json:"mode"`
	Text string `json:"text"` // the committed continuation, prompt excluded
	// TextBytes is Text exactly, base64 in JSON, when Text is not valid
	// UTF-8 (JSON replaces the bad bytes of "text" with U+FFFD), as the
	// tree's nodes give theirs.
	TextBytes []byte `json:"text_bytes,omitempty"`
	Tokens    []int  `json:"tokens"` // its token ids
	// Tree holds every node the search made; the committed path is marked.
	Tree *tree.Tree `json:"tree"`
	// Paths are the complete paths the result was chosen among (see
	// Path): what coverage counts.
	Paths []Path `json:"paths,omitempty"`
	Stats Stats  `json:"stats"`
	// Stopped says why the search ended: "eos", "max-tokens", "budget",
	// "deadline", "canceled", "context-full" or "kv-full"; beam-adaptive
	// also "settled" (the vote on the answer could no longer change).
	// It is "stop" when the committed path ended at a stop string
	// (Options.StopStrings), unless a deadline or a cancellation ended
	// the search.
	Stopped string `json:"stopped"`
	// BudgetExhausted is set when a budget (rows, time) cut the search
	// short: the result is the best found so far.
	BudgetExhausted bool `json:"budget_exhausted"`
}

// Cut reports whether the row budget stopped the search before its result
// reached the end of text or the token limit. A search that still had
// alternatives to explore when the budget ran out, but whose committed
// path is finished, is not cut.
func (r *Result) Cut() bool {
	if !r.BudgetExhausted {
		return false
	}
	if r.Tree == nil {
		return true
	}
	for id, n := range r.Tree.All() {
		if id != tree.Root && n.Committed && n.IsLeaf() {
			return n.Status != tree.Finished
		}
	}
	return true
}

// ErrEmptyPrompt is returned for an empty prompt.
var ErrEmptyPrompt = errors.New("engine: empty prompt")

// ErrNonFinite is returned when the model's output is not finite (NaN or
// infinite logits): its weights are corrupt, or overflow.
var ErrNonFinite = errors.New("engine: the model's logits are not finite (corrupt weights?)")

// ErrPromptTooLong is returned for a prompt that fills the model's context.
var ErrPromptTooLong = errors.New("engine: the prompt does not fit the context")

// ErrClosed is returned by a search on a closed engine (Close), and by
// the searches Close ends.
var ErrClosed = errors.New("engine: closed")

// Close closes the engine: the searches still running end at their next
// step with ErrClosed (and no result), later ones fail with ErrClosed at
// once, and once the step in flight is done the engine's backends close
// (the search's and the verifier's, model.Backend.Close), releasing
// their caches. It does not close the model, nor a verifier's model.
// Closing a closed engine does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	for e.driving {
		e.idle.Wait()
	}
	e.mu.Unlock()
	errs := []error{e.be.Close()}
	if e.ver != nil {
		errs = append(errs, e.ver.run.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: close: %w", err)
	}
	return nil
}

// Search continues prompt within the budget and returns the best
// continuation found. When ctx is canceled or its deadline passes, Search
// returns the partial result together with the context's error; on any
// other error the result is nil. Every KV block the search took is
// released before it returns.
func (e *Engine) Search(ctx context.Context, prompt string, b Budget) (*Result, error) {
	if prompt == "" {
		return nil, ErrEmptyPrompt
	}
	ids := e.m.Tokenizer.Encode(prompt, e.m.Tokenizer.AddBOS())
	if len(ids) == 0 {
		return nil, ErrEmptyPrompt
	}
	return e.SearchTokens(ctx, prompt, ids, b)
}

// SearchTokens is Search for a prompt already tokenized; promptText is
// used for display (the tree's root).
func (e *Engine) SearchTokens(ctx context.Context, promptText string, ids []int, b Budget) (*Result, error) {
	return e.searchTokens(ctx, promptText, ids, b, &e.opts)
}

// SearchWith is Search with options for this search only (mode, seed,
// width, policy, score, sampling, stream, answer, ...) on top of the
// engine's: searches of different modes share the engine's KV cache and,
// run concurrently, its forward passes. The engine-wide options, the cache
// size and type, cannot change per search.
func (e *Engine) SearchWith(ctx context.Context, prompt string, b Budget, opts ...Option) (*Result, error) {
	if prompt == "" {
		return nil, ErrEmptyPrompt
	}
	return e.SearchTokensWith(ctx, prompt, e.m.Tokenizer.Encode(prompt, e.m.Tokenizer.AddBOS()), b, opts...)
}

// SearchTokensWith is SearchWith for a prompt already tokenized.
func (e *Engine) SearchTokensWith(ctx context.Context, promptText string, ids []int, b Budget, opts ...Option) (*Result, error) {
	o := e.opts
	o.StopTokens = slices.Clone(e.opts.StopTokens)
	o.StopStrings = slices.Clone(e.opts.StopStrings)
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.CacheTokens != e.opts.CacheTokens || o.KVType != e.opts.KVType {
		return nil, errors.New("engine: the KV cache's size and type are the engine's, not a search's")
	}
	if o.Verifier != nil && o.Verifier != e.opts.Verifier {
		return nil, errors.New("engine: the verifier is the engine's (WithVerifier at New); a search may only turn it off")
	}
	if err := o.resolve(e.m); err != nil {
		return nil, err
	}
	return e.searchTokens(ctx, promptText, ids, b, &o)
}

func (e *Engine) searchTokens(ctx context.Context, promptText string, ids []int, b Budget, o *Options) (*Result, error) {
	if ctx == nil {
		return nil, errors.New("engine: nil context")
	}
	if len(ids) == 0 {
		return nil, ErrEmptyPrompt
	}
	if e.m.Closed() {
		return nil, fmt.Errorf("engine: %w", model.ErrClosed)
	}
	for i, id := range ids {
		if id < 0 || id >= e.m.Config.Vocab {
			return nil, fmt.Errorf("engine: prompt token %d is %d, outside the vocabulary of %d", i, id, e.m.Config.Vocab)
		}
	}
	if err := o.checkBudget(&b); err != nil {
		return nil, err
	}
	if len(ids) >= e.m.Config.ContextLen {
		return nil, fmt.Errorf("%w: %d tokens, context of %d", ErrPromptTooLong, len(ids), e.m.Config.ContextLen)
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
	s := newSearch(e, o, ctx, promptText, ids, b)
	done := s.done // the driver owns s until it is closed (restart rewrites s)
	if err := e.submit(s); err != nil {
		return nil, err
	}
	<-done
	if s.err != nil && ctx.Err() == nil {
		return nil, s.err
	}
	return s.res, s.err
}

// submit queues s for the driver, starting one when none runs; on a
// closed engine it fails.
func (e *Engine) submit(s *search) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.queue = append(e.queue, s)
	if !e.driving {
		e.driving = true
		go e.drive()
	}
	return nil
}

// drive runs the submitted searches to their ends, one forward pass per
// step over the rows of all of them, and returns when none is left.
func (e *Engine) drive() {
	var stepping, requeue []*search
	var rows []model.Row
	var bases []int
	for {
		e.mu.Lock()
		if len(requeue) > 0 { // preempted: back to the queue's head
			e.queue = slices.Insert(e.queue, 0, requeue...)
			requeue = requeue[:0]
		}
		if e.closed { // Close ends every search before the backends go
			for _, s := range append(e.active, e.queue...) {
				if s.err == nil {
					s.err = ErrClosed
				}
				e.end(s)
			}
			e.active, e.queue = nil, e.queue[:0]
		}
		for _, s := range e.queue {
			if err := s.begin(); err != nil {
				s.err = err
				e.end(s)
				continue
			}
			e.active = append(e.active, s)
		}
		e.queue = e.queue[:0]
		e.inUse.Store(int64(e.kv.Stats().BlocksInUse))
		if len(e.active) == 0 {
			e.driving = false
			e.idle.Broadcast()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()

		// Each search, oldest first, prepares its step within the blocks
		// the ones before it left free (see search.fit); the ended ones
		// leave, and the preempted ones go back to the queue.
		reserved := 0
		q := queued{first: true}
		rows, bases, stepping = rows[:0], bases[:0], stepping[:0]
		var attn []int
		live := e.active[:0]
		for _, s := range e.active {
			if s.requeue {
				s.requeue = false
				requeue = append(requeue, s)
				continue
			}
			q.crowded = e.crowded
			r := s.prepare(&reserved, q)
			if s.ended() {
				e.end(s)
				e.crowded = false
				continue
			}
			live = append(live, s)
			q.first = false
			q.older += len(s.live)
			if len(r) == 0 {
				continue
			}
			bases = append(bases, len(rows))
			rows = append(rows, r...)
			stepping = append(stepping, s)
			if len(s.attn) > 0 {
				attn = s.attn // one model: the same layer for every search that reads attention
			}
		}
		clear(e.active[len(live):])
		e.active = live
		if len(rows) == 0 {
			continue
		}
		t0 := time.Now()
		out, err := e.be.Forward(rows, attn...)
		took := time.Since(t0)
		e.passes.Add(1)
		e.rows.Add(int64(len(rows)))
		switch {
		case errors.Is(err, kvcache.ErrCacheFull):
			// The blocks were counted conservatively, so this is rare:
			// the youngest search that may run again is preempted, or
			// else the widest search gives up a branch, and the step is
			// tried again (Forward left the cache as it was).
			if e.preemptFor(e.active[0]) {
				continue
			}
			w := stepping[0]
			for _, s := range stepping[1:] {
				if len(s.live) > len(w.live) {
					w = s
				}
			}
			switch {
			case w.shedWaiting("kv-full"):
			case len(w.live) <= 1:
				w.finish("kv-full", true)
			default:
				w.prune(w.worst(), "kv-full")
			}
			continue
		case errors.Is(err, model.ErrContextFull):
			for _, s := range stepping {
				s.finish("context-full", false)
			}
			continue
		case err != nil:
			for _, s := range stepping {
				s.err = err
			}
			continue
		}
		for i, s := range stepping {
			s.consume(out, bases[i], took)
		}
	}
}

// preemptFor preempts the youngest search after s (the oldest, whose step
// does not fit the free blocks) that holds blocks and may run again
// (search.restart), and reports whether there was one. It runs while the
// driver prepares a step, before the searches after s are prepared.
func (e *Engine) preemptFor(s *search) bool {
	for i := len(e.active) - 1; i >= 0 && e.active[i] != s; i-- {
		if v := e.active[i]; !v.requeue && v.preemptible() {
			v.restart()
			v.requeue, e.crowded = true, true
			return true
		}
	}
	return false
}

// end completes an ended search: its result, its cache released, its
// caller woken.
func (e *Engine) end(s *search) {
	if s.err == nil || errors.Is(s.err, context.Canceled) || errors.Is(s.err, context.DeadlineExceeded) {
		s.res = s.result()
	}
	s.release()
	close(s.done)
}

// checkBudget validates b (the mode fills its defaults: see
// decoder.budgetDefaults).
func (o *Options) checkBudget(b *Budget) error {
	switch {
	case b.MaxTokens <= 0:
		return fmt.Errorf("engine: budget of %d tokens: must be positive", b.MaxTokens)
	case b.MaxRows < 0 || b.MaxWidth < 0 || b.Timeout < 0:
		return fmt.Errorf("engine: negative budget %+v", *b)
	}
	return nil
}
