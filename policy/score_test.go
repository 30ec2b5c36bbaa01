package policy

import "testing"

func TestPathScore(t *testing.T) {
	var p PathScore
	p.Add(StepScore{LogProb: -1, Confidence: 0.5, Margin: 0.2, Score: -0.5})
	snap := p
	p.Add(StepScore{LogProb: -0.5, Confidence: 0.1, Margin: 0.6, Score: -0.4})
	p.Add(StepScore{LogProb: -0.1, Confidence: 0.2, Margin: 0.4, Score: 0.1})
	if got := p.Entropix(); !near(got, (-1.6+0.8)/3, 1e-12) {
		t.Errorf("entropix %v", got)
	}
	if got := p.CoTMargin(); !near(got, 0.4, 1e-12) {
		t.Errorf("margin %v", got)
	}
	span := p.Since(snap)
	if span.Steps != 2 || !near(span.CoTMargin(), 0.5, 1e-12) || !near(span.Value(ScoreMargin), 0.5, 1e-12) {
		t.Errorf("span %+v", span)
	}
	if !near(span.Value(ScoreEntropix), (-0.6+0.3)/2, 1e-12) {
		t.Errorf("span entropix %v", span.Value(ScoreEntropix))
	}
	var empty PathScore
	if empty.Entropix() != 0 || empty.CoTMargin() != 0 {
		t.Error("empty path scores non-zero")
	}
}

func TestScoreKindText(t *testing.T) {
	for _, k := range []ScoreKind{ScoreEntropix, ScoreMargin} {
		b, _ := k.MarshalText()
		var back ScoreKind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v: %v %v", k, back, err)
		}
	}
	var k ScoreKind
	if k.UnmarshalText([]byte("cot")) == nil {
		t.Error("unknown kind accepted")
	}
}

func TestScales(t *testing.T) {
	m := Metrics{Entropy: 1, Varentropy: 2, Attention: AttentionMetrics{Entropy: 3, Varentropy: 0.5, Agreement: 0.2, Interaction: 4}}
	var zero Scales
	if got, want := zero.Score(m, -0.3), -0.3+Confidence(m); !near(got, want, 1e-12) {
		t.Errorf("zero scales: %v, want the reference's %v", got, want)
	}
	// At the calibration means every term is 0.
	s := Scales{
		LogProb: Scale{-0.3, 0.5}, Entropy: Scale{1, 2}, Varentropy: Scale{2, 1}, AttnEntropy: Scale{3, 1},
		AttnVarentropy: Scale{0.5, 1}, Agreement: Scale{0.2, 0.1}, Interaction: Scale{4, 3},
	}
	if got := s.Score(m, -0.3); !near(got, 0, 1e-12) {
		t.Errorf("score at the means: %v", got)
	}
	// One SD more interaction raises the score by 0.6/2.1; one more nat of
	// log p by 1/0.5.
	m2 := m
	m2.Attention.Interaction += 3
	if got := s.Score(m2, -0.3+0.5); !near(got, 1+0.6/2.1, 1e-12) {
		t.Errorf("score one SD up: %v", got)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	s.Entropy.SD = -1
	if s.Validate() == nil {
		t.Error("a negative SD validated")
	}
}
