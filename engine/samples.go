package engine

import (
	"slices"

	"github.com/entropix-search/entropix-search/internal/workers"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// Self-consistency (Wang et al., 2023) and best-of-N draw K samples of the
// whole continuation with the Sample mode's chain, each branch with its own
// random stream, all K advancing in one batched forward pass over a shared
// prompt cache. Self-consistency answers with the answer most samples reach
// (Options.Answer extracts it; ties go to the higher summed probability of
// the samples behind it); best-of-N with the sample of highest mean
// log-probability. Both spend the same rows as K independent samples.

// samples is self-consistency's and best-of-N's decoder: their state is
// the K branches themselves.
type samples struct {
	*search
	// A step's draws, one a live branch, made on the kernel threads
	// (each branch has its own chain and candidates).
	drawn []int
}

// selfConsistency answers with the answer most samples reach.
type selfConsistency struct{ samples }

// bestOf answers with the sample of highest mean log-probability.
type bestOf struct{ samples }

// budgetDefaults: Options.Width samples.
func (s *samples) budgetDefaults(b *Budget) {
	if b.MaxWidth == 0 {
		b.MaxWidth = s.opts.Width
	}
}

func (s *samples) attentionLayers(int) []int { return nil }

func (s *samples) noiseFloor() float64 { return 0 }

// initRoot gives the root the sampler chain of random stream 0 (the
// other samples get theirs when they fork from it).
func (s *samples) initRoot(root *branch) error {
	root.chain = s.sampleChain(0)
	return nil
}

func (s *samples) mayBackspace() bool { return false }

// defaultAnswer: every sample votes with its marked answer, else its last
// number.
func (s *samples) defaultAnswer() string { return "last-number" }

// rank is the sample's mean log-probability.
func (s *samples) rank(br *branch) float64 { return meanLogProb(br.score) }

// Run draws the tokens of live branches [lo, hi): the kernel threads'
// share of a step.
func (s *samples) Run(lo, hi int) {
	for i := lo; i < hi; i++ {
		br := s.live[i]
		s.drawn[i] = br.chain.Sample(&br.cand, s.logits(br))
	}
}

// sampleParallel is the live branches from which a step's draws are
// made on the kernel threads.
const sampleParallel = 4

func (s *samples) advance() error {
	s.stepSamples()
	return nil
}

// stepSamples is one step of self-consistency or best-of-N: at the first
// step the root forks into K branches (sharing its logits), then every
// branch samples its next token from its own chain.
func (s *samples) stepSamples() {
	if s.step == 0 {
		root := s.live[0]
		for i := 1; i < s.b.MaxWidth; i++ {
			br := s.fork(root)
			br.row, br.chain = root.row, s.sampleChain(uint64(i))
			s.live = append(s.live, br)
		}
		if len(s.live) > 1 {
			s.res.Stats.Forks++
		}
	}
	q := s.opts.Policy.Thresholds
	s.drawn = slices.Grow(s.drawn[:0], len(s.live))[:len(s.live)]
	if len(s.live) >= sampleParallel {
		workers.ParallelTask(len(s.live), s)
	} else {
		s.Run(0, len(s.live))
	}
	live := s.live[:0]
	for i, br := range s.live {
		v := s.view(br)
		m, row := s.measured(br)
		lz, arg := row.LogZ, row.Arg
		tok := s.drawn[i]
		if tok < 0 {
			tok = arg
		}
		br.chain.Accept(tok)
		lp := float64(v.logit(tok)) - lz
		br.score.Add(policy.StepScore{LogProb: lp})
		id := s.extend(br, tok, lp, m, q.Quadrant(m), policy.Sample)
		s.t.Node(id).Score = meanLogProb(br.score)
		if !s.pathEnds(id) {
			live = append(live, br)
		}
	}
	s.live = live
	s.checkEnd()
}

// sampleLeaves are the samples' last nodes, finished or not.
func (s *samples) sampleLeaves() []tree.ID {
	leaves := append(s.t.Leaves(tree.Finished), s.t.Leaves(tree.Live)...)
	return slices.DeleteFunc(leaves, func(id tree.ID) bool { return id == tree.Root })
}

// best returns the sample of highest score among ids (the first made on
// ties).
func (s *samples) best(ids []tree.ID) tree.ID {
	b := ids[0]
	for _, id := range ids[1:] {
		if sc, bs := s.t.Node(id).Score, s.t.Node(b).Score; sc > bs || (sc == bs && id < b) {
			b = id
		}
	}
	return b
}

// finalize commits the most probable sample, or the best judged with a
// verifier.
func (s *bestOf) finalize() {
	leaves := s.sampleLeaves()
	if len(leaves) == 0 {
		return
	}
	if id, ok := s.verifiedChoice(leaves); ok {
		s.commit(id, 0)
		return
	}
	s.commit(s.best(leaves), 0)
}

// finalize commits self-consistency's most voted answer (its most
// probable sample), the votes weighted by a verifier's verdicts when there
// is one.
func (s *selfConsistency) finalize() {
	leaves := s.sampleLeaves()
	if len(leaves) == 0 {
		return
	}
	if id, ok := s.verifiedChoice(leaves); ok {
		s.commit(id, 0)
		return
	}
	// Votes: each sample's answer; ties between answers go to the one
	// whose samples have the larger summed mean log-probability (a
	// stand-in for their probability mass).
	type tally struct {
		ids  []tree.ID
		mass float64
	}
	votes := map[string]*tally{}
	var order []string
	for _, id := range leaves {
		a := s.answer(id)
		t := votes[a]
		if t == nil {
			t = &tally{}
			votes[a] = t
			order = append(order, a)
		}
		t.ids = append(t.ids, id)
		t.mass += s.t.Node(id).Score
	}
	// A sample without an answer votes only when none has one.
	if len(order) > 1 {
		order = slices.DeleteFunc(order, func(a string) bool { return a == noAnswer })
	}
	win := order[0]
	for _, a := range order[1:] {
		w, t := votes[win], votes[a]
		if len(t.ids) > len(w.ids) || (len(t.ids) == len(w.ids) && t.mass > w.mass) {
			win = a
		}
	}
	s.commit(s.best(votes[win].ids), 0)
}
