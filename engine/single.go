package engine

import (
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// singlePath is the decoder of the single-path modes (greedy, sample,
// entropix): one branch, no state of its own.
type singlePath struct{ *search }

// finalize has nothing to choose: every token was committed when chosen.
func (s *singlePath) finalize() {}

// advance advances the one branch of the single-path modes (greedy,
// sample, entropix): every token is committed as soon as it is chosen.
func (s *singlePath) advance() error {
	br := s.live[0]
	logits := s.logits(br)
	m, row := s.measured(br)
	lz, arg := row.LogZ, row.Arg
	switch s.opts.Mode {
	case Greedy:
		s.extend(br, arg, float64(logits[arg])-lz, m, s.opts.Policy.Thresholds.Quadrant(m), policy.Greedy)
	case Sample:
		tok := br.chain.Sample(&s.cand, logits)
		if tok < 0 {
			tok = arg
		}
		br.chain.Accept(tok)
		s.extend(br, tok, float64(logits[tok])-lz, m, s.opts.Policy.Thresholds.Quadrant(m), policy.Sample)
	case Entropix:
		d, err := br.trunk.Decide(policy.Step{Logits: logits, Attention: s.attention(br), Measure: s.measure(br)})
		if err != nil {
			return err
		}
		s.logDecision(br, &d)
		s.applyTokens(br, &d, logits, lz)
	}
	return s.afterSingle(br)
}

// applyTokens appends a decision's token(s) to br: the clarify text, or
// one chosen token.
func (s *search) applyTokens(br *branch, d *policy.Decision, logits []float32, lz float64) {
	toks := []int{d.Token}
	if d.Action == policy.Clarify {
		toks = d.Tokens
		if room := s.b.MaxTokens - s.t.Node(br.leaf).Depth; len(toks) > room {
			toks = toks[:max(room, 1)]
		}
	}
	br.before = br.score
	for i, t := range toks {
		lp := float64(logits[t]) - lz
		if i > 0 {
			lp = 0 // inserted, not predicted from these logits
		}
		s.extend(br, t, lp, d.Metrics, d.Quadrant, d.Action)
		br.trunk.Accept(t)
		if i == 0 {
			st := d.StepScore()
			st.TokenConf = s.tokenConf(logits, lz)
			br.score.Add(st)
		}
		if s.isStop(t) {
			break
		}
	}
	s.t.Node(br.leaf).Score = br.score.Value(s.opts.Score)
}

// afterSingle commits the branch's new tokens and checks for the end.
func (s *search) afterSingle(br *branch) error {
	s.commitTrunk(br, 0)
	return nil
}

// commitTrunk commits the trunk up to its leaf (holding back keep tokens
// from the stream) and ends the search at a stop token or the token limit.
func (s *search) commitTrunk(br *branch, keep int) {
	s.commit(br.leaf, keep)
	switch {
	case s.isStop(s.t.Node(br.leaf).Token):
		s.finish("eos", false)
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
