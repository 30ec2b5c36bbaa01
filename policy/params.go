package policy

import (
	"fmt"
	"math"
)

// Params are the sampling parameters of one draw. TopK 0 and TopP 1 and
// MinP 0 switch the filter off; Temperature 0 is greedy.
type Params struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
}

// DefaultParams are the reference's base parameters.
func DefaultParams() Params {
	return Params{Temperature: 0.666, TopK: 27, TopP: 0.90, MinP: 0.03}
}

func (p Params) String() string {
	return fmt.Sprintf("T=%.3f k=%d p=%.3f min_p=%.3f", p.Temperature, p.TopK, p.TopP, p.MinP)
}

// Validate checks the ranges: temperature >= 0, top-k >= 0, top-p in (0, 1],
// min-p in [0, 1).
func (p Params) Validate() error {
	switch {
	case !(p.Temperature >= 0) || math.IsInf(p.Temperature, 1):
		return fmt.Errorf("params: temperature %v, want a finite value >= 0", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("params: top_k %d, want >= 0", p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("params: top_p %v, want (0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP < 1):
		return fmt.Errorf("params: min_p %v, want [0, 1)", p.MinP)
	}
	return nil
}

// The per-quadrant parameters below are the reference's formulas, with the
// reference's base values (0.666, 27, 0.9, 0.03) replaced by base. m's
// attention fields are 0 when the forward pass gave no attention.

// UnsureParams is the HELV draw once the clarify text was inserted recently:
// hotter, T = min(1.5, T₀(1.3 + 0.2·attn_entropy)).
func UnsureParams(m Metrics, base Params) Params {
	p := base
	p.Temperature = min(1.5, base.Temperature*(1.3+0.2*m.Attention.Entropy))
	return p
}

// BranchParams is the LEHV draw of the single-path sampler:
// T = min(1.5, T₀(1.2 + 0.3·interaction)),
// top_k = max(5, ⌊k₀(1 + 0.5(1 - agreement))⌋).
func BranchParams(m Metrics, base Params) Params {
	p := base
	a := m.Attention
	p.Temperature = min(1.5, base.Temperature*(1.2+0.3*a.Interaction))
	p.TopK = max(5, int(float64(base.TopK)*(1+0.5*(1-a.Agreement))))
	return p
}

// LostParams is the HEHV resample: T = max(2, T₀(2 + 0.5·attn_varentropy)),
// top_p = max(0.5, p₀ - 0.2·attn_entropy).
func LostParams(m Metrics, base Params) Params {
	p := base
	a := m.Attention
	p.Temperature = max(2.0, base.Temperature*(2.0+0.5*a.Varentropy))
	p.TopP = max(0.5, base.TopP-0.2*a.Entropy)
	return p
}

// AdaptiveParams is the draw of the adaptive quadrant:
//
//	T     = T₀(1 + 0.3(H+V) + 0.2(attn_H + attn_V) - 0.2·agreement)
//	top_p = clip(p₀(1 + 0.1·attn_V), 0.1, 1)
//	top_k = clip(round(k₀(1 + 0.3·interaction - 0.2·agreement)), 1, 100)
//	min_p = clip(m₀(1 - 0.5(H+V)), 0.01, 0.5)
func AdaptiveParams(m Metrics, base Params) Params {
	a := m.Attention
	hv := m.Entropy + m.Varentropy
	return Params{
		Temperature: base.Temperature * (1 + 0.3*hv + 0.2*(a.Entropy+a.Varentropy) - 0.2*a.Agreement),
		TopP:        clamp(base.TopP*(1+0.1*a.Varentropy), 0.1, 1),
		TopK:        int(clamp(math.Round(float64(base.TopK)*(1+0.3*a.Interaction-0.2*a.Agreement)), 1, 100)),
		MinP:        clamp(base.MinP*(1-0.5*hv), 0.01, 0.5),
	}
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(hi, x)) }
