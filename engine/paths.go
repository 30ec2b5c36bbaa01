package engine

import (
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// The helpers the modes share: a policy decision's tokens applied to a
// branch, the commit of a single path, the end of a search whose branches
// advance together, the sampler chain, and the answer a path votes for.

// applyTokens appends a decision's token(s) to br: the clarify text, or
// one chosen token.
func (s *search) applyTokens(br *branch, d *policy.Decision, v rowView, lz float64) {
	toks := []int{d.Token}
	if d.Action == policy.Clarify {
		toks = d.Tokens
		if room := s.b.MaxTokens - s.t.Node(br.leaf).Depth; len(toks) > room {
			toks = toks[:max(room, 1)]
		}
	}
	br.before = br.score
	for i, t := range toks {
		lp := 0.0 // inserted, not predicted from these logits
		if i == 0 {
			lp = float64(v.logit(t)) - lz
		}
		s.extend(br, t, lp, d.Metrics, d.Quadrant, d.Action)
		br.decider.Accept(t)
		if i == 0 {
			st := d.StepScore()
			st.TokenConf = s.tokenConf(v, lz)
			br.score.Add(st)
		}
		if s.pathEnds(br.leaf) {
			break
		}
	}
	s.t.Node(br.leaf).Score = br.score.Value(s.opts.Score)
}

// commitTrunk commits the trunk up to its leaf (holding back keep tokens
// from the stream) and ends the search at a stop token or the token limit.
func (s *search) commitTrunk(br *branch, keep int) {
	s.commit(br.leaf, keep)
	switch {
	case s.isStop(s.t.Node(br.leaf).Token):
		s.finish("eos", false)
	case s.pathEnds(br.leaf):
		s.finish("stop", false)
	case s.committedLen() >= s.b.MaxTokens:
		n := s.t.Node(br.leaf)
		n.Status, n.Reason = tree.Finished, "max-tokens"
		s.finish("max-tokens", false)
	}
}

// logDecision logs a policy decision at debug level (free when disabled).
func (s *search) logDecision(br *branch, d *policy.Decision) {
	if ev := s.log.Debug(); ev.Enabled() {
		ev.Int("step", s.step).Int32("leaf", int32(br.leaf)).Str("decision", d.String()).Msg("decide")
	}
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
	text := s.pathText(id, toks)
	if s.opts.Answer != nil {
		if a, ok := s.opts.Answer(text); ok {
			return "answer:" + a
		}
		return noAnswer
	}
	return "text:" + strings.TrimSpace(text)
}

// initDecider gives root the policy's decider in mode m (Options.Policy),
// primed with the prompt.
func (s *search) initDecider(root *branch, m policy.DecideMode) error {
	cfg := s.opts.Policy
	cfg.Mode = m
	tr, err := policy.NewDecider(cfg, s.opts.Seed, 0)
	if err != nil {
		return err
	}
	tr.Prime(s.prompt)
	root.decider = tr
	return nil
}

// pathText is the text of toks, the tokens of path id but its stop
// tokens: all of it, or what comes before the stop string that ended the
// path.
func (s *search) pathText(id tree.ID, toks []int) string {
	if len(s.opts.StopStrings) == 0 || s.t.Node(id).Reason != "stop" {
		return decodeAfter(s.tok, s.prompt[len(s.prompt)-1], toks)
	}
	d := s.tok.NewDecoder(s.prompt[len(s.prompt)-1])
	var b []byte
	for _, t := range toks {
		b = append(b, d.Next(t)...)
	}
	cut, _ := s.cutAtStop(id, len(b))
	return string(b[:cut])
}
