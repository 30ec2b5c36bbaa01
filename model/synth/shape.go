package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/model"
)

// Shape is the architecture of a Llama-family model: everything but its
// weights.
type Shape struct {
	Name       string
	Dim        int // residual stream width
	HiddenDim  int // FFN hidden size
	Layers     int
	Heads      int // query heads
	KVHeads    int // key/value heads
	Vocab      int
	ContextLen int     // positions the model was trained for
	RopeTheta  float64 // RoPE base frequency
	NormEps    float32 // RMSNorm epsilon
	Tied       bool    // classifier shares the token embedding
}

// Shapes holds the shapes of the models the project benchmarks on, by name.
var Shapes = map[string]Shape{
	"stories260K": {Name: "stories260K", Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4,
		Vocab: 512, ContextLen: 512, RopeTheta: 10000, NormEps: 1e-5, Tied: true},
	"stories15M": {Name: "stories15M", Dim: 288, HiddenDim: 768, Layers: 6, Heads: 6, KVHeads: 6,
		Vocab: 32000, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5, Tied: true},
	"stories110M": {Name: "stories110M", Dim: 768, HiddenDim: 2048, Layers: 12, Heads: 12, KVHeads: 12,
		Vocab: 32000, ContextLen: 1024, RopeTheta: 10000, NormEps: 1e-5, Tied: true},
	"smollm2-135m": {Name: "smollm2-135m", Dim: 576, HiddenDim: 1536, Layers: 30, Heads: 9, KVHeads: 3,
		Vocab: 49152, ContextLen: 2048, RopeTheta: 100000, NormEps: 1e-5, Tied: true},
	"llama3.2-1b": {Name: "llama3.2-1b", Dim: 2048, HiddenDim: 8192, Layers: 16, Heads: 32, KVHeads: 8,
		Vocab: 128256, ContextLen: 131072, RopeTheta: 500000, NormEps: 1e-5, Tied: true},
}

// Lookup returns the shape of the given name, or an error listing the
// known names.
func Lookup(name string) (Shape, error) {
	if s, ok := Shapes[name]; ok {
		return s, nil
	}
	return Shape{}, fmt.Errorf("synth: unknown shape %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names returns the names of Shapes, smallest model first.
func Names() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, pb := Shapes[a].Params(), Shapes[b].Params()
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// HeadDim is the width of one attention head.
func (s Shape) HeadDim() int {
	if s.Heads <= 0 {
		return 0
	}
	return s.Dim / s.Heads
}

// Config returns the model configuration of the shape, as model.Load
// would read it from the GGUF file WriteGGUF writes.
func (s Shape) Config() model.Config {
	return model.Config{
		Arch:            "llama",
		Dim:             s.Dim,
		HiddenDim:       s.HiddenDim,
		Layers:          s.Layers,
		Heads:           s.Heads,
		KVHeads:         s.KVHeads,
		HeadDim:         s.HeadDim(),
		Vocab:           s.Vocab,
		ContextLen:      s.ContextLen,
		RopeTheta:       s.RopeTheta,
		RopeInterleaved: true,
		NormEps:         s.NormEps,
		Tied:            s.Tied,
	}
}

// Validate checks that the shape describes a model this module can run.
func (s Shape) Validate() error {
	if s.Heads > 0 && s.Dim%s.Heads != 0 {
		return fmt.Errorf("synth: shape %q: dim %d is not a multiple of %d heads", s.Name, s.Dim, s.Heads)
	}
	if s.Vocab < minVocab {
		return fmt.Errorf("synth: shape %q: vocabulary of %d tokens is below the %d a byte-fallback vocabulary needs", s.Name, s.Vocab, minVocab)
	}
	c := s.Config()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("synth: shape %q: %w", s.Name, err)
	}
	return nil
}

// Params is the number of weights of a model of this shape.
func (s Shape) Params() int64 {
	hd := int64(s.HeadDim())
	d, f := int64(s.Dim), int64(s.HiddenDim)
	qd, kvd := int64(s.Heads)*hd, int64(s.KVHeads)*hd
	perLayer := 2*d + d*qd + 2*d*kvd + qd*d + 3*d*f
	n := int64(s.Vocab)*d + d + int64(s.Layers)*perLayer
	if !s.Tied {
		n += int64(s.Vocab) * d
	}
	return n
}
