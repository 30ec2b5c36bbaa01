package policy

import (
	"fmt"
	"math"
)

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

// Scale standardizes one term: (x - Mean) / SD. An SD of 0 leaves the
// term as it is.
type Scale struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
}

func (s Scale) z(x float64) float64 {
	if s.SD <= 0 {
		return x
	}
	return (x - s.Mean) / s.SD
}

// Scales put the terms of the entropix score on a common scale. The
// reference adds log p (nats, near 0 for a confident model) to a
// confidence whose terms live on their own scales (bits, bits², shares);
// one term can dominate, as interaction strength does on stories260K.
// With scales, each term is standardized by the model's calibration
// statistics (CalibrateSearch fits them) and the step score is
//
//	z(log p) + (0.1(-z(H)) + 0.2(-z(attn_H)) + 0.3(-z(V)) + 0.4(-z(attn_V)) + 0.5 z(agreement) + 0.6 z(interaction)) / 2.1
//
// so that the probability and the confidence weigh alike. The zero value
// is the reference's log p + C.
type Scales struct {
	LogProb        Scale `json:"logprob"`
	Entropy        Scale `json:"entropy"`
	Varentropy     Scale `json:"varentropy"`
	AttnEntropy    Scale `json:"attn_entropy"`
	AttnVarentropy Scale `json:"attn_varentropy"`
	Agreement      Scale `json:"agreement"`
	Interaction    Scale `json:"interaction"`
}

func (s Scales) terms() [7]Scale {
	return [7]Scale{s.LogProb, s.Entropy, s.Varentropy, s.AttnEntropy, s.AttnVarentropy, s.Agreement, s.Interaction}
}

// IsZero reports whether s is the zero value (the reference's score).
func (s Scales) IsZero() bool { return s == Scales{} }

// Validate checks that every mean is finite and every SD finite and >= 0.
func (s Scales) Validate() error {
	for i, t := range s.terms() {
		if math.IsNaN(t.Mean) || math.IsInf(t.Mean, 0) || !(t.SD >= 0) || math.IsInf(t.SD, 0) {
			return fmt.Errorf("scales: term %d has mean %v, sd %v: want finite values, sd >= 0", i, t.Mean, t.SD)
		}
	}
	return nil
}

// Score is the entropix score of a step whose token had log p logProb.
func (s Scales) Score(m Metrics, logProb float64) float64 {
	if s.IsZero() {
		return logProb + Confidence(m)
	}
	a := m.Attention
	c := 0.1*-s.Entropy.z(m.Entropy) + 0.2*-s.AttnEntropy.z(a.Entropy) + 0.3*-s.Varentropy.z(m.Varentropy) +
		0.4*-s.AttnVarentropy.z(a.Varentropy) + 0.5*s.Agreement.z(a.Agreement) + 0.6*s.Interaction.z(a.Interaction)
	return s.LogProb.z(logProb) + c/2.1
}

// fitScale returns the mean and standard deviation of xs.
func fitScale(xs []float64) Scale {
	if len(xs) == 0 {
		return Scale{}
	}
	var sum, sq float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return Scale{Mean: mean, SD: math.Sqrt(sq / float64(len(xs)))}
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
	// Score is the step's entropix score (Scales.Score: by default
	// LogProb + Confidence).
	Score float64 `json:"score"`
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
	Steps       int     `json:"steps"`
	LogProb     float64 `json:"logprob"`    // Σ log p
	Confidence  float64 `json:"confidence"` // Σ C
	Margin      float64 `json:"margin"`     // Σ (p1 - p2)
	EntropixSum float64 `json:"entropix"`   // Σ step entropix score
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
	p.EntropixSum += s.Score
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
		Lowest:      p.Lowest,
		Steps:       p.Steps - prefix.Steps,
		LogProb:     p.LogProb - prefix.LogProb,
		Confidence:  p.Confidence - prefix.Confidence,
		Margin:      p.Margin - prefix.Margin,
		EntropixSum: p.EntropixSum - prefix.EntropixSum,
	}
}

// Entropix returns the mean entropix step score (0 for an empty path).
func (p PathScore) Entropix() float64 {
	if p.Steps == 0 {
		return 0
	}
	return p.EntropixSum / float64(p.Steps)
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
