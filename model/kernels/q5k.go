package kernels

import "fmt"

// Q5_K weights are Q4_K ones with a fifth bit: a super-block of 256
// weights in 176 bytes holds float16 d and dmin, the same twelve bytes of
// 6-bit scales and mins, 32 bytes of fifth bits (qh: bit j of qh[l] is
// that of sub-block j's weight l) and 128 bytes of nibbles laid out as
// Q4_K's. Weight l of sub-block j is d*sc_j*q - dmin*m_j with q the
// nibble plus 16 times its fifth bit (0..31).
//
// They are kept in groups of eight rows only (rows a multiple of 8; the
// loader re-quantizes other matrices to Q8_0): the q5k8 layout is q4k8's
// unit (the nibbles' low four bits) followed by the fifth bits, 32 bytes a
// sub-block at q4k8Unit+32j, bits 2v and 2v+1 of byte 4r+i holding those
// of row r's weights 8v+i and 8v+4+i (the nibbles' own places in q4k8):
// 1440 bytes a unit against 8*176, 2.3% more.
const (
	q5kBlockBytes = 176
	q5k8Unit      = q4k8Unit + 256
)

// NewQ5KMat makes a matrix of the Q5_K super-blocks of a rows x cols
// matrix, row-major as GGUF stores them, repacked into the q5k8 layout in
// weight memory (raw is not kept). rows must be a multiple of 8 and cols
// of 256.
func NewQ5KMat(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ5KMat(rows, cols, raw)
	if err == nil {
		m.repackK(raw, false, q5kBlockBytes, q5k8Unit, repackQ5K8, repackQ5K16)
	}
	return m, err
}

// NewQ5KMatMapped is NewQ5KMat for blocks in a read-only file mapping,
// whose pages are released as they are repacked (see NewQ4KMatMapped).
func NewQ5KMatMapped(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ5KMat(rows, cols, raw)
	if err == nil {
		m.repackK(raw, true, q5kBlockBytes, q5k8Unit, repackQ5K8, repackQ5K16)
	}
	return m, err
}

func newQ5KMat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || rows%8 != 0 {
		return nil, fmt.Errorf("kernels: Q5_K matrix %dx%d: rows must be a positive multiple of 8 and columns of %d", rows, cols, QKBlockSize)
	}
	rb := cols / QKBlockSize * q5kBlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q5_K matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	return &Mat{Type: Q5_K, Rows: rows, Cols: cols, kRow: rb}, nil
}

// repackQ5K8 writes the q5k8 unit of eight rows' super-blocks, the first
// at src[0:176] and the others stride bytes apart.
func repackQ5K8(dst, src []byte, stride int) {
	for r := range 8 {
		blk := src[r*stride : r*stride+q5kBlockBytes]
		repackK4(dst, r, blk[:16], blk[48:176])
		qh := blk[16:48]
		for j := range 8 {
			for v := range 4 {
				for i := range 4 {
					lo := qh[8*v+i] >> j & 1
					hi := qh[8*v+4+i] >> j & 1
					dst[q4k8Unit+32*j+4*r+i] |= lo<<(2*v) | hi<<(2*v+1)
				}
			}
		}
	}
}

// q5k8Weight is q4k8Weight for the q5k8 layout: quant i of sub-block j
// with its fifth bit.
func q5k8Weight(u []byte, r, j, i int) (sc, mn byte, q byte) {
	sc, mn, q = q4k8Weight(u, r, j, i)
	return sc, mn, q | fifthBit(u[q4k8Unit+32*j:], r, i)
}

// fifthBit returns the fifth bit, as bit 4, of quant i of row r from its
// sub-block's fifth bits f: bits 2v and 2v+1 of byte 4r+i%4 hold those
// of quarter v's low and high nibbles (the q5k8 and q5k16 layouts).
func fifthBit(f []byte, r, i int) byte {
	return f[4*r+i%4] >> (2*(i/8) + i%8/4) & 1 << 4
}

// q5kRow dequantizes row r into dst.
func (m *Mat) q5kRow(dst []float32, r int) {
	m.k45Row(dst, r, q5k8Unit, q5k8Weight, q5k16Weight)
}

// q5kRowsGo computes output rows [r0, r1) of a Q5_K MatMul.
func q5kRowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	k8RowsGo(out, m, xq, n, r0, r1, q5k8Unit, func(w []byte, l int, y []byte, nb int) float32 {
		return k45DotGo(w, l, y, nb, q5k8Unit, q5k8Weight)
	}, func(w []byte, l int, y []byte, nb int) float32 {
		return k45DotAt(w, l, y, nb, q5k16Unit, q4k16DMin, q5k16Weight)
	})
}

// EncodeQ5K returns Q5_K super-blocks for row-major float32 weights (cols
// a multiple of 256), as EncodeQ4K does with 32 steps a sub-block: a
// plain quantizer, but a valid Q5_K encoding.
func EncodeQ5K(rows, cols int, w []float32) ([]byte, error) {
	return encodeK45Matrix("Q5_K", rows, cols, w, q5kBlockBytes, 31, func(o []byte, q *[QKBlockSize]byte) {
		putNibblesK4(o[48:176], q)
		for j := range 8 {
			for l := range 32 {
				o[16+l] |= q[32*j+l] >> 4 << j
			}
		}
	})
}
