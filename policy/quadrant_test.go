package policy

import (
	"math"
	"slices"
	"testing"
)

func TestClassify(t *testing.T) {
	th := EntropixV1
	cases := []struct {
		h, v float64
		q    Quadrant
	}{
		{0.05, 0.05, LELV},
		{0.1, 0.05, Adaptive}, // strict
		{3.5, 0.05, HELV},
		{6, 0.05, HELV},
		{2, 6, LEHV},
		{4.99, 20, LEHV},
		{5.5, 6, HEHV},
		{5, 6, Adaptive}, // neither < 5 nor > 5
		{2, 2, Adaptive},
		{0.05, 6, LEHV},
	}
	for _, c := range cases {
		if q := th.Classify(c.h, c.v); q != c.q {
			t.Errorf("Classify(%v, %v) = %v, want %v", c.h, c.v, q, c.q)
		}
	}
}

func TestPresets(t *testing.T) {
	names := PresetNames()
	if !slices.Contains(names, "entropix-v1") {
		t.Fatalf("presets %v lack entropix-v1", names)
	}
	for _, n := range names {
		th, ok := Preset(n)
		if !ok || th.Name != n {
			t.Errorf("Preset(%q) = %+v, %v", n, th, ok)
		}
		if err := th.Validate(); err != nil {
			t.Errorf("preset %s: %v", n, err)
		}
	}
	if _, ok := Preset("nope"); ok {
		t.Error("unknown preset found")
	}
	bad := EntropixV1
	bad.HighVarentropy = math.NaN()
	if bad.Validate() == nil {
		t.Error("NaN threshold validated")
	}
	bad = EntropixV1
	bad.LowEntropy = 4
	if bad.Validate() == nil {
		t.Error("low > high validated")
	}
}

func TestQuadrantText(t *testing.T) {
	for q := range Quadrant(NumQuadrants) {
		b, err := q.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Quadrant
		if err := back.UnmarshalText(b); err != nil || back != q {
			t.Errorf("%v round-trips to %v, %v", q, back, err)
		}
	}
	var q Quadrant
	if q.UnmarshalText([]byte("LXLV")) == nil {
		t.Error("unknown name accepted")
	}
}

// exampleMetrics are logits (.5, .25, .25) with the reference attention
// example.
func exampleMetrics(t *testing.T) Metrics {
	t.Helper()
	m, err := Measure(logs(.5, .25, .25), 0, attentionExample())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAdaptiveParamsVector(t *testing.T) {
	m := exampleMetrics(t)
	p := AdaptiveParams(m, DefaultParams())
	if !near(p.Temperature, 1.25915625, 1e-6) || !near(p.TopP, 0.90140625, 1e-6) || p.TopK != 33 || !near(p.MinP, 0.01, 1e-12) {
		t.Errorf("adaptive params %+v, want T=1.25915625 top_p=0.90140625 top_k=33 min_p=0.01", p)
	}
	if c := Confidence(m); !near(c, 0.892874, 1e-6) {
		t.Errorf("confidence %.6f, want 0.892874", c)
	}
	b := BranchParams(m, DefaultParams())
	if !near(b.Temperature, 0.955002, 1e-6) || b.TopK != 39 {
		t.Errorf("LEHV params %+v, want T=0.955002 top_k=39", b)
	}
	l := LostParams(m, DefaultParams())
	if l.Temperature != 2.0 || !near(l.TopP, 0.525, 1e-6) {
		t.Errorf("HEHV params %+v, want T=2 top_p=0.525", l)
	}
	u := UnsureParams(m, DefaultParams())
	if want := math.Min(1.5, 0.666*(1.3+0.2*1.875)); !near(u.Temperature, want, 1e-6) {
		t.Errorf("HELV T %v, want %v", u.Temperature, want)
	}
}

func TestParamsValidate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{
		{Temperature: -1, TopP: 1},
		{Temperature: math.NaN(), TopP: 1},
		{TopK: -1, TopP: 1},
		{TopP: 0},
		{TopP: 1, MinP: 1},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
}
