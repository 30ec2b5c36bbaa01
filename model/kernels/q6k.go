package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q6_K weights, like Q4_K ones, are kept as the file stores them. A
// super-block holds 256 weights in 210 bytes: 128 bytes of low nibbles
// (ql), 64 of high bit pairs (qh), 16 int8 scales (one per run of 16) and
// float16 d. Weight e = 128h + 32k + l (h < 2, k < 4, l < 32) is
// d*sc[e/16]*(q-32), q's low four bits from ql[64h + 32(k&1) + l] (its
// high nibble for k >= 2), its top two bits 2k and 2k+1 of qh[32h + l].
// With Q8_K activations the dot product of a super-block is
//
//	d_y*d * Σ_g sc_g (Σ_{i in g} q_i*y_i - 32*bsum_g)
const q6kBlockBytes = 210

// Q6_K matrices whose rows are a multiple of 8 are kept, as Q4_K ones,
// in groups of eight rows (the q6k8 layout, the same 1680 bytes as eight
// blocks): per group and super-block the eight rows' float16 d (2r), the
// int8 scales by pairs of runs (pair p at 16+16p, row r's two at 2r), then
// per run g of 16 weights 96 bytes at 144+96g: A and B (bytes 4r..4r+3
// hold the low four bits of row r's weights 4t+i: t = 0 and 1 in A's low
// and high nibbles, 2 and 3 in B's) and H (bits 2t and 2t+1 of byte
// 4r+i: the weight's top two bits).
const (
	q6k8Unit   = 1680
	q6k8Scales = 16
	q6k8Quants = 144
)

// NewQ6KMat is NewQ4KMat for Q6_K super-blocks (repacked into the q6k8
// layout when rows are a multiple of 8, used in place otherwise).
func NewQ6KMat(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ6KMat(rows, cols, raw)
	if err == nil && rows%8 == 0 {
		m.repackK(raw, false, q6kBlockBytes, q6k8Unit, repackQ6K8, q6k16Packer())
	}
	return m, err
}

func newQ6KMat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 {
		return nil, fmt.Errorf("kernels: Q6_K matrix %dx%d: columns must be a positive multiple of %d", rows, cols, QKBlockSize)
	}
	rb := cols / QKBlockSize * q6kBlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q6_K matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	return &Mat{Type: Q6_K, Rows: rows, Cols: cols, kq: raw, kRow: rb}, nil
}

// NewQ6KMatMapped is NewQ4KMatMapped for Q6_K blocks.
func NewQ6KMatMapped(rows, cols int, raw []byte) (*Mat, error) {
	m, err := newQ6KMat(rows, cols, raw)
	if err != nil {
		return nil, err
	}
	if rows%8 == 0 {
		m.repackK(raw, true, q6kBlockBytes, q6k8Unit, repackQ6K8, q6k16Packer())
	} else {
		m.adoptMapped()
	}
	return m, nil
}

// repackQ6K8 writes the q6k8 unit of eight rows' super-blocks, the first
// at src[0:210] and the others stride bytes apart.
func repackQ6K8(dst, src []byte, stride int) {
	var q [QKBlockSize]byte
	for r := range 8 {
		blk := src[r*stride : r*stride+q6kBlockBytes]
		copy(dst[2*r:2*r+2], blk[208:210])
		q6kValues(blk, &q)
		for g := range 16 {
			dst[q6k8Scales+16*(g/2)+2*r+g%2] = blk[192+g]
			u := dst[q6k8Quants+96*g:]
			v := q[16*g : 16*g+16]
			for i := range 4 {
				u[4*r+i] = v[i]&15 | v[4+i]&15<<4
				u[32+4*r+i] = v[8+i]&15 | v[12+i]&15<<4
				u[64+4*r+i] = v[i]>>4 | v[4+i]>>4<<2 | v[8+i]>>4<<4 | v[12+i]>>4<<6
			}
		}
	}
}

// q6kValues sets q to the 6-bit values (0..63) of a block's 256 weights:
// q6kValue for every e, in one pass.
func q6kValues(blk []byte, q *[QKBlockSize]byte) {
	for h := range 2 {
		ql, qh := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32]
		o := q[128*h : 128*h+128]
		for l := range 32 {
			o[l] = ql[l]&15 | qh[l]&3<<4
			o[32+l] = ql[32+l]&15 | qh[l]>>2&3<<4
			o[64+l] = ql[l]>>4 | qh[l]>>4&3<<4
			o[96+l] = ql[32+l]>>4 | qh[l]>>6<<4
		}
	}
}

// q6k8Value returns the 6-bit value (0..63) and the scale of weight e of
// row r of a group's q6k8 unit u.
func q6k8Value(u []byte, r, e int) (q int, sc int8) {
	g, t, i := e/16, e%16/4, e%4
	w := u[q6k8Quants+96*g:]
	lo := w[32*(t/2)+4*r+i] >> (4 * uint(t%2)) & 15
	hi := w[64+4*r+i] >> (2 * uint(t)) & 3
	return int(lo) | int(hi)<<4, int8(u[q6k8Scales+16*(g/2)+2*r+g%2])
}

// q6kValue returns the 6-bit value (0..63) of weight e of a block.
func q6kValue(blk []byte, e int) int {
	h, k, l := e/128, e%128/32, e%32
	ql := blk[64*h+32*(k&1)+l]
	if k >= 2 {
		ql >>= 4
	}
	return int(ql&15) | int(blk[128+32*h+l]>>(2*k)&3)<<4
}

// q6k16Packer returns repackQ6K16 where new Q6_K matrices take the
// q6k16 layout, else nil.
func q6k16Packer() func(dst, src []byte, stride int) {
	if k16Q6() {
		return repackQ6K16
	}
	return nil
}

// q6kRow dequantizes row r into dst.
func (m *Mat) q6kRow(dst []float32, r int) {
	if m.k8 {
		m.q6k8Row(dst, r)
		return
	}
	row := m.kq[r*m.kRow : (r+1)*m.kRow]
	for b := 0; b < m.Cols/QKBlockSize; b++ {
		blk := row[b*q6kBlockBytes:]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk[208:]))
		for e := range QKBlockSize {
			dst[b*QKBlockSize+e] = d * float32(int8(blk[192+e/16])) * float32(q6kValue(blk, e)-32)
		}
	}
}

// q6kDotGo is the Q6_K x Q8_K dot product of one weight row and one
// activation row of nb super-blocks.
func q6kDotGo(w, y []byte, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk, yb := w[b*q6kBlockBytes:], y[b*q8kBlockBytes:]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		d := HalfToFloat(binary.LittleEndian.Uint16(blk[208:])) * dy
		var si int32
		for g := range 16 {
			var s int32
			for e := 16 * g; e < 16*g+16; e++ {
				s += int32(q6kValue(blk, e)) * int32(int8(yb[q8kQuantOff+e]))
			}
			bs := int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+2*g:])))
			si += int32(int8(blk[192+g])) * (s - 32*bs)
		}
		sum += d * float32(si)
	}
	return sum
}

// q6k8DotGo is q6kDotGo for row l of a group in the q6k8 layout, w the
// group's units.
func q6k8DotGo(w []byte, l int, y []byte, nb int) float32 {
	return q6kDotAt(w, l, y, nb, q6k8Unit, q6k8Value)
}

// q6kRowsGo computes output rows [r0, r1) of a Q6_K MatMul.
func q6kRowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	if m.k8 {
		k8RowsGo(out, m, xq, n, r0, r1, q6k8Unit, q6k8DotGo, func(w []byte, l int, y []byte, nb int) float32 {
			return q6kDotAt(w, l, y, nb, q6k16Unit, q6k16Value)
		})
		return
	}
	nb, rb := m.Cols/QKBlockSize, q8kBytes(m.Cols)
	for r := r0; r < r1; r++ {
		w := m.kq[r*m.kRow : (r+1)*m.kRow]
		for j := 0; j < n; j++ {
			out[j*m.Rows+r] = q6kDotGo(w, xq[j*rb:(j+1)*rb], nb)
		}
	}
}

// EncodeQ6K returns Q6_K super-blocks for row-major float32 weights (cols
// a multiple of 256): per run of 16 the scale max|x|/31, the runs' scales
// in int8 against the super-block's float16 d, the values rounded to
// -32..31. A plain quantizer, but a valid Q6_K encoding.
func EncodeQ6K(rows, cols int, w []float32) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: cannot quantize %d values as a %dx%d Q6_K matrix", len(w), rows, cols)
	}
	nb := len(w) / QKBlockSize
	raw := make([]byte, nb*q6kBlockBytes)
	for b := 0; b < nb; b++ {
		x := w[b*QKBlockSize : (b+1)*QKBlockSize]
		o := raw[b*q6kBlockBytes : (b+1)*q6kBlockBytes]
		var scale [16]float32
		var smax float32
		for g := range 16 {
			var amax float32
			for _, v := range x[16*g : 16*g+16] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			scale[g] = amax / 31
			smax = max(smax, scale[g])
		}
		dh := FloatToHalf(smax / 127)
		d := HalfToFloat(dh)
		binary.LittleEndian.PutUint16(o[208:], dh)
		for g := range 16 {
			var sc int8
			if d > 0 {
				sc = int8(min(127, math.Round(float64(scale[g]/d))))
			}
			o[192+g] = byte(sc)
			dq := d * float32(sc)
			for e := 16 * g; e < 16*g+16; e++ {
				q := 32
				if dq > 0 {
					q = 32 + int(min(31, max(-32, math.Round(float64(x[e]/dq)))))
				}
				h, k, l := e/128, e%128/32, e%32
				i := 64*h + 32*(k&1) + l
				if k >= 2 {
					o[i] |= byte(q&15) << 4
				} else {
					o[i] |= byte(q & 15)
				}
				o[128+32*h+l] |= byte(q>>4) << (2 * k)
			}
		}
	}
	return raw, nil
}
