package engine

import (
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/internal/workers"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// Beam-adaptive search is a best-first tree search over the points where
// the model doubts.
//
// Each live branch follows the entropix policy in search mode (see
// policy.Search): the argmax when the model is sure; a fork where at least
// two tokens pass the adaptive min-p cut (the cut slides with the
// varentropy); the clarify text when uniformly unsure; and a backspace
// when lost right after an uncertain token. At a fork the branch goes on
// with the most probable candidate and every other candidate waits on the
// frontier (a gods red-black tree, tree.Frontier) with the probability of
// its whole path, its KV cache a copy-on-write fork of the branch's.
//
// Paths run to end of text. Once one has finished, the search re-opens the
// most probable waiting alternatives, up to Budget.MaxWidth branches
// advancing together in one batched forward pass, each admitted only when
// the rows left can pay for it to finish (estimated from the finished
// paths' lengths). The finished paths then vote on the answer
// (Options.Answer; the whole text without one), each weighted by its
// score (Options.Score; by default its probability, which makes the vote
// an estimate of the most probable answer), and the best path of the
// winning answer is the result. With probability weights the search stops
// early once the vote is settled: when the leading answer's lead exceeds
// the probability of every path not yet finished.
type adaptive struct {
	*search
	frontier *tree.Frontier
	waiting  map[tree.ID]*branch // the frontier's branches, their token not yet fed
	// waitMass is the probability of the waiting paths, Σ exp(priority).
	waitMass float64
	leaves   []tree.ID // finished paths
	scores   map[tree.ID]policy.PathScore
	answers  map[tree.ID]string
	pathLen  int // longest finished path (tokens), for admission
	// The step's decisions, one a live branch, made on the kernel threads
	// before they are applied in order (a decision reads only its own
	// branch's policy state and row).
	stepLive []*branch
	stepDec  []stepDecision
}

// stepDecision is a live branch's decision for the step.
type stepDecision struct {
	d      policy.Decision
	prevLP float64
	err    error
}

func newAdaptive(s *search) *adaptive {
	return &adaptive{search: s, frontier: tree.NewFrontier(), waiting: map[tree.ID]*branch{},
		scores: map[tree.ID]policy.PathScore{}, answers: map[tree.ID]string{}}
}

// budgetDefaults: 4 live branches and, since a tree search without a row
// budget would explore every fork, four paths' worth of rows.
func (s *adaptive) budgetDefaults(b *Budget) {
	if b.MaxWidth == 0 {
		b.MaxWidth = 4
	}
	if b.MaxRows == 0 {
		b.MaxRows = 4 * b.MaxTokens
	}
}

// attentionLayers: the policy reads the last layer's attention.
func (s *adaptive) attentionLayers(n int) []int { return []int{n - 1} }

// noiseFloor is the policy's.
func (s *adaptive) noiseFloor() float64 { return s.opts.Policy.NoiseFloor }

// initRoot gives the root the policy's decider: in search mode when the
// width allows forks, else single-path.
func (s *adaptive) initRoot(root *branch) error {
	m := policy.SinglePath
	if s.b.MaxWidth >= 2 {
		m = policy.Search
	}
	return s.initDecider(root, m)
}

// mayBackspace: when the width allows more than one path and the policy
// allows backspaces.
func (s *adaptive) mayBackspace() bool {
	return s.b.MaxWidth >= 2 && s.opts.Policy.Backspace && s.opts.Policy.MaxBackspaces > 0
}

// defaultAnswer: a path that does not mark its answer does not vote.
func (s *adaptive) defaultAnswer() string { return "marked" }

// rank is the path's probability.
func (s *adaptive) rank(br *branch) float64 { return s.t.Node(br.leaf).CumLogProb }

// wait puts br, a fork's alternative, on the frontier.
func (a *adaptive) wait(br *branch, logProb float64) {
	a.waiting[br.leaf] = br
	a.frontier.Push(br.leaf, logProb)
	a.waitMass += math.Exp(logProb)
}

// maxWaiting bounds the frontier: more alternatives than a search can
// ever open cost memory and time for nothing.
const maxWaiting = 512

// worthWaiting reports whether an alternative of path log-probability lp
// earns a place on the frontier: there is room, or it beats the least
// probable waiting one (which the caller's wait then pushes out).
func (a *adaptive) worthWaiting(lp float64) bool {
	if a.frontier.Len() < maxWaiting {
		return true
	}
	_, last, _ := a.frontier.Last()
	return lp > last
}

// take removes id from the frontier and returns its branch.
func (a *adaptive) take(id tree.ID) *branch {
	p, _ := a.frontier.Priority(id)
	a.frontier.Remove(id)
	a.waitMass = max(a.waitMass-math.Exp(p), 0)
	br := a.waiting[id]
	delete(a.waiting, id)
	if len(a.waiting) == 0 {
		a.waitMass = 0 // no rounding left over
	}
	return br
}

// advance is one step of beam-adaptive search: a decision for every
// live branch, then the frontier refills the width and the search ends when
// nothing is left to explore, the rows cannot pay for more, or the vote is
// settled.
func (s *adaptive) advance() error {
	s.stepLive = append(s.stepLive[:0], s.live...)
	n := len(s.stepLive)
	s.stepDec = slices.Grow(s.stepDec[:0], n)[:n]
	if n > 1 {
		workers.ParallelTask(n, s)
	} else {
		s.Run(0, n)
	}
	for i, br := range s.stepLive {
		if err := s.applyStep(br, &s.stepDec[i]); err != nil {
			return err
		}
	}
	clear(s.stepLive)
	clear(s.stepDec) // their candidates are the trunks' scratch
	s.cutLoops()
	s.streamTrunk()
	if len(s.leaves) > 0 && s.voteSettled() {
		s.finish("settled", false)
		return nil
	}
	s.refill()
	if len(s.live) == 0 {
		reason := "eos" // or max-tokens: finalize says which path won
		if s.frontier.Len() > 0 {
			reason = "budget"
		}
		s.finish(reason, reason == "budget")
	}
	return nil
}

// cutLoops prunes the live branches caught in a repetition loop
// (policy.Config.Loop) while another path can take their place: a loop's
// answer is no answer, and its rows are better spent on the others. A path
// that cannot be replaced goes on, its policy steering it out of the loop.
func (s *adaptive) cutLoops() {
	for i := len(s.live) - 1; i >= 0; i-- {
		if br := s.live[i]; br.decider.Looping() > 0 && s.replaceable(br) {
			s.prune(br, "loop")
		}
	}
}

// replaceable reports whether another path can stand in for br: a
// finished one, another live one not looping, or the most probable waiting
// alternative when the rows left can pay for it to reach the token limit
// beside the other live paths.
func (s *adaptive) replaceable(br *branch) bool {
	if len(s.leaves) > 0 {
		return true
	}
	need := 0
	for _, o := range s.live {
		if o != br {
			if o.decider.Looping() == 0 {
				return true
			}
			need += s.rowsToFinish(o.leaf)
		}
	}
	id, _, ok := s.frontier.Peek()
	if !ok {
		return false
	}
	return s.b.MaxRows == 0 || s.res.Stats.Rows+need+s.rowsToFinish(id) <= s.b.MaxRows
}

// streamTrunk commits, and so streams, the text every path shares: until
// the first fork there is one path, and its tokens but the last (which a
// backspace may still take back) are the result's.
func (s *adaptive) streamTrunk() {
	if s.res.Stats.Forks > 0 || len(s.live) != 1 || len(s.leaves) > 0 || s.frontier.Len() > 0 {
		return
	}
	if p := s.t.Node(s.live[0].leaf).Parent; p != tree.None && p != tree.Root && p != s.committed {
		s.commit(p, 0)
	}
}

// Run decides for live branches [lo, hi) of the step: the kernel
// threads' share of advance.
func (s *adaptive) Run(lo, hi int) {
	for i := lo; i < hi; i++ {
		br, sd := s.stepLive[i], &s.stepDec[i]
		leaf := s.t.Node(br.leaf)
		budget := 1
		if leaf.Depth < s.b.MaxTokens-1 {
			budget = s.opts.Policy.Fork.MaxWidth
		}
		sd.prevLP = 0
		if br.leaf != tree.Root {
			sd.prevLP = leaf.LogProb
		}
		st := s.decideStep(br)
		st.Budget, st.PrevLogProb = budget, sd.prevLP
		sd.d, sd.err = br.decider.Decide(st)
	}
}

// applyStep applies br's decision of the step.
func (s *adaptive) applyStep(br *branch, sd *stepDecision) error {
	if sd.err != nil {
		return sd.err
	}
	v := s.view(br)
	if f := s.opts.Observe; f != nil {
		s.top = v.top(2, s.top)
		ratio := 0.0
		if len(s.top) == 2 {
			ratio = math.Exp(float64(v.logit(s.top[1]) - v.logit(s.top[0])))
		}
		f(policy.Observation{Metrics: sd.d.Metrics, Ratio: ratio, PrevP: math.Exp(sd.prevLP)})
	}
	return s.applyAdaptive(br, &sd.d, v)
}

// applyAdaptive applies decision d, made on row v, to br.
func (s *adaptive) applyAdaptive(br *branch, d *policy.Decision, v rowView) error {
	s.logDecision(br, d)
	lz := d.LogZ
	switch d.Action {
	case policy.Backspace:
		return s.backspace(br)
	case policy.Branch:
		s.branchOut(br, d, v, lz)
		return nil
	}
	s.applyTokens(br, d, v, lz)
	s.keepPrev(br, d, v)
	s.endIfDone(br)
	return nil
}

// keepPrev keeps the logits that chose br's new leaf, for a Backspace at
// the next step. Clarify insertions keep none: their last token was not
// chosen from these logits (see forward, which stashes the right row).
func (s *adaptive) keepPrev(br *branch, d *policy.Decision, v rowView) {
	if !s.backspaceOn() {
		return
	}
	if d.Action == policy.Clarify && len(d.Tokens) > 1 {
		br.prev = nil
		return
	}
	// The policy takes back only a token it was unsure of
	// (Config.BackspaceBelow, the same test): a confident one needs no
	// row.
	if math.Exp(s.t.Node(br.leaf).LogProb) >= s.opts.Policy.BackspaceBelow {
		br.prev = nil
		return
	}
	// Not a copy, and not fetched until a Backspace asks for it: a step's
	// logits rows outlive the next forward pass (model.Output), and a
	// Backspace comes at the next step or never. (After a Backspace, v is
	// the branch's own copy of its row.)
	br.prev = v.later()
}

// backspace takes back br's last token and chooses again from the logits
// that chose it (the policy bans that token and a second backspace). A
// token that was a fork's choice is not chosen again: its siblings wait on
// the frontier, so the branch is simply dropped.
func (s *adaptive) backspace(br *branch) error {
	leaf := s.t.Node(br.leaf)
	if leaf.Action == policy.Branch && s.frontier.Len()+len(s.live) > 1 {
		s.prune(br, "lost")
		return nil
	}
	if br.prev == nil || leaf.Parent == tree.None {
		v := s.view(br)
		d := s.argmaxDecision(v.logits())
		return s.applyAdaptive(br, &d, v)
	}
	tok, parent := leaf.Token, leaf.Parent
	delete(s.seqs, br.leaf)
	s.seqs[parent] = br.seq
	s.pruneNode(br.leaf, "backspace")
	if err := s.e.kv.Truncate(br.seq, br.seq.Len()-1); err != nil {
		return err
	}
	br.leaf = parent
	br.score = br.before
	br.decider.Rewind(tok)
	prev := slices.Clone(br.prev())
	br.prev = nil
	lp := 0.0
	if parent != tree.Root {
		lp = s.t.Node(parent).LogProb
	}
	d, err := br.decider.Decide(policy.Step{Logits: prev, Budget: s.opts.Policy.Fork.MaxWidth, PrevLogProb: lp})
	if err != nil {
		return err
	}
	return s.applyAdaptive(br, &d, rowView{row: prev})
}

// argmaxDecision is a Greedy decision for logits.
func (s *adaptive) argmaxDecision(logits []float32) policy.Decision {
	m, row, _ := policy.MeasureRow(logits, 0)
	lp := float64(logits[row.Arg]) - row.LogZ
	return policy.Decision{Action: policy.Greedy, Token: row.Arg, Metrics: m, Quadrant: s.opts.Policy.Thresholds.Quadrant(m),
		LogProb: lp, Confidence: policy.Confidence(m), Margin: row.Margin, Score: s.opts.Policy.Scales.Score(m, lp), LogZ: row.LogZ}
}

// branchOut forks br: br goes on with the most probable candidate, every
// other one waits on the frontier with its own branch (a copy-on-write
// fork of br's cache, its token fed when it is re-opened).
func (s *adaptive) branchOut(br *branch, d *policy.Decision, v rowView, lz float64) {
	cands := slices.Clone(d.Candidates)
	from, base := br.leaf, br.score
	conf := s.tokenConf(v, lz)
	s.res.Stats.Forks++
	// A fork's choice is not chosen again (see backspace): br, like the
	// branches forked from it, keeps no row for it. (It kept the row of
	// the step before, which did not choose this token.)
	br.prev = nil
	for i, c := range slices.Backward(cands) {
		if i > 0 && !s.worthWaiting(s.t.Node(from).CumLogProb+c.LogProb) {
			continue // less probable than every path the frontier can hold
		}
		kid := br
		if i > 0 {
			kid = s.fork(br)
			kid.decider = br.decider.Clone()
			kid.leaf = from
		}
		kid.before = base
		kid.score = base
		st := d.CandidateScore(c)
		st.TokenConf = conf
		kid.score.Add(st)
		s.extend(kid, c.Token, c.LogProb, d.Metrics, d.Quadrant, policy.Branch)
		kid.decider.Accept(c.Token)
		if i == 0 {
			// A waiting alternative keeps no logits: taking back a fork's
			// choice drops the branch (its siblings wait), see backspace.
			s.keepPrev(kid, d, v)
		}
		n := s.t.Node(kid.leaf)
		n.Score = kid.score.Value(s.opts.Score)
		if i > 0 && !s.pathEnds(kid.leaf) && n.Depth < s.b.MaxTokens {
			if s.frontier.Len() >= maxWaiting {
				s.dropWaiting("frontier-full")
			}
			s.wait(kid, n.CumLogProb)
			continue
		}
		s.endIfDone(kid)
	}
}

// endIfDone finishes br's path at a stop token or the token limit: it
// leaves the live set and its cache is freed.
func (s *adaptive) endIfDone(br *branch) {
	n := s.t.Node(br.leaf)
	switch {
	case s.isStop(n.Token):
		n.Status, n.Reason = tree.Finished, "eos"
	case n.Reason == "stop": // a stop string, finished by extend
	case n.Depth >= s.b.MaxTokens:
		n.Status, n.Reason = tree.Finished, "max-tokens"
	default:
		return
	}
	s.releaseSeq(br.leaf)
	s.live = slices.DeleteFunc(s.live, func(b *branch) bool { return b == br })
	s.leaves = append(s.leaves, br.leaf)
	s.scores[br.leaf] = br.score
	s.answers[br.leaf] = s.answer(br.leaf)
	s.pathLen = max(s.pathLen, n.Depth)
}

// refill re-opens the best waiting alternatives while the width allows and
// the rows left can pay for every live path to finish.
func (s *adaptive) refill() {
	if len(s.leaves) == 0 && len(s.live) > 0 {
		return // the first path runs alone (unless it was dropped)
	}
	if len(s.live) >= s.b.MaxWidth || s.frontier.Len() == 0 {
		return
	}
	// Best first: the most probable alternatives that the rows left can
	// pay to finish, with every live path. The walk looks at a bounded
	// number of them, so that a wide frontier costs no more per step.
	need := s.verifyReserve()
	for _, br := range s.live {
		need += s.rowsToFinish(br.leaf)
	}
	var open []tree.ID
	seen := 0
	for id := range s.frontier.All() {
		if len(s.live)+len(open) >= s.b.MaxWidth || seen >= maxRefillScan {
			break
		}
		seen++
		cost := s.rowsToFinish(id) + s.verifyExtra(id)
		if s.b.MaxRows > 0 && s.res.Stats.Rows+need+cost > s.b.MaxRows {
			continue
		}
		need += cost
		open = append(open, id)
	}
	for _, id := range open {
		s.live = append(s.live, s.take(id))
	}
}

// maxRefillScan bounds the waiting alternatives one refill looks at.
const maxRefillScan = 256

// dropWaiting drops the least probable waiting alternative, freeing its
// cache (the KV pool is full); it reports false when none waits.
func (s *adaptive) dropWaiting(reason string) bool {
	id, _, ok := s.frontier.Last()
	if !ok {
		return false
	}
	s.take(id)
	s.pruneNode(id, reason)
	return true
}

// rowsToFinish estimates the rows a path at node id needs to end: as long
// as the longest finished path, and at least one; to the token limit while
// none has finished (the first path was cut).
func (s *adaptive) rowsToFinish(id tree.ID) int {
	if len(s.leaves) == 0 {
		return max(s.b.MaxTokens-s.t.Node(id).Depth, 1)
	}
	return max(s.pathLen-s.t.Node(id).Depth+1, 1)
}

// voteWeight is a finished path's weight in the vote.
func (s *adaptive) voteWeight(id tree.ID) float64 {
	sc := s.scores[id]
	switch s.opts.Score {
	case policy.ScoreLogProb:
		return math.Exp(s.t.Node(id).CumLogProb)
	case policy.ScoreMargin, policy.ScoreGroup:
		return max(sc.Value(s.opts.Score), 0)
	}
	return math.Exp(sc.Value(s.opts.Score))
}

// tally sums the vote weights of the finished paths by answer, in the
// order the answers first appeared.
func (s *adaptive) tally() (answers []string, mass map[string]float64) {
	mass = map[string]float64{}
	for _, id := range s.leaves {
		a := s.answers[id]
		if _, ok := mass[a]; !ok {
			answers = append(answers, a)
		}
		mass[a] += s.voteWeight(id)
	}
	return answers, mass
}

// voteSettled reports whether no path still open could change the vote:
// the leading answer leads by more than the probability of every live and
// waiting path. Only probability weights bound what is left.
func (s *adaptive) voteSettled() bool {
	if s.opts.Score != policy.ScoreLogProb || s.opts.Verifier != nil {
		return false
	}
	answers, mass := s.tally()
	first, second := 0.0, 0.0
	for _, a := range answers {
		switch m := mass[a]; {
		case m > first:
			first, second = m, first
		case m > second:
			second = m
		}
	}
	rest := s.waitMass
	for _, br := range s.live {
		rest += math.Exp(s.t.Node(br.leaf).CumLogProb)
	}
	return first-second > rest*(1+1e-9)
}

// finalize commits the result when the search ends: the best path
// of the answer with the most weight, or, when no path has finished, the
// most probable of the paths still open.
func (s *adaptive) finalize() {
	for id := range s.waiting {
		// Not explored, which is not a prune: Stats.Prunes leaves them out.
		s.t.PruneSubtree(id, "unexplored", s.releaseSeq)
	}
	for _, br := range s.live {
		s.scores[br.leaf] = br.score
	}
	better := func(x, y tree.ID) bool {
		wx, wy := s.voteWeight(x), s.voteWeight(y)
		return wx > wy || (wx == wy && x < y)
	}
	if len(s.leaves) == 0 {
		best := tree.None
		for _, br := range s.live {
			if best == tree.None || s.t.Node(br.leaf).CumLogProb > s.t.Node(best).CumLogProb {
				best = br.leaf
			}
		}
		if best != tree.None {
			s.commit(best, 0)
		}
		return
	}
	best, ok := s.verifiedChoice(s.leaves)
	if !ok {
		win := heaviest(s.tally())
		for _, id := range s.leaves {
			if s.answers[id] == win && (best == tree.None || better(id, best)) {
				best = id
			}
		}
	}
	s.commit(best, 0)
	if n := s.t.Node(best); s.res.Stopped == "eos" && n.Reason == "max-tokens" {
		s.res.Stopped = "max-tokens" // every path was explored; the winner ran to the limit
	}
}
