package engine

import (
	"slices"
	"testing"
)

// TestModesAnswerTheirDefaults checks that every mode's type answers the
// choices the search asks of it: budget defaults, attention layers, noise
// floor, backspace.
func TestModesAnswerTheirDefaults(t *testing.T) {
	o := defaultOptions()
	o.Width = 3
	o.Policy.NoiseFloor = 0.01
	want := map[Mode]struct {
		width, rows int
		attn        []int
		floor       float64
		backspace   bool
	}{
		Greedy:          {1, 0, nil, 0.01, false},
		Sample:          {1, 0, nil, 0.01, false},
		Entropix:        {1, 0, []int{11}, 0.01, false},
		Beam:            {3, 0, nil, 0, false},
		CoTDecoding:     {3, 0, nil, 0, false},
		BeamAdaptive:    {4, 40, []int{11}, 0.01, o.Policy.Backspace && o.Policy.MaxBackspaces > 0},
		SelfConsistency: {3, 0, nil, 0, false},
		BestOfN:         {3, 0, nil, 0, false},
	}
	if len(want) != len(Modes()) {
		t.Fatalf("the test covers %d modes of %d", len(want), len(Modes()))
	}
	for _, m := range Modes() {
		o.Mode = m
		s := &search{opts: &o, b: Budget{MaxTokens: 10}}
		d := newDecoder(s)
		d.budgetDefaults(&s.b)
		w := want[m]
		if s.b.MaxWidth != w.width || s.b.MaxRows != w.rows {
			t.Errorf("%v: budget defaults width %d, rows %d; want %d, %d", m, s.b.MaxWidth, s.b.MaxRows, w.width, w.rows)
		}
		if got := d.attentionLayers(12); !slices.Equal(got, w.attn) {
			t.Errorf("%v: attention layers %v; want %v", m, got, w.attn)
		}
		if got := d.noiseFloor(); got != w.floor {
			t.Errorf("%v: noise floor %v; want %v", m, got, w.floor)
		}
		if got := d.mayBackspace(); got != w.backspace {
			t.Errorf("%v: may backspace %v; want %v", m, got, w.backspace)
		}
		// A budget given is kept.
		s.b = Budget{MaxTokens: 10, MaxWidth: 2, MaxRows: 7}
		d.budgetDefaults(&s.b)
		if s.b.MaxWidth != 2 || s.b.MaxRows != 7 {
			t.Errorf("%v: a given budget became %+v", m, s.b)
		}
	}
}
