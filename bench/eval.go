package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
	"golang.org/x/sync/errgroup"
)

// EvalConfig says what an evaluation runs. Every mode runs every item of
// a task at every budget; a budget is the forward rows one item may spend
// after its prompt (engine.Budget.MaxRows), the same for every mode, with
// the same MaxTokens.
type EvalConfig struct {
	// Modes to compare (default: engine.Modes()).
	Modes []engine.Mode `json:"modes"`
	// MaxTokens bounds each completion (default 128).
	MaxTokens int `json:"max_tokens"`
	// Budgets are forward rows per item (default 1, 2, 4 and 8 times
	// MaxTokens).
	Budgets []int `json:"budgets"`
	// MaxWidth caps the width K a budget gives the branching modes
	// (default 8); see Width.
	MaxWidth int `json:"max_width"`
	// Seed of item i is Seed+i, in every mode and at every budget.
	Seed uint64 `json:"seed"`
	// Limit is the number of items per task (0: all).
	Limit int `json:"limit"`
	// Policy configures entropix and beam-adaptive: the policy's knobs,
	// beam-adaptive's score and the clarify text (nil: the engine's
	// defaults, policy.DefaultFile).
	Policy *policy.File `json:"policy,omitempty"`
	// Chat wraps each prompt in the model's chat template (a user turn)
	// and stops at the end of the assistant's turn.
	Chat bool `json:"chat"`
	// Loop decides which outputs are caught in a repetition loop (zero
	// value: DefaultLoopRule).
	Loop LoopRule `json:"loop"`
	// KVType is the KV cache's element type (zero value: kvcache.F32;
	// the command's default is the model's DefaultKVType, as
	// entropix-search's).
	KVType kvcache.ElemType `json:"kv_type"`
	// Progress, if set, is called after each mode and budget.
	Progress func(EvalProgress) `json:"-"`
	// Searcher, if set, runs the searches in place of a local engine
	// (for instance on entropix-search servers); the outputs are still
	// scored with the local model. Parallel searches run at once (default
	// 1); the report is the same whatever their order.
	Searcher Searcher `json:"-"`
	Parallel int      `json:"-"`
	// Verifier, if set, judges the complete paths of the modes that
	// choose among several (engine.WithVerifier); VerifierName names it
	// in the report.
	Verifier     *engine.Verifier `json:"-"`
	VerifierName string           `json:"verifier,omitempty"`
	// Backend names the model.Backend the local searches run on
	// (engine.WithBackend; "": the engine's default, the CPU's).
	Backend string `json:"backend,omitempty"`
}

// SearchRequest is one search of an evaluation: an item's prompt (its text
// and its tokens under the model) in one mode at one budget, with the
// item's seed.
type SearchRequest struct {
	Item   string
	Prompt string
	Tokens []int
	Chat   bool
	Mode   engine.Mode
	Seed   uint64
	// Budget holds the item's token limit, the rows and the width.
	Budget engine.Budget
	// Policy is EvalConfig.Policy (nil: the engine's defaults).
	Policy *policy.File
	// Verifier asks for the searcher's verifier (EvalConfig.Verifier).
	Verifier bool
}

// SearchResult is what an evaluation keeps of a search.
type SearchResult struct {
	Text    string
	Tokens  []int
	Stopped string
	Cut     bool // engine.Result.Cut
	Stats   engine.Stats
	// Paths are the texts of the complete paths the search chose among
	// (engine.Result.Paths), for coverage; nil when the searcher does not
	// return them (coverage then counts Text alone).
	Paths []string
}

// A Searcher runs the searches of an evaluation. The answer of a request
// must not depend on the searches running beside it, so that a report is
// the same for any Parallel.
type Searcher func(ctx context.Context, r SearchRequest) (SearchResult, error)

// EvalProgress reports one finished mode and budget of a task.
type EvalProgress struct {
	Task      string
	Budget    int
	Mode      engine.Mode
	Items     int
	Done      int // (budget, mode) pairs done
	Total     int
	Wall      time.Duration // of this pair
	Evaluated time.Duration // since the task started
}

// DefaultEvalConfig is the default report: the 50 story openings, 128
// tokens each, at 128 to 1024 rows: about a minute for stories260K on two
// cores.
func DefaultEvalConfig() EvalConfig {
	return EvalConfig{
		Modes:     engine.Modes(),
		MaxTokens: 128,
		Budgets:   []int{128, 256, 512, 1024},
		MaxWidth:  8,
		Seed:      1,
		Loop:      DefaultLoopRule(),
	}
}

// QuickEvalConfig is a reduced run: 16 items, 64 tokens, budgets of 1 and
// 4 times that.
func QuickEvalConfig() EvalConfig {
	c := DefaultEvalConfig()
	c.MaxTokens = 64
	c.Budgets = []int{64, 256}
	c.Limit = 16
	return c
}

// withDefaults fills the zero fields and checks the rest.
func (c EvalConfig) withDefaults() (EvalConfig, error) {
	d := DefaultEvalConfig()
	if len(c.Modes) == 0 {
		c.Modes = d.Modes
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = d.MaxTokens
	}
	if c.MaxWidth == 0 {
		c.MaxWidth = d.MaxWidth
	}
	if len(c.Budgets) == 0 {
		for _, x := range []int{1, 2, 4, 8} {
			c.Budgets = append(c.Budgets, x*c.MaxTokens)
		}
	}
	if c.Loop == (LoopRule{}) {
		c.Loop = DefaultLoopRule()
	}
	switch {
	case c.MaxTokens < 0:
		return c, fmt.Errorf("bench: eval: max tokens %d, want > 0", c.MaxTokens)
	case c.MaxWidth < 1 || c.MaxWidth > policy.MaxForkWidth:
		return c, fmt.Errorf("bench: eval: max width %d outside [1, %d]", c.MaxWidth, policy.MaxForkWidth)
	case c.Limit < 0:
		return c, fmt.Errorf("bench: eval: limit %d, want >= 0", c.Limit)
	}
	for _, b := range c.Budgets {
		if b < 1 {
			return c, fmt.Errorf("bench: eval: budget of %d rows, want > 0", b)
		}
	}
	for _, m := range c.Modes {
		if _, err := engine.ParseMode(m.String()); err != nil {
			return c, fmt.Errorf("bench: eval: %w", err)
		}
	}
	if c.Loop == (LoopRule{}) {
		return c, fmt.Errorf("bench: loop rule %+v: want max period >= 1, min repeats >= 2, spans >= 0", c.Loop)
	}
	if err := c.Loop.Validate(); err != nil {
		return c, fmt.Errorf("bench: %w", err)
	}
	if c.Policy != nil {
		if err := c.Policy.Validate(); err != nil {
			return c, fmt.Errorf("bench: eval: %w", err)
		}
	}
	return c, nil
}

// Width is the width K a budget of rows gives beam search, CoT-decoding,
// self-consistency and best-of-N (their K): the budget over MaxTokens, so
// that K branches of MaxTokens tokens fit it, between 1 and MaxWidth. The
// single-path modes have width 1 whatever the budget; beam-adaptive, which
// admits branches by the rows left, AdaptiveWidth.
func (c EvalConfig) Width(budget int) int {
	maxTok, maxW := c.MaxTokens, c.MaxWidth
	if maxTok <= 0 {
		maxTok = DefaultEvalConfig().MaxTokens
	}
	if maxW <= 0 {
		maxW = DefaultEvalConfig().MaxWidth
	}
	return min(max(budget/maxTok, 1), maxW)
}

// branching reports whether a mode keeps more than one branch.
func branching(m engine.Mode) bool {
	return m == engine.Beam || m == engine.CoTDecoding || m == engine.BeamAdaptive ||
		m == engine.SelfConsistency || m == engine.BestOfN
}

// modeWidth is the width mode m runs with at the given budget.
func (c EvalConfig) modeWidth(m engine.Mode, budget int) int {
	switch {
	case !branching(m):
		return 1
	case m == engine.BeamAdaptive:
		return c.AdaptiveWidth()
	}
	return c.Width(budget)
}

// AdaptiveWidth is beam-adaptive's Budget.MaxWidth at every budget: the
// engine's default, 4, at most MaxWidth.
func (c EvalConfig) AdaptiveWidth() int {
	maxW := c.MaxWidth
	if maxW <= 0 {
		maxW = DefaultEvalConfig().MaxWidth
	}
	return min(4, maxW)
}

// TaskReport is the evaluation of one task.
type TaskReport struct {
	Task      string `json:"task"`
	Items     int    `json:"items"`
	Checked   bool   `json:"checked"` // the items have checks: accuracy is reported
	MaxTokens int    `json:"max_tokens"`
	Budgets   []int  `json:"budgets"`
	// Groups are the groups of the items (Item.Group) in order, when the
	// task is checked and its items have groups; ModeResult.Groups
	// follows this order.
	Groups []string `json:"groups,omitempty"`
	// Results holds one entry per budget and mode, budget-major, in the
	// order of the config.
	Results []ModeResult `json:"results"`
	// Outputs holds every completion, in the order of Results, items
	// innermost.
	Outputs []Output      `json:"outputs"`
	Wall    time.Duration `json:"wall_ns"`
}

// ModeResult is one mode at one budget, over all items of a task. Counts
// (tokens, rows, forks, ...) are means per item.
type ModeResult struct {
	Budget int         `json:"budget_rows"`
	Mode   engine.Mode `json:"mode"`
	Width  int         `json:"width"`
	// LogLik is the mean log-probability per token of the outputs under
	// the model at temperature 1: the sum over all outputs' tokens over
	// their number (NaN when no tokens were generated).
	LogLik float64 `json:"loglik_per_token"`
	// LoopShare is the share of outputs caught in a repetition loop
	// (LoopRule); Distinct2 the unique token bigrams over all bigrams of
	// the outputs, pooled.
	LoopShare float64 `json:"loop_share"`
	Distinct2 float64 `json:"distinct2"`
	// Correct counts the outputs whose check passed; Accuracy is their
	// share (both 0 for a task without checks), AccuracyLow and
	// AccuracyHigh its 95 % Wilson score interval (Wilson95).
	Correct      int     `json:"correct"`
	Accuracy     float64 `json:"accuracy"`
	AccuracyLow  float64 `json:"accuracy_low"`
	AccuracyHigh float64 `json:"accuracy_high"`
	// Groups is the accuracy per group of items, in the order of
	// TaskReport.Groups (none for a task without groups).
	Groups []GroupResult `json:"groups,omitempty"`
	// Covered counts the outputs whose check passes on at least one of
	// the mode's complete paths or samples (Output.Covered): Coverage is
	// their share, CoverageLow and CoverageHigh its 95 % Wilson interval
	// (all 0 for a task without checks).
	Covered      int     `json:"covered"`
	Coverage     float64 `json:"coverage"`
	CoverageLow  float64 `json:"coverage_low"`
	CoverageHigh float64 `json:"coverage_high"`

	Tokens float64 `json:"tokens"` // generated, committed path
	Rows   float64 `json:"rows"`   // forward rows spent after the prompt
	Forks  float64 `json:"forks"`
	Prunes float64 `json:"prunes"`
	// Cut is the share of items whose search the row budget stopped
	// before MaxTokens or the end of text.
	Cut     float64       `json:"cut_share"`
	Wall    time.Duration `json:"wall_ns"`    // per item, search only
	Forward time.Duration `json:"forward_ns"` // the part in forward passes
	// WallTotal is the search time of all items together.
	WallTotal time.Duration `json:"wall_total_ns"`
}

// GroupResult is the accuracy of one mode at one budget over the items of
// one group, with its 95 % Wilson score interval.
type GroupResult struct {
	Group    string  `json:"group"`
	Items    int     `json:"items"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	Low      float64 `json:"accuracy_low"`
	High     float64 `json:"accuracy_high"`
}

// Output is one completion.
type Output struct {
	Item    string      `json:"item"`
	Group   string      `json:"group,omitempty"`
	Budget  int         `json:"budget_rows"`
	Mode    engine.Mode `json:"mode"`
	Text    string      `json:"text"`
	Tokens  []int       `json:"tokens"`
	LogLik  float64     `json:"loglik"` // sum over the tokens
	Loop    bool        `json:"loop"`
	Correct bool        `json:"correct,omitempty"`
	Stopped string      `json:"stopped"`
	// Cut: the row budget stopped the search before its result reached
	// the end of text or the token limit (a search that still had
	// alternatives to explore but whose answer is complete is not cut).
	Cut   bool         `json:"cut,omitempty"`
	Stats engine.Stats `json:"stats"`
	// Covered: the check passes on the output or on one of the search's
	// complete paths (the right answer was found, chosen or not); Paths
	// is their number.
	Covered bool `json:"covered,omitempty"`
	Paths   int  `json:"paths,omitempty"`
}

// newEvaluator prepares the items of task for cfg (its defaults filled
// in): their prompts encoded, their seeds and token limits.
func newEvaluator(m *model.Model, task Task, cfg EvalConfig) (*evaluator, *TaskReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if m.Tokenizer == nil {
		return nil, nil, errors.New("bench: eval: the model has no tokenizer")
	}
	items, err := task.Items(cfg.Limit)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: eval: task %s: %w", task.Name(), err)
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("bench: eval: task %s has no items", task.Name())
	}
	if cfg.Chat {
		if _, err := model.DetectChatFormat(m.ChatTemplate); err != nil {
			return nil, nil, fmt.Errorf("bench: eval: chat: %w", err)
		}
	}
	ev := &evaluator{m: m, cfg: &cfg, scorer: NewScorer(m), items: make([]evalItem, len(items))}
	rep := &TaskReport{Task: task.Name(), Items: len(items), MaxTokens: cfg.MaxTokens, Budgets: cfg.Budgets}
	for i, it := range items {
		ids, stops, err := m.EncodePrompt(it.Prompt, cfg.Chat)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: eval: %s: %w", it.ID, err)
		}
		room := m.Config.ContextLen - len(ids) - 1
		if len(ids) == 0 || room < 1 {
			return nil, nil, fmt.Errorf("bench: eval: %s: a prompt of %d tokens leaves no room in the context of %d", it.ID, len(ids), m.Config.ContextLen)
		}
		ev.items[i] = evalItem{Item: it, seed: cfg.Seed + uint64(i), ids: ids, stops: stops,
			maxTokens: min(cfg.MaxTokens, room), scores: map[string]float64{}}
		rep.Checked = rep.Checked || it.Check != nil
	}
	return ev, rep, nil
}

// SearchItem runs the item of task whose ID is id in mode at a budget of
// rows exactly as Eval does (same seed, width, policy and token limit) and
// returns the search's result, tree included: what a viewer of one item
// of a report shows.
func SearchItem(ctx context.Context, m *model.Model, task Task, cfg EvalConfig, id string, mode engine.Mode, budget int) (*engine.Result, error) {
	ev, _, err := newEvaluator(m, task, cfg)
	if err != nil {
		return nil, err
	}
	for i := range ev.items {
		if ev.items[i].ID == id {
			return ev.search(ctx, &ev.items[i], mode, budget)
		}
	}
	return nil, fmt.Errorf("bench: task %s has no item %q among its first %d", task.Name(), id, len(ev.items))
}

// Eval runs every mode of cfg on the items of task at every budget of cfg
// and scores the outputs. Its results depend only on the model, the task
// and cfg (timings aside): item i runs with seed cfg.Seed+i.
func Eval(ctx context.Context, m *model.Model, task Task, cfg EvalConfig) (*TaskReport, error) {
	ev, rep, err := newEvaluator(m, task, cfg)
	if err != nil {
		return nil, err
	}
	cfg = *ev.cfg
	if rep.Checked {
		rep.Groups = itemGroups(ev.items)
	}
	start := time.Now()
	total := len(cfg.Budgets) * len(cfg.Modes)
	outs := make([]Output, len(ev.items))
	for _, budget := range cfg.Budgets {
		for _, mode := range cfg.Modes {
			t0 := time.Now()
			err := ev.searchAll(ctx, mode, budget, func(i int, res *SearchResult) (err error) {
				outs[i], err = ev.score(&ev.items[i], mode, budget, res)
				return err
			})
			if err != nil {
				return nil, err
			}
			acc := modeAcc{checked: rep.Checked, groups: rep.Groups}
			for i := range outs {
				acc.add(&outs[i])
			}
			rep.Outputs = append(rep.Outputs, outs...)
			rep.Results = append(rep.Results, acc.result(mode, budget, cfg.modeWidth(mode, budget)))
			if cfg.Progress != nil {
				cfg.Progress(EvalProgress{Task: rep.Task, Budget: budget, Mode: mode, Items: len(ev.items),
					Done: len(rep.Results), Total: total, Wall: time.Since(t0), Evaluated: time.Since(start)})
			}
		}
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// evaluator runs the searches of one task.
type evaluator struct {
	m      *model.Model
	cfg    *EvalConfig
	scorer *Scorer
	items  []evalItem
}

// otherGroup holds the items without a group in a task whose other items
// have one.
const otherGroup = "other"

// itemGroups returns the groups of the items in order (SortGroups), nil
// when no item has one; items without a group are then in otherGroup.
func itemGroups(items []evalItem) []string {
	var gs []string
	for i := range items {
		if g := items[i].Group; g != "" && !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil
	}
	for i := range items {
		if items[i].Group == "" {
			items[i].Group = otherGroup
			if !slices.Contains(gs, otherGroup) {
				gs = append(gs, otherGroup)
			}
		}
	}
	SortGroups(gs)
	return gs
}

// evalItem is an item ready to run: its tokens and seed, and the
// log-likelihoods of the outputs scored so far (single-path modes give the
// same output at every budget).
type evalItem struct {
	Item
	seed       uint64
	ids, stops []int
	maxTokens  int
	scores     map[string]float64
}

// searchAll searches every item in one mode at one budget and hands each
// result to done, in the calling goroutine: one after another on a local
// engine, or cfg.Parallel at a time through cfg.Searcher, done then
// running (scoring) while the other searches go on.
func (ev *evaluator) searchAll(ctx context.Context, mode engine.Mode, budget int, done func(int, *SearchResult) error) error {
	if ev.cfg.Searcher == nil {
		for i := range ev.items {
			res, err := ev.search(ctx, &ev.items[i], mode, budget)
			if err != nil {
				return err
			}
			if err := done(i, &SearchResult{Text: res.Text, Tokens: res.Tokens, Stopped: res.Stopped, Cut: res.Cut(), Stats: res.Stats, Paths: pathTexts(res)}); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type found struct {
		i   int
		res SearchResult
	}
	ch := make(chan found)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(ev.cfg.Parallel, 1))
	k := ev.cfg.modeWidth(mode, budget)
	go func() {
		defer close(ch)
		for i := range ev.items {
			if gctx.Err() != nil {
				break
			}
			it := &ev.items[i]
			g.Go(func() error {
				r := SearchRequest{Item: it.ID, Prompt: it.Prompt, Tokens: it.ids, Chat: ev.cfg.Chat, Mode: mode, Seed: it.seed,
					Budget: engine.Budget{MaxTokens: it.maxTokens, MaxRows: budget, MaxWidth: k}, Policy: ev.cfg.Policy, Verifier: ev.cfg.Verifier != nil}
				res, err := ev.cfg.Searcher(gctx, r)
				if err != nil {
					return fmt.Errorf("bench: eval: %s, %s at %d rows: %w", it.ID, mode, budget, err)
				}
				select {
				case ch <- found{i, res}:
					return nil
				case <-gctx.Done():
					return gctx.Err()
				}
			})
		}
		g.Wait()
	}()
	var scoreErr error
	for f := range ch {
		if scoreErr == nil {
			if scoreErr = done(f.i, &f.res); scoreErr != nil {
				cancel()
			}
		}
	}
	if err := g.Wait(); err != nil && scoreErr == nil {
		return err
	}
	return scoreErr
}

// search runs one item in one mode at one budget on a local engine.
func (ev *evaluator) search(ctx context.Context, it *evalItem, mode engine.Mode, budget int) (*engine.Result, error) {
	k := ev.cfg.modeWidth(mode, budget)
	opts := []engine.Option{engine.WithMode(mode), engine.WithSeed(it.seed), engine.WithWidth(k), engine.WithStopTokens(it.stops...), engine.WithKVType(ev.cfg.KVType),
		engine.WithAnswer(policy.ExtractAnswer), engine.WithVerifier(ev.cfg.Verifier)}
	if p := ev.cfg.Policy; p != nil {
		opts = append(opts, engine.WithPolicy(p.Config), engine.WithScore(p.Score), engine.WithClarifyText(p.ClarifyText))
	}
	if ev.cfg.Backend != "" {
		opts = append(opts, engine.WithBackend(ev.cfg.Backend))
	}
	eng, err := engine.New(ev.m, opts...)
	if err != nil {
		return nil, fmt.Errorf("bench: eval: %w", err)
	}
	defer eng.Close()
	res, err := eng.SearchTokens(ctx, it.Prompt, it.ids, engine.Budget{MaxTokens: it.maxTokens, MaxRows: budget, MaxWidth: k})
	if err != nil {
		return nil, fmt.Errorf("bench: eval: %s, %s at %d rows: %w", it.ID, mode, budget, err)
	}
	return res, nil
}

// score scores the output of one search.
func (ev *evaluator) score(it *evalItem, mode engine.Mode, budget int, res *SearchResult) (Output, error) {
	var err error
	key := tokensKey(res.Tokens)
	ll, ok := it.scores[key]
	if !ok {
		if ll, err = ev.scorer.LogLik(it.ids, res.Tokens); err != nil {
			return Output{}, fmt.Errorf("bench: eval: scoring %s, %s at %d rows: %w", it.ID, mode, budget, err)
		}
		it.scores[key] = ll
	}
	o := Output{Item: it.ID, Group: it.Group, Budget: budget, Mode: mode, Text: res.Text, Tokens: res.Tokens, LogLik: ll,
		Loop: ev.cfg.Loop.Loops(res.Tokens), Correct: it.Check != nil && it.Check(res.Text),
		Stopped: res.Stopped, Cut: res.Cut, Stats: res.Stats}
	o.Covered, o.Paths = covered(it.Check, res)
	return o, nil
}

// modeAcc sums the outputs of one mode at one budget.
type modeAcc struct {
	checked bool     // the task has checks: the accuracy has an interval
	groups  []string // the task's groups, in order
	// byGroup counts the outputs and the correct ones per group.
	byGroup                map[string][2]int
	n, loops, correct, cut int
	covered                int
	llSum                  float64
	llTokens               int
	outs                   [][]int
	st                     engine.Stats // sums
}

func (a *modeAcc) add(o *Output) {
	a.n++
	a.llSum += o.LogLik
	a.llTokens += len(o.Tokens)
	a.outs = append(a.outs, o.Tokens)
	if o.Loop {
		a.loops++
	}
	if o.Correct {
		a.correct++
	}
	if o.Covered {
		a.covered++
	}
	if o.Cut {
		a.cut++
	}
	if len(a.groups) > 0 {
		if a.byGroup == nil {
			a.byGroup = map[string][2]int{}
		}
		c := a.byGroup[o.Group]
		c[0]++
		if o.Correct {
			c[1]++
		}
		a.byGroup[o.Group] = c
	}
	st := &o.Stats
	a.st.Generated += st.Generated
	a.st.Rows += st.Rows
	a.st.Forks += st.Forks
	a.st.Prunes += st.Prunes
	a.st.Wall += st.Wall
	a.st.ForwardTime += st.ForwardTime
}

func (a *modeAcc) result(mode engine.Mode, budget, width int) ModeResult {
	n := float64(a.n)
	r := ModeResult{Budget: budget, Mode: mode, Width: width, LogLik: math.NaN(),
		LoopShare: float64(a.loops) / n, Distinct2: Distinct2(a.outs),
		Correct: a.correct, Accuracy: float64(a.correct) / n,
		Tokens: float64(a.st.Generated) / n, Rows: float64(a.st.Rows) / n,
		Forks: float64(a.st.Forks) / n, Prunes: float64(a.st.Prunes) / n, Cut: float64(a.cut) / n,
		Wall: a.st.Wall / time.Duration(a.n), Forward: a.st.ForwardTime / time.Duration(a.n), WallTotal: a.st.Wall}
	if a.llTokens > 0 {
		r.LogLik = a.llSum / float64(a.llTokens)
	}
	if a.checked {
		r.AccuracyLow, r.AccuracyHigh = Wilson95(a.correct, a.n)
		r.Covered, r.Coverage = a.covered, float64(a.covered)/n
		r.CoverageLow, r.CoverageHigh = Wilson95(a.covered, a.n)
	}
	for _, g := range a.groups {
		c := a.byGroup[g]
		gr := GroupResult{Group: g, Items: c[0], Correct: c[1]}
		if c[0] > 0 {
			gr.Accuracy = float64(c[1]) / float64(c[0])
		}
		gr.Low, gr.High = Wilson95(c[1], c[0])
		r.Groups = append(r.Groups, gr)
	}
	return r
}

// tokensKey is a map key for a token sequence.
func tokensKey(toks []int) string {
	b := make([]byte, 0, 4*len(toks))
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return string(b)
}

// scoreChunk is the most rows a Scorer feeds in one forward pass, which
// bounds its logits buffer to scoreChunk rows of the vocabulary.
const scoreChunk = 64

// A Scorer computes the log-likelihood of a continuation under the model
// with a fresh forward pass, independent of how the continuation was
// chosen. It owns a KV cache and a backend, so it is not safe for
// concurrent use.
type Scorer struct {
	m    *model.Model
	kv   *kvcache.Pool
	r    model.Backend
	rows []model.Row
	all  []int
}

// NewScorer returns a Scorer for m.
func NewScorer(m *model.Model) *Scorer { return &Scorer{m: m} }

// LogLik returns the sum over the tokens of cont of log p(cont[i] |
// prompt, cont[:i]) at temperature 1, in nats. The prompt and the
// continuation are fed as a batch (in chunks of scoreChunk rows), with
// logits for the rows that predict a token of cont.
func (s *Scorer) LogLik(prompt, cont []int) (float64, error) {
	if len(prompt) == 0 {
		return 0, errors.New("bench: score: empty prompt")
	}
	if len(cont) == 0 {
		return 0, nil
	}
	n := len(prompt) + len(cont)
	if n > s.m.Config.ContextLen {
		return 0, fmt.Errorf("bench: score: %d tokens exceed the context of %d", n, s.m.Config.ContextLen)
	}
	for _, t := range cont {
		if t < 0 || t >= s.m.Config.Vocab {
			return 0, fmt.Errorf("bench: score: token %d outside the vocabulary of %d", t, s.m.Config.Vocab)
		}
	}
	if s.kv == nil {
		// Blocks are taken as needed, so a pool the size of the context
		// costs nothing up front.
		be, err := model.NewBackend("cpu", s.m, model.CacheConfig{Tokens: s.m.Config.ContextLen, BlockSize: kvcache.DefaultBlockSize, DType: kvcache.F32})
		if err != nil {
			return 0, fmt.Errorf("bench: score: %w", err)
		}
		s.kv, s.r = be.Cache(), be
	}
	s.all = append(append(s.all[:0], prompt...), cont...)
	seq := s.kv.NewSeq()
	defer s.kv.Free(seq)
	var sum float64
	first := len(prompt) - 1 // the row whose logits predict cont[0]
	// The last token predicts nothing we score: feed all but it.
	for lo := 0; lo < n-1; lo += scoreChunk {
		hi := min(lo+scoreChunk, n-1)
		s.rows = s.rows[:0]
		for j := lo; j < hi; j++ {
			s.rows = append(s.rows, model.Row{Seq: seq, Token: s.all[j], NoLogits: j < first})
		}
		out, err := s.r.Forward(s.rows)
		if err != nil {
			return 0, fmt.Errorf("bench: score: %w", err)
		}
		for j := max(lo, first); j < hi; j++ {
			sum += logProb(out.Logits(j-lo), s.all[j+1])
		}
	}
	return sum, nil
}

// logProb returns log softmax(logits)[tok], computed in float64.
func logProb(logits []float32, tok int) float64 {
	mx := slices.Max(logits)
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v - mx))
	}
	return float64(logits[tok]-mx) - math.Log(z)
}

// LoopRule defines when an output is caught in a repetition loop (the
// search's own rule, policy.LoopRule).
type LoopRule = policy.LoopRule

// DefaultLoopRule: units of up to 32 tokens, 3 repeats covering at least
// 8 tokens anywhere, or 2 covering at least 16 tokens at the end.
func DefaultLoopRule() LoopRule { return policy.DefaultLoopRule() }

// Distinct2 returns the number of distinct token bigrams over the number
// of bigrams in all outputs (bigrams do not cross outputs); 0 when there
// are none.
func Distinct2(outputs [][]int) float64 {
	seen := map[[2]int]struct{}{}
	total := 0
	for _, o := range outputs {
		for i := 1; i < len(o); i++ {
			seen[[2]int{o[i-1], o[i]}] = struct{}{}
			total++
		}
	}
	if total == 0 {
		return 0
	}
	return float64(len(seen)) / float64(total)
}

// OverheadResult is the share of a search's time spent outside the
// forward pass (policy, tree, bookkeeping) at one width.
type OverheadResult struct {
	Mode  engine.Mode `json:"mode"`
	Width int         `json:"width"`
	// Forced is set for beam-adaptive forced to fork at every step (its
	// worst case); unset, it runs the default policy.
	Forced  bool          `json:"forced,omitempty"`
	Rows    int           `json:"rows"` // per search
	Wall    time.Duration `json:"wall_ns"`
	Forward time.Duration `json:"forward_ns"`
	// Share is 1 - Forward/Wall; PerRow the time outside the forward
	// pass per row.
	Share  float64       `json:"share"`
	PerRow time.Duration `json:"per_row_ns"`
}

// Name is the mode with its width and policy, as the tables print it.
func (o OverheadResult) Name() string {
	s := o.Mode.String()
	if o.Forced {
		s += " (forced forks)"
	}
	return s
}

// overheadPrompts are the prompts of the search-overhead measurement, one
// a round.
var overheadPrompts = []string{"Once upon a time", "Lily wanted to", "The little dog", "Tom and his mom"}

// overheadPrompt is the prompt of the external programs' runs.
const overheadPrompt = "Once upon a time"

// MeasureSearchOverhead runs every mode, rounds times each (after a
// warm-up) over maxTokens tokens, and reports the time outside the forward
// pass from the engine's own accounting (engine.Stats.Wall and
// ForwardTime): at width 1 the single-path modes (greedy, sample,
// entropix) and beam search of one beam; at every other width w in widths
// beam search, CoT-decoding, self-consistency and best-of-N with w
// branches, and beam-adaptive forced to fork at every step up to w
// branches (the most it can keep, its worst case); and beam-adaptive with
// the default policy and budget once.
func MeasureSearchOverhead(ctx context.Context, m *model.Model, widths []int, maxTokens, rounds int) ([]OverheadResult, error) {
	if maxTokens < 1 || rounds < 1 {
		return nil, fmt.Errorf("bench: search overhead: %d tokens, %d rounds: want both > 0", maxTokens, rounds)
	}
	type run struct {
		mode   engine.Mode
		width  int
		forced bool
	}
	var runs []run
	for _, w := range widths {
		if w < 1 || w > policy.MaxForkWidth {
			return nil, fmt.Errorf("bench: search overhead: width %d outside [1, %d]", w, policy.MaxForkWidth)
		}
		if w == 1 {
			// The single-path modes: what a plain generation costs
			// beyond its forward passes.
			for _, mode := range []engine.Mode{engine.Greedy, engine.Sample, engine.Entropix, engine.Beam} {
				runs = append(runs, run{mode, 1, false})
			}
			continue
		}
		for _, mode := range []engine.Mode{engine.Beam, engine.CoTDecoding, engine.SelfConsistency, engine.BestOfN} {
			runs = append(runs, run{mode, w, false})
		}
		runs = append(runs, run{engine.BeamAdaptive, w, true})
	}
	runs = append(runs, run{engine.BeamAdaptive, 0, false})
	var res []OverheadResult
	for _, rn := range runs {
		opts := []engine.Option{engine.WithMode(rn.mode), engine.WithSeed(1)}
		budget := engine.Budget{MaxTokens: maxTokens, MaxWidth: rn.width}
		if rn.width > 0 {
			opts = append(opts, engine.WithWidth(rn.width))
		}
		if rn.forced {
			opts = append(opts, engine.WithPolicy(policy.ForcedForks(policy.DefaultConfig())))
		}
		eng, err := engine.New(m, opts...)
		if err != nil {
			return nil, fmt.Errorf("bench: search overhead: %w", err)
		}
		r := OverheadResult{Mode: rn.mode, Width: rn.width, Forced: rn.forced}
		for i := range rounds + 1 {
			out, err := eng.Search(ctx, overheadPrompts[i%len(overheadPrompts)], budget)
			if err != nil {
				eng.Close()
				return nil, fmt.Errorf("bench: search overhead, %s width %d: %w", rn.mode, rn.width, err)
			}
			if i == 0 {
				continue // warm-up
			}
			r.Rows += out.Stats.Rows
			r.Wall += out.Stats.Wall
			r.Forward += out.Stats.ForwardTime
			r.Width = max(r.Width, out.Stats.MaxLive)
		}
		if err := eng.Close(); err != nil {
			return nil, fmt.Errorf("bench: search overhead: %w", err)
		}
		if r.Wall > 0 {
			r.Share = 1 - float64(r.Forward)/float64(r.Wall)
		}
		if r.Rows > 0 {
			r.PerRow = (r.Wall - r.Forward) / time.Duration(r.Rows)
		}
		r.Rows /= rounds
		r.Wall /= time.Duration(rounds)
		r.Forward /= time.Duration(rounds)
		res = append(res, r)
	}
	return res, nil
}

// Llama2CResult is llama2.c's decode speed on a checkpoint.
type Llama2CResult struct {
	Steps        int     `json:"steps"`
	TokensPerSec float64 `json:"tokens_per_sec"`
}

// RunLlama2C runs llama2.c's run binary greedily over steps positions on a
// llama2.c checkpoint and tokenizer, and reads the "achieved tok/s" it
// prints.
func RunLlama2C(ctx context.Context, bin, checkpoint, tokenizer string, steps int) (*Llama2CResult, error) {
	cmd := exec.CommandContext(ctx, bin, checkpoint, "-z", tokenizer, "-t", "0", "-n", strconv.Itoa(steps), "-i", overheadPrompt)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w: %s", bin, err, tail(out, 500))
	}
	tps, ok := parseLlama2C(out)
	if !ok {
		return nil, fmt.Errorf("bench: %s printed no \"achieved tok/s\" line: %s", bin, tail(out, 500))
	}
	return &Llama2CResult{Steps: steps, TokensPerSec: tps}, nil
}

// parseLlama2C finds the number after the last "achieved tok/s:".
func parseLlama2C(out []byte) (float64, bool) {
	const marker = "achieved tok/s:"
	i := bytes.LastIndex(out, []byte(marker))
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(out[i+len(marker):]))
	if len(f) == 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return 0, false
	}
	return x, true
}

// tail returns the last n bytes of out, trimmed, as text.
func tail(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.TrimSpace(string(out))
}
