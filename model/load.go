package model

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/entropix-search/entropix-search/model/internal/mmap"
	"github.com/entropix-search/entropix-search/model/llama2c"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Load opens a model file, GGUF or llama2.c checkpoint (told apart by the
// file's magic), and its tokenizer. A GGUF file carries its own tokenizer;
// a llama2.c checkpoint needs tokenizerPath (a llama2.c tokenizer.bin), or
// a tokenizer.bin beside the model. A non-empty tokenizerPath overrides
// the tokenizer embedded in a GGUF file only for llama2.c-format files.
func Load(path, tokenizerPath string) (*Model, error) {
	for _, p := range []string{path, tokenizerPath} {
		if p == "" {
			continue
		}
		// A FIFO would block the open, a device (/dev/zero) never end.
		if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("model: %s is not a regular file (%v)", p, fi.Mode().Type())
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("model: %s: too short to be a model file: %w", path, err)
	}
	var m *Model
	if string(magic[:]) == "GGUF" {
		m, err = loadGGUF(path)
	} else {
		m, err = loadLlama2C(path, tokenizerPath)
	}
	if err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func loadLlama2C(path, tokenizerPath string) (_ *Model, err error) {
	mf, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m := &Model{Source: path + " (llama2.c checkpoint)", closers: []io.Closer{mf}}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	ck, err := llama2c.Parse(mf.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h := ck.Header
	m.Config = Config{
		Arch: "llama", Dim: h.Dim, HiddenDim: h.HiddenDim, Layers: h.Layers, Heads: h.Heads, KVHeads: h.KVHeads,
		HeadDim: h.HeadDim(), Vocab: h.Vocab, ContextLen: h.SeqLen, RopeTheta: 10000, RopeInterleaved: true,
		NormEps: 1e-5, Tied: h.Tied,
	}
	c := &m.Config
	var errs []error
	mat := func(w []float32, rows, cols int) *Tensor {
		x, err := NewF32Tensor(rows, cols, w)
		errs = append(errs, err)
		return x
	}
	w := &Weights{
		TokenEmbd:  mat(ck.TokenEmbd, c.Vocab, c.Dim),
		OutputNorm: ck.FinalNorm,
		Layers:     make([]Layer, c.Layers),
	}
	w.Output = w.TokenEmbd
	if !h.Tied {
		w.Output = mat(ck.Output, c.Vocab, c.Dim)
	}
	qd, kvd, d, f := c.QDim(), c.KVDim(), c.Dim, c.HiddenDim
	for l := range w.Layers {
		w.Layers[l] = Layer{
			AttnNorm: ck.AttnNorm[l*d : (l+1)*d],
			Wq:       mat(ck.Wq[l*qd*d:(l+1)*qd*d], qd, d),
			Wk:       mat(ck.Wk[l*kvd*d:(l+1)*kvd*d], kvd, d),
			Wv:       mat(ck.Wv[l*kvd*d:(l+1)*kvd*d], kvd, d),
			Wo:       mat(ck.Wo[l*d*qd:(l+1)*d*qd], d, qd),
			FFNNorm:  ck.FFNNorm[l*d : (l+1)*d],
			W1:       mat(ck.W1[l*f*d:(l+1)*f*d], f, d),
			W2:       mat(ck.W2[l*d*f:(l+1)*d*f], d, f),
			W3:       mat(ck.W3[l*f*d:(l+1)*f*d], f, d),
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Weights = w

	if tokenizerPath == "" {
		guess := filepath.Join(filepath.Dir(path), "tokenizer.bin")
		if _, err := os.Stat(guess); err != nil {
			return nil, fmt.Errorf("model: %s is a llama2.c checkpoint, which carries no tokenizer: give one (-z tokenizer.bin)", path)
		}
		tokenizerPath = guess
	}
	tok, err := tokenizer.LoadLlama2C(tokenizerPath, c.Vocab)
	if err != nil {
		return nil, fmt.Errorf("model: tokenizer for %s: %w", path, err)
	}
	m.Tokenizer = tok
	return m, nil
}
