// Package model loads Llama-family language models (llama2.c checkpoints and
// GGUF files) and defines the seam their forward pass runs behind.
//
// A Backend (backend.go) runs batched forward steps over a paged,
// copy-on-write KV cache: package kvcache manages the blocks, the backend
// stores them. Backends register by name (RegisterBackend) and are made
// with NewBackend; the CPU's is package model/cpu ("cpu"), which a
// program imports for its side effect. Reference (reference.go) is the
// forward pass written plainly, one position at a time, that every backend
// is tested against; model/train's step.go is the same network with its
// backward pass, for training.
//
// Weights are bound by name (GGUF) or by position (llama2.c) into plain
// structs; the numeric kernels live in package kernels.
package model

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Layer holds one transformer block's weights.
type Layer struct {
	AttnNorm   []float32    // dim
	Wq         *kernels.Mat // QDim x dim
	Wk, Wv     *kernels.Mat // KVDim x dim
	Bq, Bk, Bv []float32    // q/k/v biases (Qwen2), nil otherwise
	Wo         *kernels.Mat // dim x QDim
	FFNNorm    []float32    // dim
	W1         *kernels.Mat // hidden x dim (gate)
	W2         *kernels.Mat // dim x hidden (down)
	W3         *kernels.Mat // hidden x dim (up)
}

// Weights holds all of a model's parameters.
type Weights struct {
	TokenEmbd  *kernels.Mat // vocab x dim
	Layers     []Layer
	OutputNorm []float32    // dim
	Output     *kernels.Mat // vocab x dim; the same Mat as TokenEmbd when tied
}

// Model is a loaded model: its shape, weights and tokenizer.
type Model struct {
	Config    Config
	Weights   *Weights
	Tokenizer *tokenizer.Tokenizer
	// ChatTemplate is the Jinja chat template a GGUF file carries, if any.
	ChatTemplate string
	// Source describes where the model came from (file and format).
	Source string

	invFreq   []float64 // RoPE frequency per pair
	fileTypes []string  // the weight matrices' types in the file (GGUF)
	closers   []io.Closer
	closed    atomic.Bool
}

// FileTypes are the types of the weight matrices as a GGUF file stores
// them ("Q4_K", "Q6_K", ...), in the order first met; none for other
// models. The kernels run some of them as another (see Load).
func (m *Model) FileTypes() []string { return m.fileTypes }

// ErrClosed is returned for a model used after Close.
var ErrClosed = errors.New("model: used after Close")

// Closed reports whether Close was called: the weights of a file model
// are unmapped then, and nothing may run on them.
func (m *Model) Closed() bool { return m.closed.Load() }

// New assembles a model from a config, weights and tokenizer (which may be
// nil for models that only run on token ids), checking that they agree.
func New(c Config, w *Weights, tok *tokenizer.Tokenizer, source string) (*Model, error) {
	m := &Model{Config: c, Weights: w, Tokenizer: tok, Source: source}
	if w == nil {
		return nil, errors.New("model: no weights")
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// Close releases the model's file mappings. The model must not be used
// afterwards.
func (m *Model) Close() error {
	m.closed.Store(true)
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// DefaultKVType is the KV cache type for this model when the user names
// none: F16 when its layers' weights are quantized (llama.cpp's default
// cache; it halves the cache's memory and the attention's traffic, which
// a tree of many branches feels), F32 when they are float, so that a
// float model reproduces reference outputs exactly.
func (m *Model) DefaultKVType() kvcache.ElemType {
	if len(m.Weights.Layers) > 0 && m.Weights.Layers[0].Wq.Type != kernels.F32 {
		return kvcache.F16
	}
	return kvcache.F32
}

// ParseKVType reads a KV cache type name as the commands take it: "f32",
// "f16" (kvcache.ParseElemType) or "auto" (any case), which only a loaded
// model can resolve (Model.KVType). Commands call it to reject a bad name
// before loading the model.
func ParseKVType(name string) (t kvcache.ElemType, auto bool, err error) {
	if strings.EqualFold(name, "auto") {
		return 0, true, nil
	}
	t, err = kvcache.ParseElemType(name)
	if err != nil {
		err = fmt.Errorf("%w (or auto)", err)
	}
	return t, false, err
}

// KVType resolves a KV cache type name (ParseKVType); "auto" is
// DefaultKVType.
func (m *Model) KVType(name string) (kvcache.ElemType, error) {
	t, auto, err := ParseKVType(name)
	if auto {
		return m.DefaultKVType(), nil
	}
	return t, err
}

// NewCache returns a KV cache pool for this model holding at most maxTokens
// token positions (over all sequences, counted in whole blocks), storing
// keys and values as dtype: kvcache.F32 exactly, or kvcache.F16 in half
// the memory and attention traffic (llama.cpp's default).
func (m *Model) NewCache(maxTokens, blockSize int, dtype kvcache.ElemType) (*kvcache.Pool, error) {
	if blockSize <= 0 {
		blockSize = 16
	}
	if maxTokens <= 0 {
		return nil, fmt.Errorf("model: cache of %d tokens", maxTokens)
	}
	return kvcache.New(kvcache.Config{
		Layers:    m.Config.Layers,
		KVDim:     m.Config.KVDim(),
		BlockSize: blockSize,
		DType:     dtype,
		MaxBlocks: (maxTokens + blockSize - 1) / blockSize,
	})
}

// check verifies that the weights agree with the config.
func (m *Model) check() error {
	c, w := &m.Config, m.Weights
	if err := c.Validate(); err != nil {
		return err
	}
	mat := func(name string, x *kernels.Mat, rows, cols int) error {
		if x == nil {
			return fmt.Errorf("model: missing weight %s", name)
		}
		if x.Rows != rows || x.Cols != cols {
			return fmt.Errorf("model: weight %s is %dx%d, want %dx%d", name, x.Rows, x.Cols, rows, cols)
		}
		return nil
	}
	vec := func(name string, x []float32, n int) error {
		if len(x) != n {
			return fmt.Errorf("model: weight %s has %d values, want %d", name, len(x), n)
		}
		return nil
	}
	errs := []error{
		mat("token_embd", w.TokenEmbd, c.Vocab, c.Dim),
		mat("output", w.Output, c.Vocab, c.Dim),
		vec("output_norm", w.OutputNorm, c.Dim),
	}
	if len(w.Layers) != c.Layers {
		errs = append(errs, fmt.Errorf("model: %d layers of weights for %d in the config", len(w.Layers), c.Layers))
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		errs = append(errs,
			vec(p+"attn_norm", l.AttnNorm, c.Dim), vec(p+"ffn_norm", l.FFNNorm, c.Dim),
			mat(p+"attn_q", l.Wq, c.QDim(), c.Dim), mat(p+"attn_k", l.Wk, c.KVDim(), c.Dim),
			mat(p+"attn_v", l.Wv, c.KVDim(), c.Dim), mat(p+"attn_output", l.Wo, c.Dim, c.QDim()),
			mat(p+"ffn_gate", l.W1, c.HiddenDim, c.Dim), mat(p+"ffn_down", l.W2, c.Dim, c.HiddenDim),
			mat(p+"ffn_up", l.W3, c.HiddenDim, c.Dim))
		if c.QKVBias {
			errs = append(errs, vec(p+"attn_q.bias", l.Bq, c.QDim()), vec(p+"attn_k.bias", l.Bk, c.KVDim()), vec(p+"attn_v.bias", l.Bv, c.KVDim()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if m.Tokenizer != nil && m.Tokenizer.VocabSize() != c.Vocab {
		return fmt.Errorf("model: tokenizer has %d tokens but the model has a vocabulary of %d: wrong tokenizer for this model", m.Tokenizer.VocabSize(), c.Vocab)
	}
	m.invFreq = c.ropeInvFreq()
	return nil
}
