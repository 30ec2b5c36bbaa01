package engine

import (
	"bytes"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// cotDecoding is CoT-decoding's state: every path, finished or not.
type cotDecoding struct {
	*search
	paths []*branch
}

// budgetDefaults: Options.Width first tokens.
func (s *cotDecoding) budgetDefaults(b *Budget) {
	if b.MaxWidth == 0 {
		b.MaxWidth = s.opts.Width
	}
}

func (s *cotDecoding) attentionLayers(int) []int { return nil }

func (s *cotDecoding) noiseFloor() float64 { return 0 }

func (s *cotDecoding) initRoot(*branch) error { return nil }

func (s *cotDecoding) mayBackspace() bool { return false }

// defaultAnswer: the paths aggregate by their whole text.
func (s *cotDecoding) defaultAnswer() string { return "none" }

// rank is the path's mean margin (CoT-decoding's Δ over all its tokens).
func (s *cotDecoding) rank(br *branch) float64 { return br.score.CoTMargin() }

func (s *cotDecoding) advance() error {
	s.stepCoT()
	return nil
}

// stepCoT is one step of CoT-decoding (Wang & Zhou, 2024): at the first
// step the K most probable tokens each start a branch; every branch then
// continues greedily, all of them in one batch, until end of text or the
// token limit. Each path's confidence Δ is its mean margin p(top1) -
// p(top2) over the tokens of its answer (the span Options.Answer extracts;
// the whole continuation when there is none), and the paths aggregate by
// answer: the answer with the largest sum of Δ wins, and its path of
// highest Δ is the result (the paper's "CoT-decoding (agg)").
func (s *cotDecoding) stepCoT() {
	q := s.opts.Policy.Thresholds
	if s.step == 0 {
		root := s.live[0]
		v := s.view(root)
		m, row := s.measured(root)
		lz := row.LogZ
		s.top = v.top(s.b.MaxWidth, s.top)
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
			s.extend(br, t, float64(v.logit(t))-lz, m, q.Quadrant(m), policy.Branch)
			br.margins = append(br.margins[:0], row.Margin)
			s.paths = append(s.paths, br)
			if s.pathEnds(br.leaf) {
				continue
			}
			s.live = append(s.live, br)
		}
		s.checkEnd()
		return
	}
	live := s.live[:0]
	for _, br := range s.live {
		v := s.view(br)
		m, row := s.measured(br)
		lz, arg, mg := row.LogZ, row.Arg, row.Margin
		br.score.Add(policy.StepScore{LogProb: float64(v.logit(arg)) - lz, Margin: mg})
		br.margins = append(br.margins, mg)
		s.extend(br, arg, float64(v.logit(arg))-lz, m, q.Quadrant(m), policy.Greedy)
		s.t.Node(br.leaf).Score = br.score.CoTMargin()
		if !s.pathEnds(br.leaf) {
			live = append(live, br)
		}
	}
	s.live = live
	s.checkEnd()
}

// finalize commits the path of highest Δ of the answer whose paths sum
// to the largest Δ.
func (s *cotDecoding) finalize() {
	type path struct {
		leaf   tree.ID
		answer string
		delta  float64
	}
	var paths []path
	mass := map[string]float64{}
	var order []string
	for _, br := range s.paths {
		if br.leaf == tree.Root {
			continue
		}
		p := path{leaf: br.leaf, answer: s.answer(br.leaf), delta: s.answerMargin(br)}
		paths = append(paths, p)
		if _, ok := mass[p.answer]; !ok {
			order = append(order, p.answer)
		}
		mass[p.answer] += p.delta
	}
	if len(paths) == 0 {
		return
	}
	win := heaviest(order, mass)
	best := -1
	for i, p := range paths {
		if p.answer == win && (best < 0 || p.delta > paths[best].delta) {
			best = i
		}
	}
	s.commit(paths[best].leaf, 0)
}

// answerMargin is CoT-decoding's Δ of a branch: its mean margin over the
// tokens that overlap the last occurrence of its answer in its text, or
// over all its tokens when it has no answer.
func (s *cotDecoding) answerMargin(br *branch) float64 {
	path := s.t.Path(br.leaf)[1:]
	toks := make([]int, 0, len(path))
	for _, id := range path {
		toks = append(toks, s.t.Node(id).Token)
	}
	mean := func(ms []float64) float64 {
		if len(ms) == 0 {
			return 0
		}
		sum := 0.0
		for _, m := range ms {
			sum += m
		}
		return sum / float64(len(ms))
	}
	margins := br.margins[:min(len(br.margins), len(toks))]
	if s.opts.Answer == nil {
		return mean(margins)
	}
	// Character offsets of each token's text.
	d := s.tok.NewDecoder(s.prompt[len(s.prompt)-1])
	ends := make([]int, len(toks))
	n := 0
	var text []byte
	for i, t := range toks {
		if !s.isStop(t) {
			piece := d.Next(t)
			text = append(text, piece...)
			n += len(piece)
		}
		ends[i] = n
	}
	if cut, ok := s.cutAtStop(br.leaf, len(text)); ok {
		text = text[:cut] // the answer is before the stop string
	} else {
		text = append(text, d.Flush()...)
	}
	a, ok := s.opts.Answer(string(text))
	if !ok || a == "" {
		return mean(margins)
	}
	lo := bytes.LastIndex(text, []byte(a))
	if lo < 0 {
		return mean(margins)
	}
	hi := lo + len(a)
	var span []float64
	start := 0
	for i, end := range ends[:len(margins)] {
		if start < hi && end > lo {
			span = append(span, margins[i])
		}
		start = end
	}
	if len(span) == 0 {
		return mean(margins)
	}
	return mean(span)
}
