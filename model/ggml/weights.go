package ggml

import (
	"encoding/binary"
	"math"

	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// This file is the one place that reads the model's weight matrices: what
// the device gets for each (its ggml type and bytes, row-major, the rows
// of a Rows x Cols matrix as ggml's [Cols, Rows]).
//
// A model's tensors hold their file's bytes in the file's type, which is
// ggml's own (GGUF is ggml's format): they go to the device as they are,
// F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and the rest alike, and
// ggml's kernels read them there. A tensor whose rows ggml would size
// otherwise (none should) goes as F32 rows.

// matData returns what to upload for m: its ggml type and bytes.
func matData(m *model.Tensor) (gg.Type, []byte) {
	ty := gg.Type(m.Type)
	if gg.RowSize(ty, m.Cols) == m.RowBytes() && len(m.Data) == m.Rows*m.RowBytes() {
		return ty, m.Data
	}
	rows := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.Row(rows[r*m.Cols:(r+1)*m.Cols], r)
	}
	return gg.TypeF32, f32Bytes(rows)
}

// f32Bytes is x's bytes, little-endian.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
