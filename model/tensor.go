package model

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/internal/mmap"
)

// Tensor is a weight matrix as its file stores it: Rows x Cols elements
// of a ggml type, row-major, in the type's blocks, so that any backend
// can take it as it is (a GPU's uploads these bytes in their GGUF type)
// or convert it to its own layout (the CPU's kernels.Mat, see model/cpu).
// A Tensor is read-only and safe for concurrent use.
type Tensor struct {
	// Type is the elements' ggml type: gguf.F32, gguf.F16, gguf.Q8_0,
	// gguf.Q4_K, ... (a type gguf.Dequantize decodes).
	Type gguf.Type
	// Rows is the number of rows (ggml's ne[1]: a matrix's outputs, or
	// the vocabulary of an embedding); Cols the elements of a row (ne[0],
	// the fastest-varying dimension: its inputs), a multiple of the
	// type's block size.
	Rows, Cols int
	// Data holds the rows one after another, RowBytes each (blocks of
	// Type.TypeSize() bytes for Type.BlockSize() elements), little-endian
	// as in a GGUF file. It must not be modified: for a model loaded from
	// a file it is a slice of the file's read-only mapping, valid until
	// the model is closed.
	Data []byte

	mapped bool // Data lies in a read-only file mapping (see Release)
}

// NewF32Tensor wraps row-major float32 weights as an F32 tensor (not
// copied: Data is the same memory).
func NewF32Tensor(rows, cols int, w []float32) (*Tensor, error) {
	if rows <= 0 || cols <= 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("model: F32 tensor %dx%d needs %d values, have %d", rows, cols, rows*cols, len(w))
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w))
	return &Tensor{Type: gguf.F32, Rows: rows, Cols: cols, Data: data}, nil
}

// RowBytes is the size of one row's blocks in Data.
func (t *Tensor) RowBytes() int {
	if bs := t.Type.BlockSize(); bs > 0 {
		return t.Cols / bs * t.Type.TypeSize()
	}
	return 0
}

// check reports what makes t unusable: a type Dequantize does not decode,
// a row not a whole number of blocks, or Data not rows of RowBytes.
func (t *Tensor) check() error {
	if !gguf.CanDequantize(t.Type) {
		return fmt.Errorf("tensor type %s is not supported (supported: %s)", t.Type, gguf.DequantizeTypes)
	}
	if t.Rows <= 0 || t.Cols <= 0 || t.Cols%t.Type.BlockSize() != 0 {
		return fmt.Errorf("%s tensor of %dx%d: rows must be whole blocks of %d", t.Type, t.Rows, t.Cols, t.Type.BlockSize())
	}
	if rb := t.RowBytes(); len(t.Data)/rb != t.Rows || len(t.Data)%rb != 0 {
		return fmt.Errorf("%s tensor of %dx%d needs %d bytes, has %d", t.Type, t.Rows, t.Cols, t.Rows*rb, len(t.Data))
	}
	return nil
}

// Row sets dst[:Cols] to row r's values, dequantized (gguf.Dequantize).
// t must be a model's (one New or Load accepted); a row outside
// [0, Rows) panics.
func (t *Tensor) Row(dst []float32, r int) {
	if r < 0 || r >= t.Rows {
		panic(fmt.Sprintf("model: row %d of a tensor of %d rows", r, t.Rows))
	}
	rb := t.RowBytes()
	if err := gguf.Dequantize(t.Type, t.Data[r*rb:(r+1)*rb], dst[:t.Cols]); err != nil {
		panic("model: " + err.Error()) // check rules this out
	}
}

// F32 returns the values of an F32 tensor in place (Data seen as
// float32s), or nil for another type or a Data not aligned to 4 bytes.
func (t *Tensor) F32() []float32 {
	if t.Type != gguf.F32 || len(t.Data) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data)/4)
}

// Floats returns all Rows*Cols values, row-major: F32's in place where it
// can, else dequantized into a new slice.
func (t *Tensor) Floats() ([]float32, error) {
	if w := t.F32(); w != nil {
		return w, nil
	}
	if t.Rows <= 0 || t.Cols <= 0 {
		return nil, errors.New("model: empty tensor")
	}
	out := make([]float32, t.Rows*t.Cols)
	if err := gguf.Dequantize(t.Type, t.Data, out); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return out, nil
}

// Mapped reports whether Data lies in a read-only file mapping, whose
// pages a backend that copied them may give back (Release).
func (t *Tensor) Mapped() bool { return t.mapped }

// Release gives back the process's pages of a Mapped tensor's Data once a
// backend has copied it, so that the weights are resident once: they
// leave the resident set, the file stays in the page cache, and reading
// Data again brings them back. It does nothing to other tensors.
func (t *Tensor) Release() {
	if t.mapped {
		mmap.Release(t.Data)
	}
}
