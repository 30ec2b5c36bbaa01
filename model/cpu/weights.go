package cpu

import (
	"fmt"
	"io"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// Weights are a model's weight matrices as the CPU's kernels run them,
// converted from its tensors (model.Tensor) by WeightsOf. The norms and
// biases are the model's own (model.Layer).
type Weights struct {
	TokenEmbd *kernels.Mat // vocab x dim
	Output    *kernels.Mat // vocab x dim; the same Mat as TokenEmbd when the model ties them
	Layers    []LayerWeights
}

// LayerWeights are one transformer block's matrices (see model.Layer).
type LayerWeights struct {
	Wq, Wk, Wv, Wo *kernels.Mat
	W1, W2, W3     *kernels.Mat // gate, down, up
}

// weightsKey is the key of the CPU's Weights among a model's backend
// state (model.Model.BackendState).
type weightsKey struct{}

// WeightsOf returns m's weights as the CPU runs them: converted the first
// time, by the first backend made on m, and shared by every later one
// (model.Model.BackendState); the model drops them when it is closed.
// The conversion takes each tensor as convert describes.
func WeightsOf(m *model.Model) (*Weights, error) {
	v, err := m.BackendState(weightsKey{}, func() (any, io.Closer, error) {
		w, err := convert(m.Weights)
		return w, nil, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*Weights), nil
}

// nativeQ4K keeps Q4_K, Q5_K, Q6_K and Q4_0 weights as stored (tests turn
// it off to compare with the re-quantized path).
var nativeQ4K = true

// convert makes the kernels' matrices of w's tensors, in the order a GGUF
// file lists them, one Mat for a tensor used twice (tied embeddings).
func convert(w *model.Weights) (*Weights, error) {
	done := map[*model.Tensor]*kernels.Mat{}
	var first error
	mat := func(name string, t *model.Tensor) *kernels.Mat {
		if m, ok := done[t]; ok || first != nil {
			return m
		}
		m, err := newMat(t)
		if err != nil {
			first = fmt.Errorf("model: tensor %s: %w", name, err)
		}
		done[t] = m
		return m
	}
	cw := &Weights{
		TokenEmbd: mat("token_embd.weight", w.TokenEmbd),
		Output:    mat("output.weight", w.Output),
		Layers:    make([]LayerWeights, len(w.Layers)),
	}
	for i := range w.Layers {
		l, p := &w.Layers[i], fmt.Sprintf("blk.%d.", i)
		cw.Layers[i] = LayerWeights{
			Wq: mat(p+"attn_q.weight", l.Wq),
			Wk: mat(p+"attn_k.weight", l.Wk),
			Wv: mat(p+"attn_v.weight", l.Wv),
			Wo: mat(p+"attn_output.weight", l.Wo),
			W1: mat(p+"ffn_gate.weight", l.W1),
			W2: mat(p+"ffn_down.weight", l.W2),
			W3: mat(p+"ffn_up.weight", l.W3),
		}
	}
	if first != nil {
		return nil, first
	}
	return cw, nil
}

// newMat converts one tensor for the kernels. F32, F16 and BF16 weights
// are used in place (the half-width ones widened as the kernels load
// them, bit for bit the products of the widened F32 weights); Q8_0 weights are unpacked for the kernels; Q4_K, Q5_K, Q6_K and
// Q4_0 weights keep their bits (rows a multiple of 256 long, and for Q5_K
// and Q4_0 a matrix's rows a multiple of 8), regrouped eight matrix rows
// at a time; other quantizations (Q4_1,
// Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, and the native types' other
// matrices) are dequantized and re-quantized to Q8_0 a panel of rows at a
// time, which keeps their precision at a little more memory.
//
// From a file mapping (model.Tensor.Mapped) every matrix but the float
// ones is copied as the mapping is read, each piece of the mapping released once
// copied (see kernels.NewQ8MatMapped, NewQ4KMatMapped,
// QuantizeQ8Mapped), so that the weights are resident once: Q8_0 at the
// file's size, Q4_K 2.8% more, Q5_K 2.3%; the float ones are the
// mapping's pages.
func newMat(t *model.Tensor) (m *kernels.Mat, err error) {
	rows, cols, data, mapped := t.Rows, t.Cols, t.Data, t.Mapped()
	requant := func() {
		if bs := t.Type.BlockSize(); mapped && bs > 0 && cols%bs == 0 {
			deq := func(dst []float32, src []byte) error { return gguf.Dequantize(t.Type, src, dst) }
			m, err = kernels.QuantizeQ8Mapped(rows, cols, t.RowBytes(), data, deq)
			return
		}
		var w []float32
		if w, err = t.Floats(); err == nil {
			m, err = kernels.QuantizeQ8(rows, cols, w)
		}
	}
	native := cols%kernels.QKBlockSize == 0 && nativeQ4K
	switch t.Type {
	case gguf.Q8_0:
		if mapped {
			m, err = kernels.NewQ8MatMapped(rows, cols, data)
		} else {
			m, err = kernels.NewQ8Mat(rows, cols, data)
		}
	case gguf.F32:
		var w []float32
		if w, err = t.Floats(); err == nil {
			m, err = kernels.NewF32Mat(rows, cols, w)
		}
	case gguf.F16:
		m, err = kernels.NewF16Mat(rows, cols, data)
	case gguf.BF16:
		m, err = kernels.NewBF16Mat(rows, cols, data)
	case gguf.Q4_K, gguf.Q6_K:
		switch {
		case native && mapped && t.Type == gguf.Q4_K:
			// Their bits kept, in huge pages where there are some.
			m, err = kernels.NewQ4KMatMapped(rows, cols, data)
		case native && mapped:
			m, err = kernels.NewQ6KMatMapped(rows, cols, data)
		case native && t.Type == gguf.Q4_K:
			m, err = kernels.NewQ4KMat(rows, cols, data)
		case native:
			m, err = kernels.NewQ6KMat(rows, cols, data)
		default:
			requant()
		}
	case gguf.Q5_K, gguf.Q4_0:
		switch {
		case !native || rows%8 != 0:
			requant()
		case t.Type == gguf.Q5_K && mapped:
			m, err = kernels.NewQ5KMatMapped(rows, cols, data)
		case t.Type == gguf.Q5_K:
			m, err = kernels.NewQ5KMat(rows, cols, data)
		case mapped:
			m, err = kernels.NewQ40MatMapped(rows, cols, data)
		default:
			m, err = kernels.NewQ40Mat(rows, cols, data)
		}
	case gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.IQ4_NL, gguf.IQ4_XS:
		requant()
	default:
		err = fmt.Errorf("tensor type %s is not supported (supported: %s)", t.Type, gguf.DequantizeTypes)
	}
	return m, err
}
