package ggml

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model/kernels"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// This file is the one place that reads the model's weight matrices: what
// the device gets for each (its ggml type and bytes, row-major, the rows
// of a Rows x Cols matrix as ggml's [Cols, Rows]).
//
// Today the model holds *kernels.Mat, the CPU's layouts, whose bytes are
// not the file's: a Q8_0 matrix is re-encoded from its rows (exactly: a
// row of Q8_0 blocks dequantized and quantized again gives the same
// blocks when each block's largest weight is ±127 quants, as ggml's
// quantizer makes them; other matrices go as F32), every other type goes
// as F32 rows. When the model holds the GGUF's own bytes
// (model.Tensor), they go as they are.

// matData returns what to upload for m: its ggml type and bytes.
func matData(m *kernels.Mat) (gg.Type, []byte) {
	rows := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.Row(rows[r*m.Cols:(r+1)*m.Cols], r)
	}
	if m.Type == kernels.Q8_0 {
		if raw, ok := reencodeQ8(m, rows); ok {
			return gg.TypeQ8_0, raw
		}
	}
	return gg.TypeF32, f32Bytes(rows)
}

// reencodeQ8 returns m's Q8_0 blocks, made again from its dequantized
// rows, when they dequantize to the same rows.
func reencodeQ8(m *kernels.Mat, rows []float32) ([]byte, bool) {
	raw, err := kernels.EncodeQ8(m.Rows, m.Cols, rows)
	if err != nil {
		return nil, false
	}
	back, err := kernels.NewQ8Mat(m.Rows, m.Cols, raw)
	if err != nil {
		return nil, false
	}
	row := make([]float32, m.Cols)
	for r := range m.Rows {
		back.Row(row, r)
		if !slices.Equal(row, rows[r*m.Cols:(r+1)*m.Cols]) {
			return nil, false
		}
	}
	return raw, true
}

// f32Bytes is x's bytes, little-endian.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
