package policy

import "testing"

func TestPathScore(t *testing.T) {
	var p PathScore
	p.Add(StepScore{LogProb: -1, Confidence: 0.5, Margin: 0.2})
	snap := p
	p.Add(StepScore{LogProb: -0.5, Confidence: 0.1, Margin: 0.6})
	p.Add(StepScore{LogProb: -0.1, Confidence: 0.2, Margin: 0.4})
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
