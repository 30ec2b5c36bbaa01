package policy

import "fmt"

// Confidence is the entropix confidence of a step:
//
//	C = 0.1(1-H) + 0.2(1-attn_H) + 0.3(1-V) + 0.4(1-attn_V) + 0.5·agreement + 0.6·interaction
//
// The reference added it to every sample of one step alike, so it never
// changed a choice there; along the paths of a tree, whose metrics differ,
// it does.
func Confidence(m Metrics) float64 {
	a := m.Attention
	return 0.1*(1-m.Entropy) + 0.2*(1-a.Entropy) + 0.3*(1-m.Varentropy) +
		0.4*(1-a.Varentropy) + 0.5*a.Agreement + 0.6*a.Interaction
}

// StepScore is what one token contributes to its path's scores.
type StepScore struct {
	// LogProb is log p(token) under the untruncated temperature-1
	// distribution (nats).
	LogProb float64 `json:"logprob"`
	// Confidence is Confidence(metrics of the step).
	Confidence float64 `json:"confidence"`
	// Margin is p(top1) - p(top2) of the step, the CoT-decoding margin.
	Margin float64 `json:"margin"`
	// TokenConf is DeepConf's token confidence, minus the mean log p of
	// the step's GroupTopK most probable tokens (TokenConfidence): high
	// when the distribution is peaked.
	TokenConf float64 `json:"token_conf"`
}

// GroupTopK is the k of DeepConf's token confidence, GroupWindow the
// tokens of its group (sliding window) confidence. DeepConf uses windows
// of 2048 tokens for long reasoning traces; ours are short answers.
const (
	GroupTopK   = 20
	GroupWindow = 16
)

// TokenConfidence is DeepConf's token confidence of a row of logits whose
// log-sum-exp is lz: -1/k Σ log p over its k most probable tokens, given
// as their logits in top (k = len(top); fewer when the vocabulary is
// smaller).
func TokenConfidence(top []float32, lz float64) float64 {
	if len(top) == 0 {
		return 0
	}
	var sum float64
	for _, l := range top {
		sum += float64(l) - lz
	}
	return -sum / float64(len(top))
}

// Entropix returns LogProb + Confidence, the reference's sample score.
func (s StepScore) Entropix() float64 { return s.LogProb + s.Confidence }

// ScoreKind picks how the engine ranks paths.
type ScoreKind uint8

const (
	// ScoreEntropix ranks by the mean of logprob + confidence per token.
	ScoreEntropix ScoreKind = iota
	// ScoreMargin ranks by the mean CoT-decoding margin p(top1) - p(top2)
	// (Wang & Zhou 2024).
	ScoreMargin
	// ScoreLogProb ranks by the path's log-probability Σ log p: for
	// finished paths, the probability of the whole text.
	ScoreLogProb
	// ScoreMeanLogProb ranks by the mean log p per token.
	ScoreMeanLogProb
	// ScoreGroup ranks by DeepConf's lowest group confidence (Fu et al.
	// 2025): the least mean token confidence over any GroupWindow
	// consecutive tokens.
	ScoreGroup
)

var scoreKindNames = [...]string{"entropix", "margin", "logprob", "mean-logprob", "group"}

// ScoreKinds lists every kind, in order.
func ScoreKinds() []ScoreKind {
	return []ScoreKind{ScoreEntropix, ScoreMargin, ScoreLogProb, ScoreMeanLogProb, ScoreGroup}
}

func (k ScoreKind) String() string {
	if int(k) < len(scoreKindNames) {
		return scoreKindNames[k]
	}
	return fmt.Sprintf("ScoreKind(%d)", k)
}

// MarshalText encodes the kind by name, for configuration files.
func (k ScoreKind) MarshalText() ([]byte, error) {
	if int(k) >= len(scoreKindNames) {
		return nil, fmt.Errorf("policy: invalid score kind %d", k)
	}
	return []byte(scoreKindNames[k]), nil
}

// UnmarshalText decodes "entropix" or "margin".
func (k *ScoreKind) UnmarshalText(b []byte) error {
	for i, n := range scoreKindNames {
		if n == string(b) {
			*k = ScoreKind(i)
			return nil
		}
	}
	return fmt.Errorf("policy: unknown score kind %q (want one of %v)", b, scoreKindNames)
}

// PathScore accumulates the step scores along a path. Scores are means per
// token, so that paths of different lengths compare. It is a small value:
// copy it when a path forks, and use Since to score a span (e.g. the answer)
// from a snapshot taken at its start.
type PathScore struct {
	Steps      int     `json:"steps"`
	LogProb    float64 `json:"logprob"`    // Σ log p
	Confidence float64 `json:"confidence"` // Σ C
	Margin     float64 `json:"margin"`     // Σ (p1 - p2)
	// Lowest is DeepConf's lowest group confidence so far: the least mean
	// token confidence over GroupWindow consecutive tokens (over all
	// tokens while the path is shorter).
	Lowest float64 `json:"lowest_group"`
	win    [GroupWindow]float64
	winSum float64
}

// Add appends one step.
func (p *PathScore) Add(s StepScore) {
	i := p.Steps % GroupWindow
	p.winSum += s.TokenConf - p.win[i]
	p.win[i] = s.TokenConf
	p.Steps++
	p.LogProb += s.LogProb
	p.Confidence += s.Confidence
	p.Margin += s.Margin
	g := p.winSum / float64(min(p.Steps, GroupWindow))
	if p.Steps <= GroupWindow {
		// A short path has one group, all of it; the minimum over
		// windows starts once the first window is full.
		p.Lowest = g
	} else {
		p.Lowest = min(p.Lowest, g)
	}
}

// Since returns the score of the steps added after prefix was taken from the
// same path (Lowest stays the whole path's).
func (p PathScore) Since(prefix PathScore) PathScore {
	return PathScore{
		Lowest:     p.Lowest,
		Steps:      p.Steps - prefix.Steps,
		LogProb:    p.LogProb - prefix.LogProb,
		Confidence: p.Confidence - prefix.Confidence,
		Margin:     p.Margin - prefix.Margin,
	}
}

// Entropix returns the mean of logprob + confidence per step (0 for an
// empty path).
func (p PathScore) Entropix() float64 {
	if p.Steps == 0 {
		return 0
	}
	return (p.LogProb + p.Confidence) / float64(p.Steps)
}

// CoTMargin returns the mean margin p(top1) - p(top2) per step (0 for an
// empty path).
func (p PathScore) CoTMargin() float64 {
	if p.Steps == 0 {
		return 0
	}
	return p.Margin / float64(p.Steps)
}

// MeanLogProb returns the mean log p per step (0 for an empty path).
func (p PathScore) MeanLogProb() float64 {
	if p.Steps == 0 {
		return 0
	}
	return p.LogProb / float64(p.Steps)
}

// Value returns the score of the given kind; higher is better.
func (p PathScore) Value(k ScoreKind) float64 {
	switch k {
	case ScoreMargin:
		return p.CoTMargin()
	case ScoreLogProb:
		return p.LogProb
	case ScoreMeanLogProb:
		return p.MeanLogProb()
	case ScoreGroup:
		return p.Lowest
	}
	return p.Entropix()
}
