package synth

import (
	"fmt"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Tensor is one named float32 weight of a model, under its GGUF name. A
// matrix has Rows x Cols values, row-major (GGUF dims [Cols, Rows]); a
// vector (a norm's weights) has Rows == 1 and Vec set.
type Tensor struct {
	Name       string
	Rows, Cols int
	Vec        bool
	Values     []float32
}

// Init draws the float32 weights Generate(shape, kernels.F32, seed) holds,
// in GGUF order: the starting point of a model trained from scratch.
func Init(shape Shape, seed uint64) ([]Tensor, error) {
	ts, err := build(shape, kernels.F32, seed, false)
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = Tensor{Name: t.name, Rows: t.rows, Cols: t.cols, Vec: t.vec, Values: t.f32}
	}
	return out, nil
}

// FromTensors assembles a model of the given shape from float32 tensors
// named as Init names them (the values are used, not copied), with the
// tokenizer tok (nil for none).
func FromTensors(shape Shape, ts []Tensor, tok *tokenizer.Tokenizer, source string) (*model.Model, error) {
	if err := shape.Validate(); err != nil {
		return nil, err
	}
	byName := make(map[string]*Tensor, len(ts))
	for i := range ts {
		byName[ts[i].Name] = &ts[i]
	}
	var errs []error
	m := func(name string) *model.Tensor {
		t := byName[name+".weight"]
		if t == nil {
			errs = append(errs, fmt.Errorf("synth: no tensor %s.weight", name))
			return nil
		}
		mat, err := model.NewF32Tensor(t.Rows, t.Cols, t.Values)
		if err != nil {
			errs = append(errs, fmt.Errorf("synth: %s.weight: %w", name, err))
		}
		return mat
	}
	v := func(name string) []float32 {
		if t := byName[name+".weight"]; t != nil {
			return t.Values
		}
		return nil // model.New names the missing vector
	}
	w := weights(shape, m, v)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	mdl, err := model.New(shape.Config(), w, tok, source)
	if err != nil {
		return nil, fmt.Errorf("synth: shape %q: %w", shape.Name, err)
	}
	return mdl, nil
}

// weights binds a model's matrices (m) and vectors (v) by GGUF name, less
// the ".weight" suffix.
func weights(shape Shape, m func(string) *model.Tensor, v func(string) []float32) *model.Weights {
	w := &model.Weights{
		TokenEmbd:  m("token_embd"),
		OutputNorm: v("output_norm"),
		Layers:     make([]model.Layer, shape.Layers),
	}
	w.Output = w.TokenEmbd
	if !shape.Tied {
		w.Output = m("output")
	}
	for l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		w.Layers[l] = model.Layer{
			AttnNorm: v(p + "attn_norm"),
			Wq:       m(p + "attn_q"),
			Wk:       m(p + "attn_k"),
			Wv:       m(p + "attn_v"),
			Wo:       m(p + "attn_output"),
			FFNNorm:  v(p + "ffn_norm"),
			W1:       m(p + "ffn_gate"),
			W2:       m(p + "ffn_down"),
			W3:       m(p + "ffn_up"),
		}
	}
	return w
}
