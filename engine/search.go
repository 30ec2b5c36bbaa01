package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/tokenizer"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/policy/rowstat"
	"github.com/entropix-search/entropix-search/tree"
)

// A branch is a live leaf of the search: its tree node, its KV sequence,
// the tokens it feeds at the next step, and its policy state.
type branch struct {
	leaf    tree.ID
	seq     *kvcache.Seq
	feed    []int // chosen but not yet run; the last one's logits come next
	row     int   // row of this branch's logits in the current step
	decider *policy.Decider
	chain   *policy.Chain
	cand    policy.Candidates // chain's scratch (self-consistency, best-of-N)
	score   policy.PathScore
	// before is score without the leaf's token (for Backspace).
	before policy.PathScore
	// prev gives the logits row that chose the leaf's token, for
	// Backspace: the forward pass's own row (never written through),
	// valid through the next pass, fetched only if asked for.
	prev func() []float32
	// margins are the per-token margins p(top1) - p(top2) of a
	// CoT-decoding path, for its answer span.
	margins []float64
}

// search is the state of one Search call.
type search struct {
	e    *Engine
	ctx  context.Context
	text string // the prompt's text
	// asked is the budget as asked; b is it with the mode's defaults.
	asked Budget
	b     Budget
	opts  *Options
	tok   *tokenizer.Tokenizer
	stops []int // end of text, and any Options.StopTokens
	log   zerolog.Logger

	t      *tree.Tree
	prompt []int
	live   []*branch
	// seqs are the KV sequences of the tree's live leaves (and of a
	// finished leaf until its branch is released), by node: the tree
	// holds no cache handles.
	seqs  map[tree.ID]*kvcache.Seq
	rows  []model.Row
	out   *model.Output
	attn  []int // layers whose attention feeds the policy
	step  int
	start time.Time
	res   *Result

	// Committed output: the last committed node, tokens not yet streamed.
	committed tree.ID
	unsent    []int
	dec       *tokenizer.Decoder

	// mode holds the decoding mode's own state and decisions.
	mode decoder
	// err is why the search failed (nil: it did not); done is closed when
	// it has ended and its result is ready.
	err  error
	done chan struct{}
	// prefill is the prompt tokens this step feeds without deciding
	// (chunked prefill), 0 when the step decides.
	prefill int
	// base is the output row of the search's first row in the step;
	// meas[r-base] the statistics of the logits row r of a live branch,
	// measured once per step (afterForward) on the kernel threads, or
	// read from the backend's statistics when useStats (rows.go).
	base     int
	useStats bool
	measurer policy.RowMeasurer
	meas     []policy.RowMeasure
	measRows [][]float32
	measAt   []int
	// verified holds the verifier's verdicts on complete paths, by leaf.
	verified map[tree.ID]float64
	// Scratch shared by the modes.
	cand     policy.Candidates
	top      []int
	topProbs []int // extend's, for Options.TopProbs
	// Stop strings (stopstr.go): each node's place in the scan of its
	// path's text, and the stream's held-back text.
	stopScans []stopScan
	held      string
	streamCut bool // the stream reached a stop string
	sent      bool // text went to the stream: the search cannot run again

	// requeue marks a search preempted during the step being prepared
	// (restart): it leaves the step and goes back to the queue.
	requeue bool
}

// waitDropper is a decoder that keeps branches waiting outside the live
// set (beam-adaptive's frontier), which may be dropped to free the cache.
type waitDropper interface {
	dropWaiting(reason string) bool
}

// shedWaiting drops a waiting branch of the mode, if it keeps any. (Not
// named dropWaiting: every decoder embeds *search, and a promoted method
// of that name would make every mode a waitDropper calling itself.)
func (s *search) shedWaiting(reason string) bool {
	d, ok := s.mode.(waitDropper)
	return ok && d.dropWaiting(reason)
}

func newSearch(e *Engine, o *Options, ctx context.Context, text string, ids []int, b Budget) *search {
	s := &search{e: e, ctx: ctx, text: text, prompt: ids, asked: b, opts: o, start: time.Now(), done: make(chan struct{})}
	s.reset()
	return s
}

// reset gives the search the state it has before its first step, its
// request kept.
func (s *search) reset() {
	e, o, ids := s.e, s.opts, s.prompt
	*s = search{
		e: e, ctx: s.ctx, text: s.text, asked: s.asked, b: s.asked, opts: o, tok: e.m.Tokenizer, log: o.Log,
		stops: stopTokens(e.m.Tokenizer, o),
		t:     tree.New(s.text, ids), prompt: ids, start: s.start, seqs: map[tree.ID]*kvcache.Seq{},
		res:       &Result{Mode: o.Mode},
		committed: tree.Root, done: s.done,
		dec: e.m.Tokenizer.NewDecoder(ids[len(ids)-1]),
	}
	s.mode = newDecoder(s)
	s.mode.budgetDefaults(&s.b)
	s.attn = s.mode.attentionLayers(e.m.Config.Layers)
}

// preemptible reports whether the search may be preempted: it holds KV
// blocks, and running it again from its prompt shows nothing twice (no
// text streamed yet, no observer).
func (s *search) preemptible() bool {
	if s.ended() || s.sent || s.opts.Observe != nil {
		return false
	}
	for _, seq := range s.seqs {
		if s.e.kv.Blocks(seq) > 0 {
			return true
		}
	}
	return false
}

// restart preempts the search: it frees every block it holds and makes it
// ready to run again from its prompt. A search's decisions depend only on
// its own rows, so the run again gives the result it would have had;
// Stats counts the restarts and the rows the runs thrown away spent.
func (s *search) restart() {
	st := s.res.Stats
	s.release()
	s.reset()
	s.res.Stats.Restarts = st.Restarts + 1
	s.res.Stats.RestartRows = st.RestartRows + st.Rows + st.PromptRows
	s.res.Stats.Waits = st.Waits
	s.res.Stats.ForwardTime = st.ForwardTime
	s.res.Stats.KVBlocksPeak = st.KVBlocksPeak
}

// prefillChunk is the most prompt tokens one step feeds: a longer prompt
// is fed over several steps, its last chunk deciding the first token.
var prefillChunk = 256 // a variable for the tests

// begin gives the search its root branch, which feeds the prompt.
func (s *search) begin() error {
	root := &branch{leaf: tree.Root, seq: s.e.kv.NewSeq(), feed: slices.Clone(s.prompt)}
	s.seqs[tree.Root] = root.seq
	s.live = []*branch{root}
	return s.mode.initRoot(root)
}

// ended reports whether the search is over (its result is decided, or it
// failed).
func (s *search) ended() bool { return s.res.Stopped != "" || s.err != nil }

// prepare readies the search's next step and returns its rows, or none
// when the search has ended or waits. reserved is the KV blocks the
// searches before it in the same batch will take, and prepare adds what it
// takes; when the free blocks do not hold its step, fit decides (the
// oldest search makes room, the others wait).
func (s *search) prepare(reserved *int, q queued) []model.Row {
	if s.ended() {
		return nil
	}
	if err := s.ctx.Err(); err != nil {
		s.finish(stopReason(err), true)
		s.err = err
		return nil
	}
	if len(s.live) == 0 {
		s.finish("eos", false)
		return nil
	}
	// A branch that would pass the context ends the search as before:
	// the batch must not fail for every search.
	for _, br := range s.live {
		if br.seq.Len()+len(br.feed) > s.e.m.Config.ContextLen {
			s.finish("context-full", false)
			return nil
		}
	}
	if !s.fit(*reserved, q) {
		return nil
	}
	if s.rowsNeeded() == 0 {
		s.err = fmt.Errorf("engine: internal error: %d live branches with no token to run", len(s.live))
		return nil
	}
	if h := s.e.stepHook; h != nil {
		if err := h(s.step); err != nil {
			s.err = err
			return nil
		}
	}
	*reserved += s.blocksNeeded()
	// A long prompt goes in chunks, so that the searches batched with it
	// keep decoding (chunked prefill): all but the last chunk are rows
	// without logits, and the step does not advance.
	if s.step == 0 && len(s.live) == 1 && len(s.live[0].feed) > prefillChunk {
		br := s.live[0]
		s.prefill = prefillChunk
		s.rows = s.rows[:0]
		for _, t := range br.feed[:prefillChunk] {
			s.rows = append(s.rows, model.Row{Seq: br.seq, Token: t, NoLogits: true})
		}
		return s.rows
	}
	s.prefill = 0
	// A multi-token feed after the prompt is a clarify insertion; when
	// Backspace may follow, the logits that predicted its last token are
	// kept too.
	stash := s.step > 0 && s.backspaceOn()
	s.rows = s.rows[:0]
	for _, br := range s.live {
		n := len(br.feed)
		for i, t := range br.feed {
			want := i == n-1 || (stash && i == n-2)
			s.rows = append(s.rows, model.Row{Seq: br.seq, Token: t, NoLogits: !want})
		}
		br.row = len(s.rows) - 1
	}
	return s.rows
}

// consume takes the search's part of a forward pass, whose rows start at
// base in out, and applies the mode's decisions.
func (s *search) consume(out *model.Output, base int, took time.Duration) {
	if s.prefill > 0 { // a chunk of the prompt: no decision yet
		br := s.live[0]
		br.feed = br.feed[s.prefill:]
		st := &s.res.Stats
		st.ForwardTime += took
		st.ForwardPasses++
		st.PromptRows += s.prefill
		return
	}
	for _, br := range s.live {
		br.row += base
	}
	s.base = base
	if err := s.afterForward(out, took); err != nil {
		s.err = err
		return
	}
	if err := s.mode.advance(); err != nil {
		s.err = err
		return
	}
	s.step++
	if f := s.opts.Progress; f != nil {
		st := s.res.Stats
		st.Wall = time.Since(s.start)
		deepest := 0
		for _, br := range s.live {
			deepest = max(deepest, s.t.Node(br.leaf).Depth)
		}
		f(Progress{Step: s.step, Live: len(s.live), Committed: len(s.res.Tokens), Deepest: deepest, Stats: st, Budget: s.b})
	}
}

// rowsNeeded is the number of forward rows the next step costs.
func (s *search) rowsNeeded() int {
	n := 0
	for _, br := range s.live {
		n += len(br.feed)
	}
	return n
}

// blocksNeeded is an upper bound on the KV blocks the next step takes.
func (s *search) blocksNeeded() int {
	n := 0
	for _, br := range s.live {
		n += s.e.kv.BlocksToAppend(br.seq, len(br.feed))
	}
	return n
}

// queued is where a search stands in a step's order: whether it is the
// oldest live search (first), and how many live branches the searches
// before it have (older).
type queued struct {
	first   bool
	older   int
	crowded bool // a search was preempted since one last ended
}

// fit makes the next step fit the row budget, by pruning the worst
// branches, and the free KV blocks (less those reserved by the searches
// before it in the step). A search that does not fit the blocks waits
// for them when an older search runs (false: no step), and a search not
// yet started starts only when every live branch before it can still
// take a block; the oldest search preempts younger ones (restart) and
// only then, alone in the pool as if no other ran, drops its waiting
// alternatives and prunes its worst branches. When even one branch does
// not fit, it ends the search with the best result so far and returns
// false.
func (s *search) fit(reserved int, q queued) bool {
	if s.step > 0 && s.b.MaxRows > 0 {
		for s.res.Stats.Rows+s.rowsNeeded() > s.b.MaxRows {
			if len(s.live) <= 1 {
				s.finish("budget", true)
				return false
			}
			s.prune(s.worst(), "budget")
		}
	}
	if !q.first {
		if s.step == 0 && s.res.Stats.PromptRows == 0 {
			if q.crowded {
				s.res.Stats.Waits++
				return false
			}
			reserved += q.older // room for the older branches' next blocks
		}
		if s.blocksNeeded() > s.e.kv.Stats().FreeBlocks-reserved {
			s.res.Stats.Waits++
			return false
		}
		return true
	}
	for s.blocksNeeded() > s.e.kv.Stats().FreeBlocks-reserved { // shedding frees blocks: read again
		if s.e.preemptFor(s) {
			continue
		}
		if s.shedWaiting("kv-full") {
			continue
		}
		if len(s.live) <= 1 {
			s.finish("kv-full", true)
			return false
		}
		s.prune(s.worst(), "kv-full")
	}
	return true
}

// afterForward records a forward pass's output for the search: its
// statistics, the logits the decisions read (checked finite), the stashed
// rows for Backspace.
func (s *search) afterForward(out *model.Output, took time.Duration) error {
	stash := s.step > 0 && s.backspaceOn()
	st := &s.res.Stats
	st.ForwardTime += took
	s.out = out
	st.ForwardPasses++
	if s.step == 0 {
		st.PromptRows += len(s.rows)
	} else {
		st.Rows += len(s.rows)
		st.TokensExplored += len(s.rows)
	}
	s.useStats = len(s.live) > 0 && out.Stats(s.live[0].row) != nil && !s.opts.IgnoreEOS && s.mode.noiseFloor() == 0
	if s.opts.IgnoreEOS {
		if eos := s.tok.EOS(); eos >= 0 {
			for _, br := range s.live {
				s.out.Logits(br.row)[eos] = float32(math.Inf(-1))
				if stash && len(br.feed) > 1 {
					s.out.Logits(br.row - 1)[eos] = float32(math.Inf(-1))
				}
			}
		}
	}
	for _, br := range s.live {
		if stash && len(br.feed) > 1 {
			br.prev = out.LogitsLater(br.row - 1) // valid through the next pass: see keepPrev
		}
		br.feed = br.feed[:0]
	}
	// Every row a decision reads must be finite: NaN logits (corrupt
	// weights) would otherwise become arbitrary tokens. The measurement
	// the decisions read says so.
	if err := s.measureRows(); err != nil {
		return err
	}
	st.KVBlocksPeak = max(st.KVBlocksPeak, s.e.kv.Stats().BlocksInUse)
	st.MaxLive = max(st.MaxLive, len(s.live))
	return nil
}

// measureRows measures the logits rows of the live branches (once each:
// branches may share one) across the kernel threads, or reads their
// measurement from the backend's statistics (measureStats), and fails on
// a row holding NaN or +Inf.
func (s *search) measureRows() error {
	if s.useStats {
		return s.measureStats()
	}
	floor := s.mode.noiseFloor()
	n := len(s.rows)
	s.measAt = slices.Grow(s.measAt[:0], n)[:n]
	for i := range s.measAt {
		s.measAt[i] = -1
	}
	s.measRows = s.measRows[:0]
	for _, br := range s.live {
		if i := br.row - s.base; s.measAt[i] < 0 {
			s.measAt[i] = len(s.measRows)
			s.measRows = append(s.measRows, s.out.Logits(br.row))
		}
	}
	s.meas = slices.Grow(s.meas[:0], len(s.measRows))[:len(s.measRows)]
	s.measurer.Measure(s.measRows, floor, s.meas)
	for i, row := range s.measRows {
		_, r, err := s.meas[i].Result()
		// A row of NaN and -Inf alone measures as fully masked.
		if err != nil || (math.IsInf(r.LogZ, -1) && !rowstat.Finite(row)) {
			return fmt.Errorf("%w: step %d", ErrNonFinite, s.step)
		}
	}
	clear(s.measRows) // the step's logits are not held past it
	return nil
}

// measure returns the statistics of br's logits row in this step.
func (s *search) measure(br *branch) *policy.RowMeasure {
	return &s.meas[s.measAt[br.row-s.base]]
}

// measured returns measure(br)'s metrics and row statistics.
func (s *search) measured(br *branch) (policy.Metrics, policy.Row) {
	m, r, _ := s.measure(br).Result() // checked finite in measureRows
	return m, r
}

// backspaceOn reports whether the policy may hand Backspace to the engine.
func (s *search) backspaceOn() bool {
	return s.mode.mayBackspace()
}

// tokenConf is DeepConf's token confidence of a row, for the group score;
// 0 when the search does not rank by it (a top-k pass over the vocabulary
// per token is not free).
func (s *search) tokenConf(v rowView, lz float64) float64 {
	if s.opts.Score != policy.ScoreGroup {
		return 0
	}
	s.top = v.top(policy.GroupTopK, s.top)
	var sum float64
	for _, t := range s.top {
		sum += float64(v.logit(t)) - lz
	}
	return -sum / float64(max(len(s.top), 1))
}

// logits and attention of a branch in the current step (the logits
// fetched when the backend has not: see view).
func (s *search) logits(br *branch) []float32 { return s.out.Logits(br.row) }

func (s *search) attention(br *branch) []policy.Attention {
	if len(s.attn) == 0 {
		return nil
	}
	a := s.out.Attention(br.row, 0)
	if a.Heads == 0 { // summed on the device: attentionSums
		return nil
	}
	return []policy.Attention{{Heads: a.Heads, Len: a.Len, Scores: a.Scores, Probs: a.Probs}}
}

// attentionSums are a branch's attention summed where the backend
// computed it (a GPU), or nil when it gave the attention itself.
func (s *search) attentionSums(br *branch) []policy.AttentionSums {
	if len(s.attn) == 0 {
		return nil
	}
	a, ok := s.out.AttentionSums(br.row, 0)
	if !ok {
		return nil
	}
	return []policy.AttentionSums{{Heads: a.Heads, Len: a.Len, Entropy: a.Entropy, AbsScores: a.AbsScores, Disagreement: a.Disagreement}}
}

// extend appends token to br as a new node, to be fed at the next step;
// an end-of-text token finishes the branch instead.
func (s *search) extend(br *branch, tok int, logProb float64, m policy.Metrics, q policy.Quadrant, a policy.Action) tree.ID {
	id := s.t.Add(br.leaf, tree.Node{
		Token: tok, Text: s.tok.Piece(tok), LogProb: logProb, Step: s.step,
		Metrics: m, Quadrant: q, Action: a,
	})
	delete(s.seqs, br.leaf)
	parent := br.leaf
	br.leaf = id
	n := s.t.Node(id)
	if k := s.opts.TopProbs; k > 0 && s.out != nil {
		v := s.view(br)
		lz := v.logZ()
		s.topProbs = v.top(k, s.topProbs) // not s.top: callers iterate it
		n.Top = make([]policy.Candidate, len(s.topProbs))
		for i, t := range s.topProbs {
			n.Top[i] = policy.Candidate{Token: t, LogProb: float64(v.logit(t)) - lz}
		}
	}
	if s.isStop(tok) {
		n.Status, n.Reason = tree.Finished, "eos"
		s.seqs[id] = br.seq // released with the branch
		return id
	}
	if s.scanStop(parent, id, tok) {
		n.Status, n.Reason = tree.Finished, "stop"
		s.seqs[id] = br.seq
		return id
	}
	s.seqs[id] = br.seq
	br.feed = append(br.feed, tok)
	return id
}

// stopTokens are the tokens that end a branch: end of text; beginning of
// text too, since a model that generates it has finished its document and
// starts another (llama2.c's run.c stops there); and Options.StopTokens.
func stopTokens(tok *tokenizer.Tokenizer, o *Options) []int {
	var stops []int
	for _, t := range append([]int{tok.EOS(), tok.BOS()}, o.StopTokens...) {
		if t >= 0 && !slices.Contains(stops, t) {
			stops = append(stops, t)
		}
	}
	return stops
}

// isStop reports whether tok ends a branch (end of text, end of turn).
func (s *search) isStop(tok int) bool { return slices.Contains(s.stops, tok) }

// pathEnds reports whether node id ends its path: a stop token, or a
// token that completed a stop string.
func (s *search) pathEnds(id tree.ID) bool {
	n := s.t.Node(id)
	return s.isStop(n.Token) || n.Reason == "stop"
}

// fork returns a child branch sharing br's cache (copy on write).
func (s *search) fork(br *branch) *branch {
	return &branch{leaf: br.leaf, seq: s.e.kv.Fork(br.seq), score: br.score, before: br.before, row: br.row}
}

// prune removes br from the live set, marks its leaf pruned and frees
// its cache.
func (s *search) prune(br *branch, reason string) {
	s.live = slices.DeleteFunc(s.live, func(b *branch) bool { return b == br })
	s.pruneNode(s.branchTop(br), reason)
	s.log.Debug().Int("step", s.step).Int32("leaf", int32(br.leaf)).Str("reason", reason).Msg("prune")
}

func (s *search) pruneNode(id tree.ID, reason string) {
	if n := s.t.PruneSubtree(id, reason, s.releaseSeq); n > 0 {
		s.res.Stats.Prunes++
	}
}

// releaseSeq frees the KV sequence the search keeps for node id, if any
// (once: it is forgotten).
func (s *search) releaseSeq(id tree.ID) {
	if seq, ok := s.seqs[id]; ok {
		s.e.kv.Free(seq)
		delete(s.seqs, id)
	}
}

// branchTop is the highest node whose subtree holds only br's path: the
// part of the tree that goes when br is pruned.
func (s *search) branchTop(br *branch) tree.ID {
	top := br.leaf
	for {
		n := s.t.Node(top)
		p := n.Parent
		if p == tree.None || s.t.Node(p).Committed || len(s.t.Node(p).Children) != 1 {
			return top
		}
		top = p
	}
}

// worst returns the live branch ranked lowest by the mode's score.
func (s *search) worst() *branch {
	w := s.live[len(s.live)-1]
	for _, br := range slices.Backward(s.live) {
		if s.mode.rank(br) < s.mode.rank(w) {
			w = br
		}
	}
	return w
}

func meanLogProb(p policy.PathScore) float64 {
	if p.Steps == 0 {
		return 0
	}
	return p.LogProb / float64(p.Steps)
}

// commit marks the path to id as chosen and queues its new tokens for the
// stream; keep tokens at the end are held back (they may be backspaced).
func (s *search) commit(id tree.ID, keep int) {
	path := s.t.Path(id)
	i := slices.Index(path, s.committed)
	for _, n := range path[i+1:] {
		if t := s.t.Node(n).Token; !s.isStop(t) {
			s.unsent = append(s.unsent, t)
			s.res.Tokens = append(s.res.Tokens, t)
		}
	}
	s.t.Commit(id)
	s.committed = id
	s.flush(keep)
}

// flush streams the committed tokens but the last keep.
func (s *search) flush(keep int) {
	n := max(len(s.unsent)-keep, 0)
	if n == 0 {
		return
	}
	for _, t := range s.unsent[:n] {
		if txt := s.dec.Next(t); txt != "" {
			s.send(txt)
		}
	}
	s.unsent = append(s.unsent[:0], s.unsent[n:]...)
}

// committedLen is the number of new tokens on the committed path.
func (s *search) committedLen() int { return len(s.res.Tokens) }

// finish ends the search; exhausted marks a budget or deadline cut.
func (s *search) finish(reason string, exhausted bool) {
	if s.res.Stopped != "" {
		return
	}
	s.res.Stopped = reason
	s.res.BudgetExhausted = exhausted
	s.mode.finalize()
}

// result completes the Result (text, stats) once the search has ended.
func (s *search) result() *Result {
	s.flush(0)
	if s.opts.Stream != nil {
		if txt := s.dec.Flush(); txt != "" {
			s.send(txt)
		}
		s.endStream()
	}
	if text, ok := s.stopCut(); ok {
		s.res.Text = text
		if s.res.Stopped != "deadline" && s.res.Stopped != "canceled" {
			s.res.Stopped = "stop" // the result's path ended at a stop string, whatever ended the other paths
		}
	} else {
		s.res.Text = decodeAfter(s.tok, s.prompt[len(s.prompt)-1], s.res.Tokens)
	}
	if !utf8.ValidString(s.res.Text) {
		s.res.TextBytes = []byte(s.res.Text)
	}
	s.res.Tree = s.t
	s.res.Paths = s.paths()
	s.res.Stats.Generated = len(s.res.Tokens)
	s.res.Stats.Wall = time.Since(s.start)
	return s.res
}

// release frees every KV sequence the search still holds, in node order.
func (s *search) release() {
	ids := slices.Sorted(maps.Keys(s.seqs))
	for _, id := range ids {
		s.releaseSeq(id)
	}
	s.live = nil
}

// decodeAfter decodes ids as a continuation of token prev.
func decodeAfter(tok *tokenizer.Tokenizer, prev int, ids []int) string {
	d := tok.NewDecoder(prev)
	var b []byte
	for _, t := range ids {
		b = append(b, d.Next(t)...)
	}
	return string(append(b, d.Flush()...))
}

func stopReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline"
	}
	return "canceled"
}

// logSumExp returns log Σ exp(logits) and the index of the largest.
func logSumExp(logits []float32) (lz float64, arg int) {
	mx, arg, _ := rowstat.Top2(logits)
	if math.IsInf(float64(mx), 0) { // all masked, or an infinite logit
		return float64(mx), arg
	}
	sum, _, _ := rowstat.LogitMoments(logits, mx)
	return float64(mx) + math.Log(sum), arg
}

// topK writes the indices of the k largest logits, largest first, to dst
// (ties: the lower index first).
func topK(logits []float32, k int, dst []int) []int { return policy.TopTokens(logits, k, -1, dst) }
