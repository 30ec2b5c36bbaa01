package engine

import (
	"cmp"
	"slices"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// beamCand is one possible extension of a beam: small, so that sorting
// K² of them per step stays cheap.
type beamCand struct {
	norm    float64 // length-normalised log-probability with the token
	logProb float64
	parent  int32 // index into s.live
	tok     int32
}

// beamSearch is fixed-width beam search's state.
type beamSearch struct {
	*search
	finished []tree.ID // finished hypotheses
	cands    []beamCand
	metrics  []policy.Metrics
	leaves   []tree.ID
	scores   []policy.PathScore
}

// budgetDefaults: Options.Width beams.
func (s *beamSearch) budgetDefaults(b *Budget) {
	if b.MaxWidth == 0 {
		b.MaxWidth = s.opts.Width
	}
}

func (s *beamSearch) attentionLayers(int) []int { return nil }

// noiseFloor: none (beam shows every token's quadrant as measured).
func (s *beamSearch) noiseFloor() float64 { return 0 }

func (s *beamSearch) initRoot(*branch) error { return nil }

func (s *beamSearch) mayBackspace() bool { return false }

// defaultAnswer: beam search chooses by probability, not by answer.
func (s *beamSearch) defaultAnswer() string { return "none" }

// rank is the beam's length-normalised log-probability.
func (s *beamSearch) rank(br *branch) float64 { return meanLogProb(br.score) }

func (s *beamSearch) advance() error {
	s.stepBeam()
	return nil
}

// stepBeam is one step of fixed-width beam search: every beam proposes its
// K most probable tokens; the K best extensions by length-normalised
// log-probability live on (the first child of a beam keeps its cache, the
// others fork it), end-of-text extensions that rank among them become
// finished hypotheses, and beams with no surviving child are pruned.
func (s *beamSearch) stepBeam() {
	k := s.b.MaxWidth
	cands := s.cands[:0]
	metrics := s.metrics[:0]
	leaves := s.leaves[:0]
	for i, br := range s.live {
		v := s.view(br)
		m, row := s.measured(br)
		lz := row.LogZ
		metrics = append(metrics, m)
		leaves = append(leaves, br.leaf)
		s.top = v.top(k, s.top)
		for _, t := range s.top {
			lp := float64(v.logit(t)) - lz
			norm := (br.score.LogProb + lp) / float64(br.score.Steps+1)
			cands = append(cands, beamCand{norm: norm, logProb: lp, parent: int32(i), tok: int32(t)})
		}
	}
	// A total order (score, then parent, then token): deterministic.
	slices.SortFunc(cands, func(a, b beamCand) int {
		if c := cmp.Compare(b.norm, a.norm); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(a.tok, b.tok))
	})
	s.cands, s.metrics, s.leaves = cands, metrics, leaves

	used := make([]bool, len(s.live))
	forked := make([]bool, len(s.live)) // a parent counted as a fork point
	scores := s.scores[:0]              // the parents' scores before this step
	for _, br := range s.live {
		scores = append(scores, br.score)
	}
	s.scores = scores
	var next []*branch
	q := s.opts.Policy.Thresholds
	for i := range cands {
		c := &cands[i]
		if len(next) == k {
			break
		}
		tok, m := int(c.tok), metrics[c.parent]
		if s.isStop(tok) {
			id := s.t.Add(leaves[c.parent], tree.Node{Token: tok, Text: s.tok.Piece(tok), LogProb: c.logProb, Step: s.step,
				Metrics: m, Quadrant: q.Quadrant(m), Action: policy.Greedy,
				Status: tree.Finished, Reason: "eos", Score: c.norm})
			s.finished = append(s.finished, id)
			continue
		}
		parent := s.live[c.parent]
		br := parent
		if used[c.parent] { // a second child: fork the parent's cache
			if !forked[c.parent] {
				forked[c.parent] = true
				s.res.Stats.Forks++
			}
			br = s.fork(parent)
			br.leaf = leaves[c.parent]
			br.score = scores[c.parent]
		}
		used[c.parent] = true
		br.score.Add(policy.StepScore{LogProb: c.logProb})
		s.extend(br, tok, c.logProb, m, q.Quadrant(m), policy.Greedy)
		s.t.Node(br.leaf).Score = c.norm
		if s.pathEnds(br.leaf) { // a stop string: a finished hypothesis
			s.finished = append(s.finished, br.leaf)
			continue
		}
		next = append(next, br)
	}
	for i, br := range s.live {
		if !used[i] {
			s.pruneNode(s.branchTop(br), "beam-dropped")
		}
	}
	s.live = next

	// Stop when K hypotheses are finished, when the best finished one beats
	// every live beam, or at the token limit.
	bestLive, bestDone := -1e300, -1e300
	for _, br := range s.live {
		bestLive = max(bestLive, meanLogProb(br.score))
	}
	for _, id := range s.finished {
		bestDone = max(bestDone, s.t.Node(id).Score)
	}
	switch {
	case len(s.live) == 0 || len(s.finished) >= k || (len(s.finished) > 0 && bestDone >= bestLive):
		s.finish("eos", false)
	case len(s.live) > 0 && s.t.Node(s.live[0].leaf).Depth >= s.b.MaxTokens:
		s.finish("max-tokens", false)
	}
}

// finalize commits the best hypothesis, finished or live.
func (s *beamSearch) finalize() {
	if id, ok := s.verifiedChoice(s.finished); ok {
		s.commit(id, 0)
		return
	}
	best, bestScore := tree.None, 0.0
	consider := func(id tree.ID, score float64) {
		if best == tree.None || score > bestScore {
			best, bestScore = id, score
		}
	}
	for _, id := range s.finished {
		consider(id, s.t.Node(id).Score)
	}
	for _, br := range s.live {
		if br.score.Steps > 0 {
			consider(br.leaf, meanLogProb(br.score))
		}
	}
	if best != tree.None {
		s.commit(best, 0)
	}
}
