// Package llama2c reads model checkpoints in the format of Karpathy's
// llama2.c (the "version 0" export of run.c): a header of seven int32
// values — dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len — followed by float32 weights in a fixed order. A negative
// vocab_size means the classifier is stored separately at the end instead
// of being tied to the token embedding.
//
// The reader checks every size against the bytes actually present before it
// slices anything, so a corrupt or hostile header yields an error, not a
// panic or a huge allocation.
package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// HeaderSize is the size in bytes of the checkpoint header.
const HeaderSize = 7 * 4

// Header is the checkpoint's shape.
type Header struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, Vocab, SeqLen int
	// Tied is true when the classifier shares the token embedding
	// (vocab_size was positive in the file).
	Tied bool
}

// Limits on header values: generous for any real llama2.c export, small
// enough that products of them cannot overflow int64.
const (
	maxDim    = 1 << 16
	maxLayers = 1 << 10
	maxVocab  = 1 << 20
	maxSeqLen = 1 << 20
)

// ParseHeader decodes and validates the 28-byte header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("llama2c: file has %d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	if string(b[:4]) == "GGUF" {
		return Header{}, errors.New("llama2c: this is a GGUF file, not a llama2.c checkpoint")
	}
	var v [7]int32
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	h := Header{Dim: int(v[0]), HiddenDim: int(v[1]), Layers: int(v[2]), Heads: int(v[3]), KVHeads: int(v[4]), Vocab: int(v[5]), SeqLen: int(v[6])}
	h.Tied = h.Vocab > 0
	if h.Vocab < 0 {
		h.Vocab = -h.Vocab
	}
	check := func(name string, val, hi int) error {
		if val <= 0 || val > hi {
			return fmt.Errorf("llama2c: header %s = %d is out of range (1..%d): not a llama2.c checkpoint, or a corrupt one", name, val, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name    string
		val, hi int
	}{{"dim", h.Dim, maxDim}, {"hidden_dim", h.HiddenDim, 4 * maxDim}, {"n_layers", h.Layers, maxLayers},
		{"n_heads", h.Heads, maxDim}, {"n_kv_heads", h.KVHeads, maxDim}, {"vocab_size", h.Vocab, maxVocab}, {"seq_len", h.SeqLen, maxSeqLen}} {
		if err := check(c.name, c.val, c.hi); err != nil {
			return Header{}, err
		}
	}
	if h.Dim%h.Heads != 0 || (h.Dim/h.Heads)%2 != 0 {
		return Header{}, fmt.Errorf("llama2c: dim %d is not a multiple of n_heads %d with an even head size", h.Dim, h.Heads)
	}
	if h.KVHeads > h.Heads || h.Heads%h.KVHeads != 0 {
		return Header{}, fmt.Errorf("llama2c: n_heads %d is not a multiple of n_kv_heads %d", h.Heads, h.KVHeads)
	}
	return h, nil
}

// HeadDim is the size of one attention head.
func (h Header) HeadDim() int { return h.Dim / h.Heads }

// Checkpoint holds the weights of a llama2.c model as float32 views of the
// file image. Per-layer tensors are stored for all layers back to back.
type Checkpoint struct {
	Header
	TokenEmbd []float32 // vocab x dim
	AttnNorm  []float32 // layers x dim
	Wq        []float32 // layers x (heads*headDim) x dim
	Wk        []float32 // layers x (kvHeads*headDim) x dim
	Wv        []float32 // layers x (kvHeads*headDim) x dim
	Wo        []float32 // layers x dim x (heads*headDim)
	FFNNorm   []float32 // layers x dim
	W1        []float32 // layers x hidden x dim (gate)
	W2        []float32 // layers x dim x hidden (down)
	W3        []float32 // layers x hidden x dim (up)
	FinalNorm []float32 // dim
	Output    []float32 // vocab x dim (the token embedding when tied)
}

// Parse reads a checkpoint from a whole-file image. The returned slices
// alias data, which must stay alive (and 4-byte aligned) while they are used.
func Parse(data []byte) (*Checkpoint, error) {
	h, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
		return nil, errors.New("llama2c: file image is not 4-byte aligned")
	}
	if !littleEndian() {
		return nil, errors.New("llama2c: big-endian hosts are not supported")
	}
	hd := h.HeadDim()
	q, kv := int64(h.Heads*hd), int64(h.KVHeads*hd)
	d, f, L := int64(h.Dim), int64(h.HiddenDim), int64(h.Layers)
	// Sizes in float32 elements, in file order. The rope tables
	// (freq_cis_real, freq_cis_imag) are skipped: we compute RoPE ourselves.
	sizes := []int64{int64(h.Vocab) * d, L * d, L * q * d, L * kv * d, L * kv * d, L * d * q, L * d, L * f * d, L * d * f, L * f * d, d,
		int64(h.SeqLen) * int64(hd) / 2, int64(h.SeqLen) * int64(hd) / 2}
	if !h.Tied {
		sizes = append(sizes, int64(h.Vocab)*d)
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	have := int64(len(data) - HeaderSize)
	if want := total * 4; have < want {
		return nil, fmt.Errorf("llama2c: truncated checkpoint: header (dim %d, %d layers, vocab %d) needs %d bytes of weights, file has %d",
			h.Dim, h.Layers, h.Vocab, want, have)
	}
	all := unsafe.Slice((*float32)(unsafe.Pointer(&data[HeaderSize])), total)
	var off int64
	next := func(i int) []float32 {
		s := all[off : off+sizes[i] : off+sizes[i]]
		off += sizes[i]
		return s
	}
	c := &Checkpoint{Header: h}
	c.TokenEmbd, c.AttnNorm, c.Wq, c.Wk, c.Wv, c.Wo = next(0), next(1), next(2), next(3), next(4), next(5)
	c.FFNNorm, c.W1, c.W2, c.W3, c.FinalNorm = next(6), next(7), next(8), next(9), next(10)
	next(11)
	next(12)
	c.Output = c.TokenEmbd
	if !h.Tied {
		c.Output = next(13)
	}
	for _, w := range [][]float32{c.AttnNorm, c.FFNNorm, c.FinalNorm} {
		for _, v := range w {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, errors.New("llama2c: norm weights hold NaN or Inf: corrupt checkpoint")
			}
		}
	}
	return c, nil
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}
