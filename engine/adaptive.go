package engine

import (
	"cmp"
	"slices"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// group is a fork being explored: the node whose next token forked, and
// the branches whose lookahead has ended (they keep their caches until
// the siblings are compared).
type group struct {
	at   tree.ID
	done []*branch
}

// stepAdaptive is one step of beam-adaptive search. Outside a fork one
// branch, the trunk, follows the entropix quadrant policy: argmax when
// confident, clarify when uniformly unsure, backspace when lost, adaptive
// sampling otherwise. When a few distinct options compete (low entropy,
// high varentropy) the trunk forks into the adaptive min-p candidate set.
// The branches then advance together, may fork again within the width
// budget, and stop looking ahead at end of text, at the maximum depth, or
// once back within the entropy bounds for SettleSteps steps; a branch whose
// mean score falls PruneMargin below its best sibling's is pruned early.
// When none is left exploring, the best by path score is committed and
// becomes the trunk; the others are pruned and their caches freed.
func (s *search) stepAdaptive() error {
	if s.group == nil {
		return s.stepTrunk(s.live[0])
	}
	return s.stepGroup()
}

// backspaceOn reports whether the policy may hand Backspace to the engine.
func (s *search) backspaceOn() bool {
	return s.b.MaxWidth >= 2 && s.opts.Policy.Backspace && s.opts.Policy.MaxBackspaces > 0
}

// forkBudget is the most branches a fork may create now: the free width,
// and no more than half the rows left.
func (s *search) forkBudget() int {
	w := s.b.MaxWidth - len(s.live) + 1
	if s.group != nil {
		w -= len(s.group.done)
	}
	if s.b.MaxRows > 0 {
		w = min(w, (s.b.MaxRows-s.res.Stats.Rows)/2)
	}
	if s.committedLen() >= s.b.MaxTokens-1 {
		w = 1
	}
	return max(w, 1)
}

func (s *search) stepTrunk(br *branch) error {
	logits := s.logits(br)
	d, err := br.trunk.Decide(policy.Step{Logits: logits, Attention: s.attention(br), Budget: s.forkBudget()})
	if err != nil {
		return err
	}
	return s.applyTrunk(br, &d, logits)
}

func (s *search) applyTrunk(br *branch, d *policy.Decision, logits []float32) error {
	s.logDecision(br, d)
	lz, _ := logSumExp(logits)
	switch d.Action {
	case policy.Backspace:
		return s.backspace(br)
	case policy.Branch:
		s.flush(0) // nothing before the fork can be taken back now
		s.group = &group{at: br.leaf}
		s.live = s.live[:0]
		s.branchOut(br, d, policy.PathScore{})
		if len(s.live) == 0 {
			s.resolveGroup(false)
		}
		return nil
	}
	s.applyTokens(br, d, logits, lz)
	s.keepPrev(br, d, logits)
	keep := 0
	if s.backspaceOn() {
		keep = 1
	}
	s.commitTrunk(br, keep)
	return nil
}

// keepPrev keeps the logits that chose br's new leaf, for a Backspace at
// the next step. Clarify insertions keep none: their last token was not
// chosen from these logits (see forward, which stashes the right row).
func (s *search) keepPrev(br *branch, d *policy.Decision, logits []float32) {
	if !s.backspaceOn() {
		return
	}
	if d.Action == policy.Clarify && len(d.Tokens) > 1 {
		br.prev = br.prev[:0]
		return
	}
	br.prev = append(br.prev[:0], logits...)
}

// backspace takes back the trunk's last token and chooses again from the
// logits that chose it (the policy bans the same token and a second
// backspace). The re-decision sees no attention: it was not kept.
func (s *search) backspace(br *branch) error {
	leaf := s.t.Node(br.leaf)
	if len(br.prev) == 0 || leaf.Parent == tree.None || !leaf.Committed {
		// Nothing to take back: continue from the current logits greedily.
		return s.resampleGreedy(br)
	}
	tok, parent := leaf.Token, leaf.Parent
	s.uncommitLast()
	leaf.Seq = nil
	s.t.Node(parent).Seq = br.seq
	s.pruneNode(br.leaf, "backspace")
	if err := s.e.kv.Truncate(br.seq, br.seq.Len()-1); err != nil {
		return err
	}
	br.leaf = parent
	br.trunk.Rewind(tok)
	prev := slices.Clone(br.prev)
	d, err := br.trunk.Decide(policy.Step{Logits: prev, Budget: s.forkBudget()})
	if err != nil {
		return err
	}
	return s.applyTrunk(br, &d, prev)
}

// resampleGreedy extends the trunk br with the argmax of its logits.
func (s *search) resampleGreedy(br *branch) error {
	logits := s.logits(br)
	m, _ := policy.Measure(logits, 0)
	d := s.argmaxDecision(logits, m)
	return s.applyTrunk(br, &d, logits)
}

// argmaxDecision is a Greedy decision for logits measured as m.
func (s *search) argmaxDecision(logits []float32, m policy.Metrics) policy.Decision {
	lz, arg := logSumExp(logits)
	lp := float64(logits[arg]) - lz
	c := policy.Confidence(m)
	return policy.Decision{Action: policy.Greedy, Token: arg, Metrics: m, Quadrant: s.opts.Policy.Thresholds.Quadrant(m),
		LogProb: lp, Confidence: c, Margin: policy.TopMargin(logits), Score: lp + c}
}

// branchOut forks br into the decision's candidates, each a branch of the
// current group starting from score base; br itself takes the first.
func (s *search) branchOut(br *branch, d *policy.Decision, base policy.PathScore) {
	cands := slices.Clone(d.Candidates)
	from := br.leaf
	kids := make([]*branch, len(cands))
	for i := range cands {
		kid := br
		if i > 0 {
			kid = s.fork(br)
		}
		kid.trunk = br.trunk.Split(uint64(i + 1))
		kids[i] = kid
	}
	s.res.Stats.Forks++
	for i, c := range cands {
		kid := kids[i]
		kid.leaf, kid.settled, kid.done = from, 0, ""
		kid.score = base
		kid.score.Add(d.CandidateScore(c))
		s.extend(kid, c.Token, c.LogProb, d.Metrics, d.Quadrant, policy.Branch)
		kid.trunk.Accept(c.Token)
		s.keepPrev(kid, d, s.logits(br))
		s.t.Node(kid.leaf).Score = kid.score.Value(s.opts.Score)
		switch {
		case s.isStop(c.Token):
			kid.done = "eos"
		case s.t.Node(kid.leaf).Depth >= s.b.MaxTokens:
			kid.done = "max-tokens"
		default:
			s.live = append(s.live, kid)
			continue
		}
		s.group.done = append(s.group.done, kid)
	}
}

func (s *search) stepGroup() error {
	g := s.group
	atDepth := s.t.Node(g.at).Depth
	for _, br := range slices.Clone(s.live) {
		logits := s.logits(br)
		depth := s.t.Node(br.leaf).Depth - atDepth
		budget := 1
		if depth < s.b.MaxDepth && s.t.Node(br.leaf).Depth < s.b.MaxTokens-1 {
			budget = s.forkBudget()
		}
		d, err := br.trunk.Decide(policy.Step{Logits: logits, Attention: s.attention(br), Budget: budget})
		if err != nil {
			return err
		}
		s.logDecision(br, &d)
		switch d.Action {
		case policy.Backspace:
			// Lost inside a lookahead: a poor option, pruned, unless it is
			// the last one left, which goes on with its most probable token.
			if len(s.live)+len(g.done) > 1 {
				s.prune(br, "lost")
				continue
			}
			d = s.argmaxDecision(logits, d.Metrics)
		case policy.Branch:
			s.live = slices.DeleteFunc(s.live, func(b *branch) bool { return b == br })
			s.branchOut(br, &d, br.score)
			continue
		}
		lz, _ := logSumExp(logits)
		s.applyTokens(br, &d, logits, lz)
		s.keepPrev(br, &d, logits)
		if d.Quadrant == policy.LELV {
			br.settled++
		} else {
			br.settled = 0
		}
		leaf := s.t.Node(br.leaf)
		switch {
		case s.isStop(leaf.Token):
			s.stopLooking(br, "eos")
		case leaf.Depth >= s.b.MaxTokens:
			s.stopLooking(br, "max-tokens")
		case leaf.Depth-atDepth >= s.b.MaxDepth:
			s.stopLooking(br, "max-depth")
		case br.settled >= s.opts.SettleSteps:
			s.stopLooking(br, "settled")
		}
	}

	// Early pruning: far below the best sibling.
	best := s.bestInGroup()
	for _, br := range slices.Clone(s.live) {
		if br != best && br.score.Steps >= 2 && best.score.Value(s.opts.Score)-br.score.Value(s.opts.Score) > s.opts.PruneMargin {
			s.prune(br, "below-sibling")
		}
	}
	if len(s.live) == 0 {
		s.resolveGroup(false)
	}
	return nil
}

// stopLooking ends br's lookahead; it waits, cache and all, for the
// comparison with its siblings.
func (s *search) stopLooking(br *branch, why string) {
	br.done = why
	s.live = slices.DeleteFunc(s.live, func(b *branch) bool { return b == br })
	s.group.done = append(s.group.done, br)
}

// bestInGroup returns the best branch of the group, exploring or done.
func (s *search) bestInGroup() *branch {
	var best *branch
	for _, br := range append(slices.Clone(s.live), s.group.done...) {
		if best == nil {
			best = br
			continue
		}
		if c := cmp.Compare(br.score.Value(s.opts.Score), best.score.Value(s.opts.Score)); c > 0 || (c == 0 && br.leaf < best.leaf) {
			best = br
		}
	}
	return best
}

// resolveGroup commits the group's best branch, prunes the others and
// makes the best the trunk again. final (the search is ending) commits
// without continuing.
func (s *search) resolveGroup(final bool) {
	g := s.group
	if g == nil {
		return
	}
	best := s.bestInGroup()
	if best == nil {
		s.group = nil
		return
	}
	s.live = []*branch{best}
	// Everything hanging off the winning path below the fork point goes:
	// the losers' subtrees, nested forks included, and their caches.
	path := s.t.Path(best.leaf)
	for i := slices.Index(path, g.at); i >= 0 && i+1 < len(path); i++ {
		for _, c := range s.t.Node(path[i]).Children {
			if c != path[i+1] {
				s.pruneNode(c, "lost-to-sibling")
			}
		}
	}
	s.group = nil
	keep := 0
	if s.backspaceOn() && !final {
		keep = 1
	}
	s.commit(best.leaf, keep)
	why := best.done
	best.done, best.settled = "", 0
	if final {
		return
	}
	switch {
	case why == "eos":
		s.finish("eos", false)
	case why == "max-tokens" || s.committedLen() >= s.b.MaxTokens:
		n := s.t.Node(best.leaf)
		n.Status, n.Reason = tree.Finished, "max-tokens"
		s.finish("max-tokens", false)
	}
}
