package train

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/synth"
)

// An outcome verifier is trained like a task model, with one target per
// example: the sequence is a prompt, one complete answer and the end of
// text (what the engine feeds a verifier), followed by the verdict token,
// and only the verdict carries the loss (PromptLen covers the rest). It
// starts from the task model's own weights, which already read the task.

// VerdictExample returns the training example of a verifier input (prompt,
// path, end of text) judged by the verdict token.
func VerdictExample(input []int, verdict int) Example {
	toks := make([]int32, 0, len(input)+1)
	for _, t := range input {
		toks = append(toks, int32(t))
	}
	return Example{Tokens: append(toks, int32(verdict)), PromptLen: len(input)}
}

// ShapeOf returns the training shape of a loaded Llama model's config.
func ShapeOf(name string, c model.Config) synth.Shape {
	return synth.Shape{Name: name, Dim: c.Dim, HiddenDim: c.HiddenDim, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads,
		Vocab: c.Vocab, ContextLen: c.ContextLen, RopeTheta: c.RopeTheta, NormEps: c.NormEps, Tied: c.Tied}
}

// TensorsFromGGUF reads the float32 weights of a GGUF model of the given
// shape (as WriteTensorsGGUF writes them: every tensor F32), named and
// ordered as synth.Init gives them: the starting point of a fine-tune.
func TensorsFromGGUF(path string, shape synth.Shape) ([]synth.Tensor, error) {
	want, err := synth.Init(shape, 1)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]synth.Tensor, len(want))
	for i, w := range want {
		ti, ok := f.Tensor(w.Name)
		if !ok {
			return nil, fmt.Errorf("train: %s has no tensor %s", path, w.Name)
		}
		if ti.Type != gguf.F32 || ti.Elements() != uint64(w.Rows*w.Cols) {
			return nil, fmt.Errorf("train: %s: tensor %s is %v with %d elements, want F32 with %d (a model written by entropix-bench train)",
				path, w.Name, ti.Type, ti.Elements(), w.Rows*w.Cols)
		}
		raw := f.TensorData(ti)
		vals := make([]float32, w.Rows*w.Cols)
		for j := range vals {
			vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		w.Values = vals
		out[i] = w
	}
	return out, nil
}
