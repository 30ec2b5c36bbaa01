package model

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Architectures the GGUF loader binds. Qwen2 (and Qwen2.5, SmolLM-style
// files using it) is a Llama block with q/k/v biases and NeoX-style RoPE.
var ggufArchs = map[string]bool{"llama": true, "qwen2": true}

// ggufLoader binds a GGUF file's tensors by name and collects every
// problem, so that one load reports all missing or malformed weights.
type ggufLoader struct {
	f    *gguf.File
	path string
	errs []error
	// missing counts the missing tensors past the first few reported.
	missing int
	// types are the weight matrices' types as stored, in first-seen order.
	types []string
}

// maxReported bounds the missing tensors named one by one; the rest are
// counted (a crafted block_count of a million once printed 899,957 lines).
const maxReported = 8

func (g *ggufLoader) fail(format string, args ...any) {
	g.errs = append(g.errs, fmt.Errorf(format, args...))
}

// err joins the problems found, the uncounted missing tensors as one line.
func (g *ggufLoader) err() error {
	errs := g.errs
	if g.missing > 0 {
		errs = append(errs, fmt.Errorf("and %d more missing tensors", g.missing))
	}
	return errors.Join(errs...)
}

// num reads a required (or defaulted, when def >= 0) integer key.
func (g *ggufLoader) num(key string, def int) int {
	v, ok := g.f.Uint(key)
	if !ok {
		if def >= 0 {
			return def
		}
		g.fail("missing metadata key %s", key)
		return 0
	}
	if v == 0 || v > math.MaxInt32 {
		g.fail("metadata %s = %d is out of range", key, v)
		return 0
	}
	return int(v)
}

// tensor finds a tensor and checks its shape (GGUF lists the row length
// first: a rows x cols matrix has dims [cols, rows]).
func (g *ggufLoader) tensor(name string, dims ...int) *gguf.TensorInfo {
	t, ok := g.f.Tensor(name)
	if !ok {
		if len(g.errs) < maxReported {
			g.fail("missing tensor %s", name)
		} else {
			g.missing++
		}
		return nil
	}
	same := len(t.Dims) == len(dims)
	for i := 0; same && i < len(dims); i++ {
		same = t.Dims[i] == uint64(dims[i])
	}
	if !same {
		g.fail("tensor %s has shape %v, want %v", name, t.Dims, dims)
		return nil
	}
	return t
}

// floats returns a tensor's values as float32, without a copy when it is
// stored as F32.
func (g *ggufLoader) floats(t *gguf.TensorInfo) []float32 {
	data := g.f.TensorData(t)
	n := int(t.Elements())
	if t.Type == gguf.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n)
	}
	out := make([]float32, n)
	if err := gguf.Dequantize(t.Type, data, out); err != nil {
		g.fail("tensor %s: %w", t.Name, err)
		return nil
	}
	return out
}

// vec binds a 1-D tensor of n values.
func (g *ggufLoader) vec(name string, n int) []float32 {
	if t := g.tensor(name, n); t != nil {
		return g.floats(t)
	}
	return nil
}

// mat binds a rows x cols weight matrix as the file stores it: its bytes
// in the file's mapping (a backend converts or copies them when it is
// made; see model/cpu), of a type Dequantize decodes. Other types (the IQ
// types other than IQ4_NL and IQ4_XS among them) are an error naming the
// type.
func (g *ggufLoader) mat(name string, rows, cols int) *Tensor {
	t := g.tensor(name, cols, rows)
	if t == nil {
		return nil
	}
	if ty := t.Type.String(); !slices.Contains(g.types, ty) {
		g.types = append(g.types, ty)
	}
	x := &Tensor{Type: t.Type, Rows: rows, Cols: cols, Data: g.f.TensorData(t), mapped: g.f.Mapped()}
	if err := x.check(); err != nil {
		g.fail("tensor %s: %w", name, err)
		return nil
	}
	return x
}

func loadGGUF(path string) (_ *Model, err error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m := &Model{closers: []io.Closer{f}}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	arch := f.Architecture()
	if !ggufArchs[arch] {
		return nil, fmt.Errorf("model: %s: architecture %q is not supported (supported: llama, qwen2)", path, arch)
	}
	m.Source = fmt.Sprintf("%s (GGUF v%d, %s)", path, f.Version, arch)
	g := &ggufLoader{f: f, path: path}
	k := func(s string) string { return arch + "." + s }

	c := Config{Arch: arch}
	c.Dim = g.num(k("embedding_length"), -1)
	c.HiddenDim = g.num(k("feed_forward_length"), -1)
	c.Layers = g.num(k("block_count"), -1)
	c.Heads = g.num(k("attention.head_count"), -1)
	c.KVHeads = g.num(k("attention.head_count_kv"), c.Heads)
	c.ContextLen = g.num(k("context_length"), -1)
	if c.Heads > 0 {
		c.HeadDim = g.num(k("attention.key_length"), c.Dim/c.Heads)
	}
	if rd := g.num(k("rope.dimension_count"), c.HeadDim); rd != c.HeadDim {
		g.fail("partial RoPE (rope.dimension_count %d of head dim %d) is not supported", rd, c.HeadDim)
	}
	c.RopeTheta = 10000
	if v, ok := f.Float(k("rope.freq_base")); ok {
		c.RopeTheta = v
	}
	c.NormEps = 1e-5
	if v, ok := f.Float(k("attention.layer_norm_rms_epsilon")); ok {
		c.NormEps = float32(v)
	}
	// llama.cpp's converter permutes Hugging Face q/k rows so that the
	// "llama" architecture rotates adjacent pairs; Qwen2 keeps NeoX halves.
	c.RopeInterleaved = arch == "llama"
	c.QKVBias = arch == "qwen2"
	// Counts are checked against the tensors present before anything is
	// sized by them: a block needs 9 tensors, and its last one must exist.
	if c.Layers > 0 {
		if c.Layers > len(f.Tensors)/9 {
			g.fail("block_count %d, but the file holds %d tensors (a block needs 9)", c.Layers, len(f.Tensors))
		} else if _, ok := f.Tensor(fmt.Sprintf("blk.%d.attn_norm.weight", c.Layers-1)); !ok {
			g.fail("block_count %d, but the file has no tensors for block %d", c.Layers, c.Layers-1)
		}
	}
	if len(g.errs) > 0 {
		return nil, fmt.Errorf("model: %s: %w", path, g.err())
	}

	// The tokenizer fixes the vocabulary size.
	tok, err := ggufTokenizer(f)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	m.Tokenizer = tok
	c.Vocab = tok.VocabSize()
	if t, ok := f.Tensor("rope_freqs.weight"); ok {
		c.RopeFreqFactors = g.floats(t)
	}
	m.ChatTemplate, _ = f.String("tokenizer.chat_template")

	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w := &Weights{
		TokenEmbd:  g.mat("token_embd.weight", c.Vocab, c.Dim),
		OutputNorm: g.vec("output_norm.weight", c.Dim),
		Layers:     make([]Layer, c.Layers),
	}
	if _, ok := f.Tensor("output.weight"); ok {
		w.Output = g.mat("output.weight", c.Vocab, c.Dim)
	} else {
		w.Output, c.Tied = w.TokenEmbd, true
	}
	for i := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		l := &w.Layers[i]
		l.AttnNorm = g.vec(p+"attn_norm.weight", c.Dim)
		l.Wq = g.mat(p+"attn_q.weight", qd, c.Dim)
		l.Wk = g.mat(p+"attn_k.weight", kvd, c.Dim)
		l.Wv = g.mat(p+"attn_v.weight", kvd, c.Dim)
		l.Wo = g.mat(p+"attn_output.weight", c.Dim, qd)
		if c.QKVBias {
			l.Bq = g.vec(p+"attn_q.bias", qd)
			l.Bk = g.vec(p+"attn_k.bias", kvd)
			l.Bv = g.vec(p+"attn_v.bias", kvd)
		}
		l.FFNNorm = g.vec(p+"ffn_norm.weight", c.Dim)
		l.W1 = g.mat(p+"ffn_gate.weight", c.HiddenDim, c.Dim)
		l.W2 = g.mat(p+"ffn_down.weight", c.Dim, c.HiddenDim)
		l.W3 = g.mat(p+"ffn_up.weight", c.HiddenDim, c.Dim)
	}
	if len(g.errs) > 0 || g.missing > 0 {
		return nil, fmt.Errorf("model: %s: %w", path, g.err())
	}
	m.Config, m.Weights, m.fileTypes = c, w, g.types
	return m, nil
}

// ggufTokenizer builds the tokenizer embedded in a GGUF file's metadata.
func ggufTokenizer(f *gguf.File) (*tokenizer.Tokenizer, error) {
	v := tokenizer.Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	var ok bool
	if v.Model, ok = f.String("tokenizer.ggml.model"); !ok {
		return nil, errors.New("no tokenizer in the file (tokenizer.ggml.model is missing)")
	}
	if v.Tokens, ok = f.Strings("tokenizer.ggml.tokens"); !ok {
		return nil, errors.New("no tokenizer vocabulary (tokenizer.ggml.tokens is missing)")
	}
	v.Pre, _ = f.String("tokenizer.ggml.pre")
	v.Scores, _ = f.Float32s("tokenizer.ggml.scores")
	v.Types, _ = f.Int32s("tokenizer.ggml.token_type")
	v.Merges, _ = f.Strings("tokenizer.ggml.merges")
	id := func(key string, dst *int) {
		if x, ok := f.Uint(key); ok && x < uint64(len(v.Tokens)) {
			*dst = int(x)
		}
	}
	id("tokenizer.ggml.bos_token_id", &v.BOS)
	id("tokenizer.ggml.eos_token_id", &v.EOS)
	id("tokenizer.ggml.unknown_token_id", &v.UNK)
	id("tokenizer.ggml.padding_token_id", &v.PAD)
	v.AddBOS, v.AddSpacePrefix = tokenizer.Defaults(v.Model, v.Pre)
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		v.AddBOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok {
		v.AddSpacePrefix = b
	}
	return tokenizer.New(v)
}
