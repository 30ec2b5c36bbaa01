package engine

import (
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// stepCoT is one step of CoT-decoding (Wang & Zhou, 2024): at the first
// step the K most probable tokens each start a branch; every branch then
// continues greedily, all of them in one batch, until end of text or the
// token limit. The answer is the branch with the highest mean margin
// p(top1) - p(top2) over its greedy tokens (the paper scores the answer
// span; without a task-specific span we score the whole continuation).
func (s *search) stepCoT() {
	q := s.opts.Policy.Thresholds
	if s.step == 0 {
		root := s.live[0]
		logits := s.logits(root)
		lz, _ := logSumExp(logits)
		m, _ := policy.Measure(logits, 0)
		s.top = topK(logits, s.b.MaxWidth, s.top)
		if len(s.top) > 1 {
			s.res.Stats.Forks++ // the root, into the K first tokens
		}
		s.live = s.live[:0]
		for i, t := range s.top {
			br := root
			if i > 0 {
				br = s.fork(root)
				br.leaf = tree.Root
			}
			s.extend(br, t, float64(logits[t])-lz, m, q.Quadrant(m), policy.Branch)
			if s.isStop(t) {
				continue
			}
			s.live = append(s.live, br)
		}
		s.checkEnd()
		return
	}
	live := s.live[:0]
	for _, br := range s.live {
		logits := s.logits(br)
		lz, arg := logSumExp(logits)
		m, _ := policy.Measure(logits, 0)
		br.score.Add(policy.StepScore{LogProb: float64(logits[arg]) - lz, Margin: policy.TopMargin(logits)})
		s.extend(br, arg, float64(logits[arg])-lz, m, q.Quadrant(m), policy.Greedy)
		s.t.Node(br.leaf).Score = br.score.CoTMargin()
		if !s.isStop(arg) {
			live = append(live, br)
		}
	}
	s.live = live
	s.checkEnd()
}

// checkEnd ends a search whose branches all advance together (CoT-decoding,
// self-consistency, best-of): at end of text of every branch, or at the
// token limit.
func (s *search) checkEnd() {
	switch {
	case len(s.live) == 0:
		s.finish("eos", false)
	case s.t.Node(s.live[0].leaf).Depth >= s.b.MaxTokens:
		s.finish("max-tokens", false)
	}
}

// commitCoT commits the branch with the best margin.
func (s *search) commitCoT() {
	best, bestScore := tree.None, 0.0
	for _, id := range s.t.Leaves(tree.Live) {
		s.considerCoT(id, &best, &bestScore)
	}
	for _, id := range s.t.Leaves(tree.Finished) {
		s.considerCoT(id, &best, &bestScore)
	}
	if best != tree.None {
		s.commit(best, 0)
	}
}

func (s *search) considerCoT(id tree.ID, best *tree.ID, bestScore *float64) {
	if id == tree.Root {
		return
	}
	if sc := s.t.Node(id).Score; *best == tree.None || sc > *bestScore || (sc == *bestScore && id < *best) {
		*best, *bestScore = id, sc
	}
}
