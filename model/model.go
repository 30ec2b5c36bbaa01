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
// structs of Tensors, each matrix in its file's type and bytes (a GGUF
// file's mapped in place): the model holds no backend's layout. A backend
// converts or uploads them when it is made, once per model however many
// backends run on it (BackendState); the CPU's numeric kernels are
// package model/kernels, behind model/cpu.
package model

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Layer holds one transformer block's weights: matrices as Tensors
// (rows x cols), norms and biases as float32s.
type Layer struct {
	AttnNorm   []float32 // dim
	Wq         *Tensor   // QDim x dim
	Wk, Wv     *Tensor   // KVDim x dim
	Bq, Bk, Bv []float32 // q/k/v biases (Qwen2), nil otherwise
	Wo         *Tensor   // dim x QDim
	FFNNorm    []float32 // dim
	W1         *Tensor   // hidden x dim (gate)
	W2         *Tensor   // dim x hidden (down)
	W3         *Tensor   // hidden x dim (up)
}

// Weights holds all of a model's parameters.
type Weights struct {
	TokenEmbd  *Tensor // vocab x dim
	Layers     []Layer
	OutputNorm []float32 // dim
	Output     *Tensor   // vocab x dim; the same Tensor as TokenEmbd when tied
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

	statesMu sync.Mutex
	states   []backendState // BackendState's, in the order made
}

// backendState is one value a backend derived from the model.
type backendState struct {
	key    any
	value  any
	closer io.Closer
}

// FileTypes are the types of the weight matrices as a GGUF file stores
// them ("Q4_K", "Q6_K", ...), in the order first met; none for other
// models. A backend may run some of them as another (the CPU's: see
// model/cpu).
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

// Close releases what backends derived from the model (BackendState) and
// the model's file mappings. The model must not be used afterwards.
func (m *Model) Close() error {
	m.closed.Store(true)
	var errs []error
	m.statesMu.Lock()
	for i := len(m.states) - 1; i >= 0; i-- {
		if c := m.states[i].closer; c != nil {
			errs = append(errs, c.Close())
		}
	}
	m.states = nil
	m.statesMu.Unlock()
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// BackendState returns what a backend derives from the model's weights
// and keeps for as long as the model lives (the CPU's converted
// matrices, a GPU's uploaded ones), under a key of the backend's own (a
// value of an unexported type, as context keys are): made by build the
// first time, then the same value for every backend on this model, so
// that the server's, a verifier's and the tests' backends share one
// conversion. Calls for one model are serialized; a build that fails is
// not remembered. The closer build returns, if not nil, is closed by
// Close, which also drops the value; after Close, BackendState returns
// ErrClosed.
func (m *Model) BackendState(key any, build func() (any, io.Closer, error)) (any, error) {
	m.statesMu.Lock()
	defer m.statesMu.Unlock()
	if m.Closed() {
		return nil, ErrClosed
	}
	for _, s := range m.states {
		if s.key == key {
			return s.value, nil
		}
	}
	v, c, err := build()
	if err != nil {
		return nil, err
	}
	m.states = append(m.states, backendState{key: key, value: v, closer: c})
	return v, nil
}

// DefaultKVType is the KV cache type for this model when the user names
// none: F16 when its layers' weights are quantized (llama.cpp's default
// cache; it halves the cache's memory and the attention's traffic, which
// a tree of many branches feels), F32 when they are float (F32, F16 or
// BF16), so that a float model reproduces reference outputs exactly.
func (m *Model) DefaultKVType() kvcache.ElemType {
	if len(m.Weights.Layers) > 0 {
		switch m.Weights.Layers[0].Wq.Type {
		case gguf.F32, gguf.F16, gguf.BF16:
		default:
			return kvcache.F16
		}
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
	mat := func(name string, x *Tensor, rows, cols int) error {
		if x == nil {
			return fmt.Errorf("model: missing weight %s", name)
		}
		if x.Rows != rows || x.Cols != cols {
			return fmt.Errorf("model: weight %s is %dx%d, want %dx%d", name, x.Rows, x.Cols, rows, cols)
		}
		if err := x.check(); err != nil {
			return fmt.Errorf("model: weight %s: %w", name, err)
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
