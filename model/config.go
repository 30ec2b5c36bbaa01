package model

import (
	"fmt"
	"math"
)

// Config is the shape of a Llama-family model.
type Config struct {
	Arch       string // "llama" or "qwen2"
	Dim        int    // residual stream width
	HiddenDim  int    // FFN hidden size
	Layers     int
	Heads      int // query heads
	KVHeads    int // key/value heads (grouped-query attention when < Heads)
	HeadDim    int
	Vocab      int
	ContextLen int // positions the model was trained for; the cache refuses more

	RopeTheta float64
	// RopeInterleaved rotates pairs (x[2i], x[2i+1]) as llama2.c and
	// llama.cpp's "llama" architecture do (llama.cpp's converter permutes
	// the q/k rows of Hugging Face weights into that layout). When false,
	// pairs are (x[i], x[i+HeadDim/2]) (NeoX style, e.g. Qwen2).
	RopeInterleaved bool
	// RopeFreqFactors, when set, divides the frequency of each rotation pair
	// (Llama-3.1 "rope_freqs" scaling); len HeadDim/2.
	RopeFreqFactors []float32

	NormEps float32
	Tied    bool // classifier shares the token embedding
	QKVBias bool // q/k/v projections have biases (Qwen2)
}

// KVDim is the width of one position's keys (or values) in one layer.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// QDim is the width of all query heads together.
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// Validate checks that the shape is consistent.
func (c *Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.HiddenDim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0:
		return fmt.Errorf("model: config has a non-positive size: %+v", *c)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("model: head dim %d is odd; RoPE needs pairs", c.HeadDim)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model: %d heads is not a multiple of %d kv heads", c.Heads, c.KVHeads)
	case c.ContextLen <= 0:
		return fmt.Errorf("model: context length %d", c.ContextLen)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0):
		return fmt.Errorf("model: RoPE theta %v", c.RopeTheta)
	case c.RopeFreqFactors != nil && len(c.RopeFreqFactors) != c.HeadDim/2:
		return fmt.Errorf("model: %d RoPE frequency factors for head dim %d (want %d)", len(c.RopeFreqFactors), c.HeadDim, c.HeadDim/2)
	case !(c.NormEps > 0 && c.NormEps <= 1):
		return fmt.Errorf("model: norm epsilon %v outside (0, 1]", c.NormEps)
	}
	return nil
}

// ropeInvFreq returns the rotation frequency of each pair of a head.
func (c *Config) ropeInvFreq() []float64 {
	f := make([]float64, c.HeadDim/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.HeadDim))
		if c.RopeFreqFactors != nil {
			f[i] /= float64(c.RopeFreqFactors[i])
		}
	}
	return f
}

// Llama3FreqFactors computes Llama-3.1's RoPE frequency factors from the
// rope_scaling parameters, for files that give the parameters but not the
// rope_freqs tensor.
func Llama3FreqFactors(headDim int, theta, factor, lowFreqFactor, highFreqFactor float64, origContext int) []float32 {
	out := make([]float32, headDim/2)
	lowWavelen := float64(origContext) / lowFreqFactor
	highWavelen := float64(origContext) / highFreqFactor
	for i := range out {
		freq := 1 / math.Pow(theta, float64(2*i)/float64(headDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(factor)
		default:
			smooth := (float64(origContext)/wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}
