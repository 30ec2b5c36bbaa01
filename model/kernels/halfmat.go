package kernels

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// F16 and BF16 weights are used as the file stores them (two bytes a
// weight, typically in the file's mapping: nothing is copied) and widened
// to float32 as the kernels load them. The tiles are the F32 tiles with
// that one change, so a product is bit for bit the one with the weights
// widened to an F32 matrix (which took twice the file's memory) at every
// level, but for AVX2 machines and rows whose length is not a multiple of
// 8, which go through the Go code (F32 has tiles with a tail there).

// NewF16Mat makes a matrix of the rows x cols float16 weights raw
// (row-major, little-endian, as GGUF stores them). raw is used in place:
// it must stay valid and unchanged while the matrix is used.
func NewF16Mat(rows, cols int, raw []byte) (*Mat, error) { return newHalfMat(F16, rows, cols, raw) }

// NewBF16Mat is NewF16Mat for bfloat16 weights.
func NewBF16Mat(rows, cols int, raw []byte) (*Mat, error) { return newHalfMat(BF16, rows, cols, raw) }

func newHalfMat(t DType, rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || len(raw)/2/cols != rows || len(raw) != 2*rows*cols {
		return nil, fmt.Errorf("kernels: %v matrix %dx%d needs %d bytes, have %d", t, rows, cols, 2*rows*cols, len(raw))
	}
	var h []uint16
	if uintptr(unsafe.Pointer(&raw[0]))%2 == 0 && littleEndian {
		h = unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), rows*cols)
	} else {
		h = make([]uint16, rows*cols)
		for i := range h {
			h[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
	}
	return &Mat{Type: t, Rows: rows, Cols: cols, half: h}, nil
}

// littleEndian reports whether this machine stores a uint16's low byte
// first (as GGUF does).
var littleEndian = func() bool {
	v := uint16(1)
	return *(*byte)(unsafe.Pointer(&v)) == 1
}()

// halfRow widens row r of a half-width matrix into dst.
func (m *Mat) halfRow(dst []float32, r int) {
	src := m.half[r*m.Cols : (r+1)*m.Cols]
	if m.Type == BF16 {
		for i, h := range src {
			dst[i] = BF16ToFloat(h)
		}
		return
	}
	FromHalf(dst, src)
}

// halfRowsGo computes output rows [r0, r1) of a half-width MatMul in pure
// Go: each weight row widened, then f32RowsGo's dot products.
func halfRowsGo(out []float32, m *Mat, x []float32, n, r0, r1 int) {
	w := make([]float32, m.Cols)
	for r := r0; r < r1; r++ {
		m.halfRow(w, r)
		for b := 0; b < n; b++ {
			out[b*m.Rows+r] = dotGo(w, x[b*m.Cols:(b+1)*m.Cols])
		}
	}
}

// unsafeBytePtr returns b's first element's address (tests).
func unsafeBytePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
