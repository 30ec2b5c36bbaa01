package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q4_K weights are kept as the GGUF file stores them (the caller's bytes,
// typically the file's memory map: nothing is copied), and multiplied by
// activations quantized per row to Q8_K, as llama.cpp does.
//
// A Q4_K super-block holds 256 weights in 144 bytes: float16 d and dmin,
// twelve bytes packing eight 6-bit scales and eight 6-bit mins (one pair
// per sub-block of 32), and 128 bytes of nibbles: each run of 32 bytes
// holds two sub-blocks, low nibbles first. Weight i of sub-block j is
// d*sc_j*q_i - dmin*m_j.
//
// A Q8_K activation block (this package's layout, 292 bytes) holds the
// float32 scale d_y, 256 int8 quants and the 16 int16 sums of their runs
// of 16. Then the dot product of a super-block is
//
//	d_y*d * Σ_j sc_j Σ_{i in j} q_i*y_i  -  d_y*dmin * Σ_j m_j*(bsum_2j + bsum_2j+1)
//
// exact in integers up to the two float products.
const (
	QKBlockSize   = 256 // weights of a K-quant super-block
	q4kBlockBytes = 144
	q8kBlockBytes = 292
	q8kQuantOff   = 4
	q8kSumsOff    = 260
)

// NewQ4KMat wraps the Q4_K super-blocks of a rows x cols matrix, row-major
// as GGUF stores them (not copied: raw must stay valid and unchanged while
// the matrix is used). cols must be a multiple of 256.
func NewQ4KMat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 {
		return nil, fmt.Errorf("kernels: Q4_K matrix %dx%d: columns must be a positive multiple of %d", rows, cols, QKBlockSize)
	}
	rb := cols / QKBlockSize * q4kBlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q4_K matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	return &Mat{Type: Q4_K, Rows: rows, Cols: cols, kq: raw, kRow: rb}, nil
}

// NewQ4KMatMapped is NewQ4KMat for blocks that lie in a read-only file
// mapping (a GGUF file's): where the system has transparent huge pages,
// they are copied into huge-page weight memory a few MiB at a time, each
// piece's pages of the mapping released as soon as it is copied, so that
// the process holds the weights once (the file's size) and the products
// walk 2 MiB pages instead of 4 KiB ones (a Llama-3.2-1B-shape Q4_K_M
// decode step took 11% less time: median of 5 interleaved pairs);
// elsewhere they are used in place. raw must not be Go memory: its pages
// are released.
func NewQ4KMatMapped(rows, cols int, raw []byte) (*Mat, error) {
	m, err := NewQ4KMat(rows, cols, raw)
	if err == nil {
		m.adoptMapped()
	}
	return m, err
}

// adoptMapped moves m's blocks from a file mapping into weight memory
// (see NewQ4KMatMapped).
func (m *Mat) adoptMapped() {
	if !hugePagesOn() || len(m.kq) < weightSmall {
		return
	}
	b, c := weightBytes(len(m.kq))
	const piece = 4 << 20
	for off := 0; off < len(m.kq); off += piece {
		end := min(off+piece, len(m.kq))
		copy(b[off:end], m.kq[off:end])
		releaseMapped(m.kq[off:end])
	}
	m.kq, m.mem = b, c
}

// q4kScaleMin returns the 6-bit scale and min of sub-block j from the
// twelve packed bytes q.
func q4kScaleMin(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | q[j-4]>>6<<4, q[j+4]>>4 | q[j]>>6<<4
}

// q4kRow dequantizes row r into dst.
func (m *Mat) q4kRow(dst []float32, r int) {
	row := m.kq[r*m.kRow : (r+1)*m.kRow]
	for b := 0; b < m.Cols/QKBlockSize; b++ {
		blk := row[b*q4kBlockBytes:]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk))
		dmin := HalfToFloat(binary.LittleEndian.Uint16(blk[2:]))
		o := dst[b*QKBlockSize:]
		for j := range 4 {
			s0, m0 := q4kScaleMin(2*j, blk[4:16])
			s1, m1 := q4kScaleMin(2*j+1, blk[4:16])
			for l, q := range blk[16+32*j : 16+32*j+32] {
				o[64*j+l] = d*float32(s0)*float32(q&15) - dmin*float32(m0)
				o[64*j+32+l] = d*float32(s1)*float32(q>>4) - dmin*float32(m1)
			}
		}
	}
}

// q8kBytes is the size of a Q8_K activation row of cols columns.
func q8kBytes(cols int) int { return cols / QKBlockSize * q8kBlockBytes }

// quantizeQ8KRow quantizes x (a multiple of 256 long) into dst: per block
// d = max|x|/127 and q = round-half-even(x/d), with the sums of its runs
// of 16.
func quantizeQ8KRow(dst []byte, x []float32) {
	for b := 0; b < len(x)/QKBlockSize; b++ {
		xb := x[b*QKBlockSize : (b+1)*QKBlockSize]
		o := dst[b*q8kBlockBytes : (b+1)*q8kBlockBytes]
		var amax float32
		for _, v := range xb {
			amax = max(amax, v, -v)
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint32(o, math.Float32bits(d))
		q := o[q8kQuantOff : q8kQuantOff+QKBlockSize]
		for g := range 16 {
			var s int16
			for i := 16 * g; i < 16*g+16; i++ {
				// Round half to even: |x*id| <= 127 (and the magic
				// constant's addition rounds in float32 as math.RoundToEven
				// would).
				v := int8(int32(math.Float32bits(xb[i]*id+12582912)) - 0x4B400000)
				q[i] = byte(v)
				s += int16(v)
			}
			binary.LittleEndian.PutUint16(o[q8kSumsOff+2*g:], uint16(s))
		}
	}
}

// q4kDotGo is the Q4_K x Q8_K dot product of one weight row and one
// activation row of nb super-blocks.
func q4kDotGo(w, y []byte, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk, yb := w[b*q4kBlockBytes:], y[b*q8kBlockBytes:]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		d := HalfToFloat(binary.LittleEndian.Uint16(blk)) * dy
		dmin := HalfToFloat(binary.LittleEndian.Uint16(blk[2:])) * dy
		var si, mi int32
		for j := range 8 {
			sc, m := q4kScaleMin(j, blk[4:16])
			shift := 4 * uint(j&1)
			qs := blk[16+32*(j/2):]
			var s int32
			for l := range 32 {
				s += int32(qs[l]>>shift&15) * int32(int8(yb[q8kQuantOff+32*j+l]))
			}
			si += int32(sc) * s
			bs := int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+4*j:]))) + int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+4*j+2:])))
			mi += int32(m) * bs
		}
		sum += d*float32(si) - dmin*float32(mi)
	}
	return sum
}

// q4kRowsGo computes output rows [r0, r1) of a Q4_K MatMul from the n
// quantized activation rows xq.
func q4kRowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	nb, rb := m.Cols/QKBlockSize, q8kBytes(m.Cols)
	for r := r0; r < r1; r++ {
		w := m.kq[r*m.kRow : (r+1)*m.kRow]
		for j := 0; j < n; j++ {
			out[j*m.Rows+r] = q4kDotGo(w, xq[j*rb:(j+1)*rb], nb)
		}
	}
}

// kMatMul is MatMulMany for K-quant matrices: x's rows quantized once to
// Q8_K, the weight rows of all the matrices split over the pool.
func kMatMul(j matMulJob) {
	cols := j.m[0].Cols
	s := getQ8Scratch(j.n * q8kBytes(cols))
	s.quantize(j.x, j.n, cols, true)
	j.xq = s.buf
	DefaultPool().matMul(j)
	j.xq = nil
	putQ8Scratch(s)
}

// EncodeQ4K returns Q4_K super-blocks for row-major float32 weights (cols
// a multiple of 256): per sub-block of 32 the range [min(0, min x), max x]
// in 16 steps, the sub-blocks' scales and mins in 6 bits against the
// super-block's float16 d and dmin. A plain quantizer (llama.cpp searches
// for better scales), but a valid Q4_K encoding: tests and generated
// models need nothing downloaded.
func EncodeQ4K(rows, cols int, w []float32) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: cannot quantize %d values as a %dx%d Q4_K matrix", len(w), rows, cols)
	}
	nb := len(w) / QKBlockSize
	raw := make([]byte, nb*q4kBlockBytes)
	for b := 0; b < nb; b++ {
		x := w[b*QKBlockSize : (b+1)*QKBlockSize]
		o := raw[b*q4kBlockBytes : (b+1)*q4kBlockBytes]
		var scale, minv [8]float32
		var dmax, mmax float32
		for j := range 8 {
			lo, hi := float32(0), x[32*j]
			for _, v := range x[32*j : 32*j+32] {
				lo, hi = min(lo, v), max(hi, v)
			}
			scale[j], minv[j] = (hi-lo)/15, -lo
			dmax, mmax = max(dmax, scale[j]), max(mmax, minv[j])
		}
		dh, mh := FloatToHalf(dmax/63), FloatToHalf(mmax/63)
		d, dmin := HalfToFloat(dh), HalfToFloat(mh)
		binary.LittleEndian.PutUint16(o, dh)
		binary.LittleEndian.PutUint16(o[2:], mh)
		var sc, mn [8]byte
		for j := range 8 {
			if d > 0 {
				sc[j] = byte(min(63, math.Round(float64(scale[j]/d))))
			}
			if dmin > 0 {
				mn[j] = byte(min(63, math.Round(float64(minv[j]/dmin))))
			}
		}
		for k := range 4 {
			o[4+k] = sc[k] | sc[k+4]>>4<<6
			o[8+k] = mn[k] | mn[k+4]>>4<<6
			o[12+k] = sc[k+4]&15 | mn[k+4]&15<<4
		}
		for j := range 8 {
			dq, mq := d*float32(sc[j]), dmin*float32(mn[j])
			shift := 4 * uint(j&1)
			qs := o[16+32*(j/2):]
			for l, v := range x[32*j : 32*j+32] {
				var q float64
				if dq > 0 {
					q = min(15, max(0, math.Round(float64((v+mq)/dq))))
				}
				qs[l] |= byte(q) << shift
			}
		}
	}
	return raw, nil
}
