package engine

import (
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/model/kernels"
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

// sampleChain returns the Sample mode's chain (Options.Sampling) drawing
// from random stream `stream` of the seed, primed with the prompt.
func (s *search) sampleChain(stream uint64) *policy.Chain {
	sp := s.opts.Sampling
	var stages []policy.Sampler
	if pen := (policy.Penalties{Window: max(sp.RepeatWindow, 64), Repeat: sp.RepeatPenalty,
		Presence: sp.PresencePenalty, Frequency: sp.FrequencyPenalty}); pen.Active() {
		stages = append(stages, &pen)
	}
	stages = append(stages, policy.Temperature(sp.Temperature))
	if sp.MinP > 0 {
		stages = append(stages, policy.MinP(sp.MinP))
	}
	if sp.TopK > 0 {
		stages = append(stages, policy.TopK(sp.TopK))
	}
	if sp.TopP > 0 && sp.TopP < 1 {
		stages = append(stages, policy.TopP(sp.TopP))
	}
	stages = append(stages, policy.NewDist(s.opts.Seed, stream))
	ch := policy.NewChain(stages...)
	for _, t := range s.prompt {
		ch.Accept(t)
	}
	return ch
}

// samples is self-consistency's and best-of-N's decoder: their state is
// the K branches themselves.
type samples struct {
	*search
	// A step's draws, one a live branch, made on the kernel threads
	// (each branch has its own chain and candidates).
	drawn []int
}

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
		kernels.ParallelTask(len(s.live), s)
	} else {
		s.Run(0, len(s.live))
	}
	live := s.live[:0]
	for i, br := range s.live {
		logits := s.logits(br)
		m, row := s.measured(br)
		lz, arg := row.LogZ, row.Arg
		tok := s.drawn[i]
		if tok < 0 {
			tok = arg
		}
		br.chain.Accept(tok)
		lp := float64(logits[tok]) - lz
		br.score.Add(policy.StepScore{LogProb: lp})
		id := s.extend(br, tok, lp, m, q.Quadrant(m), policy.Sample)
		s.t.Node(id).Score = meanLogProb(br.score)
		if !s.isStop(tok) {
			live = append(live, br)
		}
	}
	s.live = live
	s.checkEnd()
}

// finalize commits the answer of the samples: best-of-N's most
// probable one, or self-consistency's most voted answer (its most
// probable sample).
func (s *samples) finalize() {
	leaves := append(s.t.Leaves(tree.Finished), s.t.Leaves(tree.Live)...)
	leaves = slices.DeleteFunc(leaves, func(id tree.ID) bool { return id == tree.Root })
	if len(leaves) == 0 {
		return
	}
	best := func(ids []tree.ID) tree.ID {
		b := ids[0]
		for _, id := range ids[1:] {
			if sc, bs := s.t.Node(id).Score, s.t.Node(b).Score; sc > bs || (sc == bs && id < b) {
				b = id
			}
		}
		return b
	}
	if id, ok := s.verifiedChoice(leaves); ok {
		s.commit(id, 0)
		return
	}
	if s.opts.Mode == BestOfN {
		s.commit(best(leaves), 0)
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
	s.commit(best(votes[win].ids), 0)
}

// heaviest returns the answer of largest weight in mass, the first of
// order on ties; an answer-less vote (noAnswer) wins only when no answer
// has any vote. order lists the answers as they first appeared.
func heaviest(order []string, mass map[string]float64) string {
	if len(order) > 1 {
		order = slices.DeleteFunc(slices.Clone(order), func(a string) bool { return a == noAnswer })
	}
	win := order[0]
	for _, a := range order[1:] {
		if mass[a] > mass[win] {
			win = a
		}
	}
	return win
}

// noAnswer is the vote of a sample whose text has no answer.
const noAnswer = "none"

// answer is what a sample votes for: Options.Answer of its text, or the
// whole text (spaces trimmed) when there is no extractor or no answer.
func (s *search) answer(id tree.ID) string {
	var toks []int
	for _, n := range s.t.Path(id)[1:] {
		if t := s.t.Node(n).Token; !s.isStop(t) {
			toks = append(toks, t)
		}
	}
	text := decodeAfter(s.tok, s.prompt[len(s.prompt)-1], toks)
	if s.opts.Answer != nil {
		if a, ok := s.opts.Answer(text); ok {
			return "answer:" + a
		}
		return noAnswer
	}
	return "text:" + strings.TrimSpace(text)
}
