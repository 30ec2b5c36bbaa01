package model

import (
	"math"
	"testing"
)

// A crafted file's hyperparameters are refused before anything is
// allocated (issue 19: an RMSNorm epsilon of +Inf or 1e30 printed NUL bytes).
func TestConfigValidate(t *testing.T) {
	good := Config{Dim: 64, HiddenDim: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 32, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Config){
		"eps +Inf":  func(c *Config) { c.NormEps = float32(math.Inf(1)) },
		"eps 1e30":  func(c *Config) { c.NormEps = 1e30 },
		"eps NaN":   func(c *Config) { c.NormEps = float32(math.NaN()) },
		"eps 0":     func(c *Config) { c.NormEps = 0 },
		"theta Inf": func(c *Config) { c.RopeTheta = math.Inf(1) },
		"odd head":  func(c *Config) { c.HeadDim = 15 },
		"no layers": func(c *Config) { c.Layers = 0 },
	} {
		c := good
		change(&c)
		if c.Validate() == nil {
			t.Errorf("%s: validated", name)
		}
	}
}
