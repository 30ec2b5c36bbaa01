package engine

import (
	"cmp"
	"slices"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// beamCand is one possible extension of a beam.
type beamCand struct {
	parent  *branch
	order   int // the parent's index, for deterministic ties
	leaf    tree.ID
	tok     int
	logProb float64
	score   policy.PathScore // the parent's, with this token added
	metrics policy.Metrics
}

func (c *beamCand) norm() float64 { return meanLogProb(c.score) }

// stepBeam is one step of fixed-width beam search: every beam proposes its
// K most probable tokens; the K best extensions by length-normalised
// log-probability live on (the first child of a beam keeps its cache, the
// others fork it), end-of-text extensions that rank among them become
// finished hypotheses, and beams with no surviving child are pruned.
func (s *search) stepBeam() {
	k := s.b.MaxWidth
	var cands []beamCand
	for i, br := range s.live {
		logits := s.logits(br)
		lz, _ := logSumExp(logits)
		m, _ := policy.Measure(logits, 0)
		s.top = topK(logits, k, s.top)
		for _, t := range s.top {
			c := beamCand{parent: br, order: i, leaf: br.leaf, tok: t, logProb: float64(logits[t]) - lz, score: br.score, metrics: m}
			c.score.Add(policy.StepScore{LogProb: c.logProb})
			cands = append(cands, c)
		}
	}
	slices.SortStableFunc(cands, func(a, b beamCand) int {
		if c := cmp.Compare(b.norm(), a.norm()); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.tok, b.tok))
	})

	used := map[*branch]bool{}
	var next []*branch
	q := s.opts.Policy.Thresholds
	for i := range cands {
		c := &cands[i]
		if len(next) == k {
			break
		}
		if s.isStop(c.tok) {
			id := s.t.Add(c.leaf, tree.Node{Token: c.tok, Text: s.tok.Piece(c.tok), LogProb: c.logProb, Step: s.step,
				Metrics: c.metrics, Quadrant: q.Quadrant(c.metrics), Action: policy.Greedy,
				Status: tree.Finished, Reason: "eos", Score: c.norm()})
			s.finished = append(s.finished, id)
			continue
		}
		br := c.parent
		if used[br] {
			br = s.fork(c.parent)
			br.leaf = c.leaf
		}
		used[c.parent] = true
		br.score = c.score
		s.extend(br, c.tok, c.logProb, c.metrics, q.Quadrant(c.metrics), policy.Greedy)
		s.t.Node(br.leaf).Score = c.norm()
		next = append(next, br)
	}
	for _, br := range s.live {
		if !used[br] {
			s.pruneNode(br.leaf, "beam-dropped")
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

// commitBeam commits the best hypothesis, finished or live.
func (s *search) commitBeam() {
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
