package engine

import (
	"github.com/entropix-search/entropix-search/policy"
)

// singlePath is what the single-path modes (greedy, sample, entropix)
// share: one branch, every token committed as soon as it is chosen.
type singlePath struct{ *search }

// budgetDefaults: one branch.
func (s *singlePath) budgetDefaults(b *Budget) {
	if b.MaxWidth == 0 {
		b.MaxWidth = 1
	}
}

// attentionLayers: greedy and sample read no attention.
func (s *singlePath) attentionLayers(int) []int { return nil }

// noiseFloor is the policy's: the quadrant of every token is shown.
func (s *singlePath) noiseFloor() float64 { return s.opts.Policy.NoiseFloor }

// initRoot: greedy keeps no policy state.
func (s *singlePath) initRoot(*branch) error { return nil }

func (s *singlePath) mayBackspace() bool { return false }

// defaultAnswer: a single path votes on nothing.
func (s *singlePath) defaultAnswer() string { return "none" }

// rank is the path's score (Options.Score); one branch is never pruned
// for another.
func (s *singlePath) rank(br *branch) float64 { return br.score.Value(s.opts.Score) }

// finalize has nothing to choose: every token was committed when chosen.
func (s *singlePath) finalize() {}

// afterSingle commits the branch's new tokens and checks for the end.
func (s *search) afterSingle(br *branch) error {
	s.commitTrunk(br, 0)
	return nil
}

// greedy is the argmax at every step.
type greedy struct{ singlePath }

func (s *greedy) advance() error {
	br := s.live[0]
	v := s.view(br)
	m, row := s.measured(br)
	lz, arg := row.LogZ, row.Arg
	s.extend(br, arg, float64(v.logit(arg))-lz, m, s.opts.Policy.Thresholds.Quadrant(m), policy.Greedy)
	return s.afterSingle(br)
}

// sampling is the Sample mode: the sampler chain (Options.Sampling).
type sampling struct{ singlePath }

// initRoot gives the branch the sampler chain, primed with the prompt.
func (s *sampling) initRoot(root *branch) error {
	root.chain = s.sampleChain(0)
	return nil
}

func (s *sampling) advance() error {
	br := s.live[0]
	v := s.view(br)
	m, row := s.measured(br)
	lz, arg := row.LogZ, row.Arg
	tok := br.chain.Sample(&s.cand, v.logits())
	if tok < 0 {
		tok = arg
	}
	br.chain.Accept(tok)
	s.extend(br, tok, float64(v.logit(tok))-lz, m, s.opts.Policy.Thresholds.Quadrant(m), policy.Sample)
	return s.afterSingle(br)
}

// entropix is the single-path entropix sampler: the policy's decider in
// single-path mode, reading the last layer's attention.
type entropix struct{ singlePath }

func (s *entropix) attentionLayers(n int) []int { return []int{n - 1} }

// initRoot gives the branch the policy's decider in single-path mode,
// primed with the prompt.
func (s *entropix) initRoot(root *branch) error {
	return s.initDecider(root, policy.SinglePath)
}

func (s *entropix) advance() error {
	br := s.live[0]
	_, row := s.measured(br)
	d, err := br.decider.Decide(s.decideStep(br))
	if err != nil {
		return err
	}
	s.logDecision(br, &d)
	s.applyTokens(br, &d, s.view(br), row.LogZ)
	return s.afterSingle(br)
}
