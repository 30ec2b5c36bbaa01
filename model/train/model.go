package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/model/synth"
)

// Tensor is one named parameter and its gradient. A matrix has Rows x Cols
// values, row-major (row r holds Cols values: GGUF dims are [Cols, Rows]);
// a vector (a norm's weights) has Rows == 1 and Vec set.
type Tensor struct {
	Name       string // GGUF name: "token_embd.weight", "blk.0.attn_q.weight", ...
	Rows, Cols int
	Vec        bool
	W          []float32 // the values
	G          []float32 // the gradient of the last ForwardBackward
}

// Batch is B rows of T tokens. Targets[i] is the token that should follow
// Tokens[i]; a negative target adds no loss (a prompt, and the padding after
// the sequences of a row). Pos, when set, is each token's position in its
// own sequence: a row may hold several sequences one after the other, and
// a token attends only to the tokens of its sequence (those at i-Pos[i]
// through i). Without Pos each row is one sequence starting at position 0.
type Batch struct {
	B, T    int
	Tokens  []int32 // B*T
	Targets []int32 // B*T
	Pos     []int32 // B*T, or nil
}

// check validates b against a model's vocabulary and context.
func (b *Batch) check(vocab, context int) error {
	n := b.B * b.T
	switch {
	case b.B <= 0 || b.T <= 0:
		return fmt.Errorf("train: batch of %d x %d tokens", b.B, b.T)
	case len(b.Tokens) != n || len(b.Targets) != n || (b.Pos != nil && len(b.Pos) != n):
		return fmt.Errorf("train: batch of %d x %d with %d tokens, %d targets and %d positions", b.B, b.T, len(b.Tokens), len(b.Targets), len(b.Pos))
	}
	for i := 0; i < n; i++ {
		if t := b.Tokens[i]; t < 0 || int(t) >= vocab {
			return fmt.Errorf("train: token %d at %d outside the vocabulary of %d", t, i, vocab)
		}
		if t := b.Targets[i]; int(t) >= vocab {
			return fmt.Errorf("train: target %d at %d outside the vocabulary of %d", t, i, vocab)
		}
		p := b.pos(i)
		if p < 0 || p > i%b.T || p >= context || (p > 0 && b.pos(i-1) != p-1) {
			return fmt.Errorf("train: position %d at %d of row %d is not its sequence's next (context %d)", p, i%b.T, i/b.T, context)
		}
	}
	return nil
}

// pos is the position of token i in its sequence.
func (b *Batch) pos(i int) int {
	if b.Pos != nil {
		return int(b.Pos[i])
	}
	return i % b.T
}

// Model is a model being trained: its shape, its parameters and their
// gradients, and the activations of the last forward pass.
type Model struct {
	Shape synth.Shape

	tensors []*Tensor
	emb     *Tensor // token_embd
	out     *Tensor // output, or token_embd when tied
	outNorm *Tensor
	layers  []layerParams

	cos, sin []float32 // RoPE tables, ContextLen x HeadDim/2

	acts *acts // grown to the largest batch seen
}

// layerParams are one block's tensors.
type layerParams struct {
	attnNorm, wq, wk, wv, wo, ffnNorm, w1, w2, w3 *Tensor
}

// New returns a model of the given shape with freshly initialized
// parameters (synth.Init: normal with std 0.02, the residual projections
// scaled by 1/sqrt(2*layers), norms one), deterministic for a seed.
func New(s synth.Shape, seed uint64) (*Model, error) {
	ts, err := synth.Init(s, seed)
	if err != nil {
		return nil, err
	}
	return FromTensors(s, ts)
}

// FromTensors returns a model of shape s over the given parameter values
// (named and ordered as synth.Init gives them; the values are used, not
// copied).
func FromTensors(s synth.Shape, ts []synth.Tensor) (*Model, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	m := &Model{Shape: s, layers: make([]layerParams, s.Layers)}
	byName := map[string]*Tensor{}
	for _, t := range ts {
		if len(t.Values) != t.Rows*t.Cols {
			return nil, fmt.Errorf("train: tensor %s has %d values for %dx%d", t.Name, len(t.Values), t.Rows, t.Cols)
		}
		p := &Tensor{Name: t.Name, Rows: t.Rows, Cols: t.Cols, Vec: t.Vec, W: t.Values, G: make([]float32, len(t.Values))}
		m.tensors = append(m.tensors, p)
		byName[t.Name] = p
	}
	var errs []error
	get := func(name string, rows, cols int) *Tensor {
		t := byName[name+".weight"]
		switch {
		case t == nil:
			errs = append(errs, fmt.Errorf("train: no tensor %s.weight", name))
		case t.Rows != rows || t.Cols != cols:
			errs = append(errs, fmt.Errorf("train: tensor %s.weight is %dx%d, want %dx%d", name, t.Rows, t.Cols, rows, cols))
		}
		return t
	}
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	m.emb = get("token_embd", s.Vocab, s.Dim)
	m.out = m.emb
	if !s.Tied {
		m.out = get("output", s.Vocab, s.Dim)
	}
	m.outNorm = get("output_norm", 1, s.Dim)
	for l := range m.layers {
		p := fmt.Sprintf("blk.%d.", l)
		m.layers[l] = layerParams{
			attnNorm: get(p+"attn_norm", 1, s.Dim),
			wq:       get(p+"attn_q", qd, s.Dim),
			wk:       get(p+"attn_k", kvd, s.Dim),
			wv:       get(p+"attn_v", kvd, s.Dim),
			wo:       get(p+"attn_output", s.Dim, qd),
			ffnNorm:  get(p+"ffn_norm", 1, s.Dim),
			w1:       get(p+"ffn_gate", s.HiddenDim, s.Dim),
			w2:       get(p+"ffn_down", s.Dim, s.HiddenDim),
			w3:       get(p+"ffn_up", s.HiddenDim, s.Dim),
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	want := 4 + 9*s.Layers - 1
	if s.Tied {
		want--
	}
	if len(m.tensors) != want {
		return nil, fmt.Errorf("train: %d tensors for a shape of %d", len(m.tensors), want)
	}
	half := hd / 2
	m.cos = make([]float32, s.ContextLen*half)
	m.sin = make([]float32, s.ContextLen*half)
	for p := 0; p < s.ContextLen; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) / math.Pow(s.RopeTheta, float64(2*i)/float64(hd))
			m.cos[p*half+i] = float32(math.Cos(a))
			m.sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return m, nil
}

// Tensors returns the parameters in GGUF order.
func (m *Model) Tensors() []*Tensor { return m.tensors }

// Values returns the parameters as synth tensors (sharing the values), for
// export.
func (m *Model) Values() []synth.Tensor {
	out := make([]synth.Tensor, len(m.tensors))
	for i, t := range m.tensors {
		out[i] = synth.Tensor{Name: t.Name, Rows: t.Rows, Cols: t.Cols, Vec: t.Vec, Values: t.W}
	}
	return out
}

// NumParams is the number of trained values.
func (m *Model) NumParams() int {
	n := 0
	for _, t := range m.tensors {
		n += len(t.W)
	}
	return n
}
