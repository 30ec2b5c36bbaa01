package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q4_0 weights keep their bits too, multiplied by Q8_K activations like
// the K-quants. A Q4_0 block holds 32 weights in 18 bytes: float16 d, then
// 16 bytes of nibbles (weight l in byte l's low nibble, weight l+16 in its
// high one); weight l is d*(q_l - 8).
//
// They are kept in groups of eight rows (rows a multiple of 8, columns of
// 256; the loader re-quantizes other matrices to Q8_0): per group and run
// of 256 columns (eight blocks) a unit of q408Unit bytes, the eight
// blocks' d for the eight rows (block j at 16j, row r at 2r) and then the
// nibbles as the q4k8 layout has them (block j, quarter v at
// 128+128j+32v: bytes 4r..4r+3 hold row r's weights 8v..8v+3 in their low
// nibbles and 8v+4..8v+7 in their high). The same 1152 bytes as the
// sixty-four blocks. With Q8_K activations (d_y per 256, bsum_j per 32)
// a unit's dot product for row r is
//
//	d_y * Σ_j d_j,r * (Σ_{i in j} q_i*y_i - 8*bsum_j)
const (
	q40BlockBytes = 18
	q408Unit      = 1152
	q408Quants    = 128
)

// NewQ40Mat makes a matrix of the Q4_0 blocks of a rows x cols matrix,
// row-major as GGUF stores them, repacked into the q408 layout in weight
// memory (raw is not kept). rows must be a multiple of 8 and cols of 256.
func NewQ40Mat(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ40Mat(rows, cols, raw)
	if err == nil {
		m.repackK(raw, false, 8*q40BlockBytes, q408Unit, repackQ408, repackQ4016)
	}
	return m, err
}

// NewQ40MatMapped is NewQ40Mat for blocks in a read-only file mapping,
// whose pages are released as they are repacked (see NewQ4KMatMapped).
func NewQ40MatMapped(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ40Mat(rows, cols, raw)
	if err == nil {
		m.repackK(raw, true, 8*q40BlockBytes, q408Unit, repackQ408, repackQ4016)
	}
	return m, err
}

func newQ40Mat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || rows%8 != 0 {
		return nil, fmt.Errorf("kernels: Q4_0 matrix %dx%d: rows must be a positive multiple of 8 and columns of %d", rows, cols, QKBlockSize)
	}
	rb := cols / 32 * q40BlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q4_0 matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	return &Mat{Type: Q4_0, Rows: rows, Cols: cols, kRow: rb}, nil
}

// repackQ408 writes the q408 unit of eight rows' runs of eight blocks,
// the first at src[0:144] and the others stride bytes apart.
func repackQ408(dst, src []byte, stride int) {
	for r := range 8 {
		for j := range 8 {
			blk := src[r*stride+j*q40BlockBytes:][:q40BlockBytes]
			copy(dst[16*j+2*r:16*j+2*r+2], blk[0:2])
			for v := range 4 {
				for i := range 4 {
					dst[q408Quants+128*j+32*v+4*r+i] = q40Quant(blk, 8*v+i) | q40Quant(blk, 8*v+4+i)<<4
				}
			}
		}
	}
}

// q40Quant returns quant l (0..15) of a Q4_0 block.
func q40Quant(blk []byte, l int) byte {
	if l < 16 {
		return blk[2+l] & 15
	}
	return blk[2+l-16] >> 4
}

// q408Quant returns row r's quant i of block j from a q408 unit u.
func q408Quant(u []byte, r, j, i int) byte {
	return quarterNibble(u[q408Quants+128*j:], 32, r, i)
}

// q40Row dequantizes row r into dst.
func (m *Mat) q40Row(dst []float32, r int) {
	for b := 0; b < m.Cols/QKBlockSize; b++ {
		u, l, pair := m.kUnit(r, b, q408Unit)
		quant, ds := q408Quant, 16
		if pair {
			quant, ds = q4016Quant, 32
		}
		for j := range 8 {
			d := HalfToFloat(binary.LittleEndian.Uint16(u[ds*j+2*l:]))
			for i := range 32 {
				dst[b*QKBlockSize+32*j+i] = d * float32(int(quant(u, l, j, i))-8)
			}
		}
	}
}

// q408DotGo is the Q4_0 x Q8_K dot product of row l of a group (w its
// units) and one activation row of nb blocks of 256.
func q408DotGo(w []byte, l int, y []byte, nb int) float32 {
	return q40DotAt(w, l, y, nb, q408Unit, 16, q408Quant)
}

// q40RowsGo computes output rows [r0, r1) of a Q4_0 MatMul.
func q40RowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	k8RowsGo(out, m, xq, n, r0, r1, q408Unit, q408DotGo, func(w []byte, l int, y []byte, nb int) float32 {
		return q40DotAt(w, l, y, nb, q4016Unit, 32, q4016Quant)
	})
}

// EncodeQ40 returns Q4_0 blocks for row-major float32 weights (cols a
// multiple of 32), as ggml's reference quantizer makes them: per block d
// = max/-8 with max the value of largest magnitude, q = x/d + 8 rounded
// and clamped to 0..15.
func EncodeQ40(rows, cols int, w []float32) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%32 != 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: cannot quantize %d values as a %dx%d Q4_0 matrix", len(w), rows, cols)
	}
	raw := make([]byte, len(w)/32*q40BlockBytes)
	for b := 0; b < len(w)/32; b++ {
		x := w[32*b : 32*b+32]
		o := raw[b*q40BlockBytes : (b+1)*q40BlockBytes]
		var amax, mx float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		h := FloatToHalf(mx / -8)
		binary.LittleEndian.PutUint16(o, h)
		d := HalfToFloat(h)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for l := range 16 {
			q0 := byte(min(15, max(0, math.Round(float64(x[l]*id)+8))))
			q1 := byte(min(15, max(0, math.Round(float64(x[l+16]*id)+8))))
			o[2+l] = q0 | q1<<4
		}
	}
	return raw, nil
}
