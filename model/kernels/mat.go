package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is the storage type of a weight matrix.
type DType uint8

const (
	F32  DType = iota // float32, row-major
	Q8_0              // ggml Q8_0: blocks of 32 int8 with one float16 scale
)

func (t DType) String() string {
	switch t {
	case F32:
		return "F32"
	case Q8_0:
		return "Q8_0"
	}
	return fmt.Sprintf("DType(%d)", uint8(t))
}

// Q8BlockSize is the number of weights that share one scale in Q8_0.
const Q8BlockSize = 32

// Mat is a weight matrix of Rows x Cols (row-major: row r holds the weights
// of output r). It is read-only once built and safe for concurrent use.
type Mat struct {
	Type       DType
	Rows, Cols int

	f32 []float32 // F32: Rows*Cols

	// Q8_0, unpacked from ggml's 34-byte blocks so that scales and quants
	// are each contiguous: row r, block b has scale q8d[r*nb+b] and quants
	// q8q[(r*nb+b)*32 : +32].
	q8d []float32
	q8q []int8
}

// NewF32Mat wraps row-major float32 weights (not copied).
func NewF32Mat(rows, cols int, w []float32) (*Mat, error) {
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: F32 matrix %dx%d needs %d values, have %d", rows, cols, rows*cols, len(w))
	}
	return &Mat{Type: F32, Rows: rows, Cols: cols, f32: w}, nil
}

// NewQ8Mat unpacks ggml Q8_0 blocks (per block: float16 scale, then 32
// int8) of a rows x cols matrix. cols must be a multiple of 32.
func NewQ8Mat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%Q8BlockSize != 0 {
		return nil, fmt.Errorf("kernels: Q8_0 matrix %dx%d: columns must be a positive multiple of %d", rows, cols, Q8BlockSize)
	}
	nb := rows * cols / Q8BlockSize
	if len(raw) != nb*(2+Q8BlockSize) {
		return nil, fmt.Errorf("kernels: Q8_0 matrix %dx%d needs %d bytes, have %d", rows, cols, nb*(2+Q8BlockSize), len(raw))
	}
	m := &Mat{Type: Q8_0, Rows: rows, Cols: cols, q8d: make([]float32, nb), q8q: make([]int8, nb*Q8BlockSize)}
	for b := 0; b < nb; b++ {
		blk := raw[b*(2+Q8BlockSize):]
		m.q8d[b] = HalfToFloat(binary.LittleEndian.Uint16(blk))
		for i := 0; i < Q8BlockSize; i++ {
			m.q8q[b*Q8BlockSize+i] = int8(blk[2+i])
		}
	}
	return m, nil
}

// QuantizeQ8 quantizes row-major float32 weights to a Q8_0 matrix the way
// ggml does (scale = max|w|/127, round to nearest).
func QuantizeQ8(rows, cols int, w []float32) (*Mat, error) {
	raw, err := EncodeQ8(rows, cols, w)
	if err != nil {
		return nil, err
	}
	return NewQ8Mat(rows, cols, raw)
}

// EncodeQ8 returns ggml Q8_0 blocks for row-major float32 weights.
func EncodeQ8(rows, cols int, w []float32) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%Q8BlockSize != 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: cannot quantize %d values as a %dx%d Q8_0 matrix", len(w), rows, cols)
	}
	nb := len(w) / Q8BlockSize
	raw := make([]byte, nb*(2+Q8BlockSize))
	for b := 0; b < nb; b++ {
		x := w[b*Q8BlockSize : (b+1)*Q8BlockSize]
		amax := float32(0)
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := raw[b*(2+Q8BlockSize):]
		h := FloatToHalf(d)
		binary.LittleEndian.PutUint16(blk, h)
		for i, v := range x {
			blk[2+i] = byte(int8(math.Round(float64(v * id))))
		}
	}
	return raw, nil
}

// Row returns row r dequantized into dst (len Cols).
func (m *Mat) Row(dst []float32, r int) {
	switch m.Type {
	case F32:
		copy(dst[:m.Cols], m.f32[r*m.Cols:])
	case Q8_0:
		nb := m.Cols / Q8BlockSize
		for b := 0; b < nb; b++ {
			d := m.q8d[r*nb+b]
			q := m.q8q[(r*nb+b)*Q8BlockSize:]
			for i := 0; i < Q8BlockSize; i++ {
				dst[b*Q8BlockSize+i] = d * float32(q[i])
			}
		}
	}
}

// Bytes is the memory the matrix's weights take.
func (m *Mat) Bytes() int64 {
	return int64(len(m.f32))*4 + int64(len(m.q8d))*4 + int64(len(m.q8q))
}

// MatMul computes out[b*Rows+r] = sum_i m[r,i] * x[b*Cols+i] for the n rows
// of x: every weight is read once for the whole batch.
func (m *Mat) MatMul(out, x []float32, n int) {
	if len(x) < n*m.Cols || len(out) < n*m.Rows {
		panic(fmt.Sprintf("kernels: MatMul %dx%d with %d rows: x has %d, out has %d", m.Rows, m.Cols, n, len(x), len(out)))
	}
	switch m.Type {
	case F32:
		matMulF32Go(out, x, m.f32, n, m.Rows, m.Cols)
	case Q8_0:
		matMulQ8Go(out, x, m.q8d, m.q8q, n, m.Rows, m.Cols)
	}
}

func matMulF32Go(out, x, w []float32, n, rows, cols int) {
	for r := 0; r < rows; r++ {
		wr := w[r*cols : (r+1)*cols]
		for b := 0; b < n; b++ {
			out[b*rows+r] = Dot(wr, x[b*cols:(b+1)*cols])
		}
	}
}

func matMulQ8Go(out, x, d []float32, q []int8, n, rows, cols int) {
	nb := cols / Q8BlockSize
	for r := 0; r < rows; r++ {
		for b := 0; b < n; b++ {
			xb := x[b*cols : (b+1)*cols]
			var sum float32
			for k := 0; k < nb; k++ {
				qk := q[(r*nb+k)*Q8BlockSize : (r*nb+k+1)*Q8BlockSize]
				xk := xb[k*Q8BlockSize : (k+1)*Q8BlockSize]
				var s float32
				for i, v := range qk {
					s += float32(v) * xk[i]
				}
				sum += s * d[r*nb+k]
			}
			out[b*rows+r] = sum
		}
	}
}
