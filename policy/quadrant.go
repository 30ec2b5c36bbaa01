package policy

import (
	"fmt"
	"math"
	"slices"
)

// Quadrant is the region of the (entropy, varentropy) plane a row falls in.
type Quadrant uint8

const (
	// Adaptive: none of the four corners; sample with parameters adapted to
	// all the metrics.
	Adaptive Quadrant = iota
	// LELV, low entropy and low varentropy: the model is confident.
	LELV
	// HELV, high entropy and low varentropy: uniformly unsure, many options
	// of about the same weight.
	HELV
	// LEHV, low entropy and high varentropy: a few distinct options compete.
	LEHV
	// HEHV, high entropy and high varentropy: lost.
	HEHV

	// NumQuadrants is the number of quadrants, for arrays indexed by one.
	NumQuadrants = 5
)

var quadrantNames = [NumQuadrants]string{"adaptive", "LELV", "HELV", "LEHV", "HEHV"}

func (q Quadrant) String() string {
	if int(q) < len(quadrantNames) {
		return quadrantNames[q]
	}
	return fmt.Sprintf("Quadrant(%d)", q)
}

// MarshalText encodes the quadrant by name.
func (q Quadrant) MarshalText() ([]byte, error) {
	if int(q) >= len(quadrantNames) {
		return nil, fmt.Errorf("policy: invalid quadrant %d", q)
	}
	return []byte(quadrantNames[q]), nil
}

// UnmarshalText decodes a quadrant name.
func (q *Quadrant) UnmarshalText(b []byte) error {
	for i, n := range quadrantNames {
		if n == string(b) {
			*q = Quadrant(i)
			return nil
		}
	}
	return fmt.Errorf("policy: unknown quadrant %q", b)
}

// Thresholds split the (entropy, varentropy) plane into quadrants, in bits
// and bits². The tests are tried in order and the first match wins:
//
//	LELV  H < LowEntropy    and V < LowVarentropy
//	HELV  H > HighEntropy   and V < LowVarentropy
//	LEHV  H < BranchEntropy and V > HighVarentropy
//	HEHV  H > LostEntropy   and V > HighVarentropy
//	otherwise Adaptive
//
// They depend on the model: use a preset, or Calibrate on the model's own
// distribution and save the result as JSON.
type Thresholds struct {
	Name           string  `json:"name,omitempty"`
	LowEntropy     float64 `json:"low_entropy"`
	LowVarentropy  float64 `json:"low_varentropy"`
	HighEntropy    float64 `json:"high_entropy"`
	HighVarentropy float64 `json:"high_varentropy"`
	BranchEntropy  float64 `json:"branch_entropy"`
	LostEntropy    float64 `json:"lost_entropy"`
}

// EntropixV1 are the constants of the original entropix sampler.
var EntropixV1 = Thresholds{
	Name:           "entropix-v1",
	LowEntropy:     0.1,
	LowVarentropy:  0.1,
	HighEntropy:    3.0,
	HighVarentropy: 5.0,
	BranchEntropy:  5.0,
	LostEntropy:    5.0,
}

// presets are the published threshold sets. The later entropix
// configurations give low/medium/high entropy and varentropy levels; we map
// them as the later sampler used them: LELV below the low levels, HELV above
// the high entropy, LEHV below the high entropy and above the high
// varentropy, HEHV above the medium entropy and the high varentropy.
var presets = []Thresholds{
	EntropixV1,
	{Name: "entropix-v1-helv5", LowEntropy: 0.1, LowVarentropy: 0.1, HighEntropy: 5.0, HighVarentropy: 5.0, BranchEntropy: 5.0, LostEntropy: 5.0},
	{Name: "entropix-main", LowEntropy: 0.3, LowVarentropy: 1.2, HighEntropy: 2.5, HighVarentropy: 2.5, BranchEntropy: 2.5, LostEntropy: 1.2},
	{Name: "entropix-70b", LowEntropy: 0.01, LowVarentropy: 0.05, HighEntropy: 2.1, HighVarentropy: 5.8, BranchEntropy: 2.1, LostEntropy: 0.7},
	{Name: "smollm2", LowEntropy: 0.5, LowVarentropy: 1.28, HighEntropy: 2.07, HighVarentropy: 6.08, BranchEntropy: 2.07, LostEntropy: 1.484},
}

// Preset returns the named threshold set ("entropix-v1", "entropix-v1-helv5",
// "entropix-main", "entropix-70b", "smollm2").
func Preset(name string) (Thresholds, bool) {
	for _, t := range presets {
		if t.Name == name {
			return t, true
		}
	}
	return Thresholds{}, false
}

// PresetNames lists the names Preset knows.
func PresetNames() []string {
	names := make([]string, len(presets))
	for i, t := range presets {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names
}

// Classify returns the quadrant of (h, v), in bits and bits².
func (t *Thresholds) Classify(h, v float64) Quadrant {
	switch {
	case h < t.LowEntropy && v < t.LowVarentropy:
		return LELV
	case h > t.HighEntropy && v < t.LowVarentropy:
		return HELV
	case h < t.BranchEntropy && v > t.HighVarentropy:
		return LEHV
	case h > t.LostEntropy && v > t.HighVarentropy:
		return HEHV
	}
	return Adaptive
}

// Quadrant returns the quadrant of m.
func (t *Thresholds) Quadrant(m Metrics) Quadrant {
	return t.Classify(m.Entropy, m.Varentropy)
}

// Validate checks that every threshold is finite and non-negative and that
// the low levels do not exceed the high ones.
func (t *Thresholds) Validate() error {
	fields := [...]struct {
		name string
		v    float64
	}{
		{"low_entropy", t.LowEntropy}, {"low_varentropy", t.LowVarentropy},
		{"high_entropy", t.HighEntropy}, {"high_varentropy", t.HighVarentropy},
		{"branch_entropy", t.BranchEntropy}, {"lost_entropy", t.LostEntropy},
	}
	for _, f := range fields {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("thresholds %q: %s = %v, want a finite value >= 0", t.Name, f.name, f.v)
		}
	}
	if t.LowEntropy > t.HighEntropy {
		return fmt.Errorf("thresholds %q: low_entropy %v > high_entropy %v", t.Name, t.LowEntropy, t.HighEntropy)
	}
	if t.LowVarentropy > t.HighVarentropy {
		return fmt.Errorf("thresholds %q: low_varentropy %v > high_varentropy %v", t.Name, t.LowVarentropy, t.HighVarentropy)
	}
	return nil
}
