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
// A Q8_K activation block (this package's layout, 580 bytes) holds the
// float32 scale d_y, 256 int8 quants, the 16 int16 sums of their runs of
// 16 and the 8 int32 sums of their runs of 32, then what the AVX-512
// VNNI tiles of the 16-row layouts (k16.go) take from memory as they are:
// the runs of 32's sums times -8 (int32), the same sums as int16 and
// times 8 as int16, the sums of the runs of 8 times -32 (int32) and those
// of the runs of 16 times -16 (int32).
// Then the dot product of a super-block is
//
//	d_y*d * Σ_j sc_j Σ_{i in j} q_i*y_i  -  d_y*dmin * Σ_j m_j*(bsum_2j + bsum_2j+1)
//
// exact in integers up to the two float products.
const (
	QKBlockSize   = 256 // weights of a K-quant super-block
	q4kBlockBytes = 144
	q8kBlockBytes = 580
	q8kQuantOff   = 4
	q8kSumsOff    = 260
	q8kSubSumsOff = 292 // 8 int32: the sums of the quants' runs of 32 (for Q4_0)
	q8kNeg8Off    = 324 // 8 int32: -8 times the runs of 32's sums
	q8kSub16Off   = 356 // 8 int16: the runs of 32's sums
	q8kSub16x8Off = 372 // 8 int16: 8 times the runs of 32's sums
	q8kNeg32Off   = 388 // 32 int32: -32 times the runs of 8's sums
	q8kNeg16Off   = 516 // 16 int32: -16 times the runs of 16's sums
)

// Q4_K matrices whose rows are a multiple of 8 are kept in groups of
// eight rows (the q4k8 layout): per group and super-block a unit of
// q4k8Unit bytes with the eight rows' float16 d (2r), their float16 dmin
// (16+2r), the 6-bit scales a byte each (sub-block j, row r at 32+8j+r),
// the mins paired by sub-block (96+16p+2r+(j&1) for j = 2p or 2p+1), then
// the nibbles, 128 bytes a sub-block: for quarter v of sub-block j the 32
// bytes at 160+128j+32v, bytes 4r..4r+3 holding the row's weights 8v..8v+3
// in their low nibbles and 8v+4..8v+7 in their high. The same bits as
// the file's blocks (1184 bytes against 8*144: 2.8% more, the scales and
// mins a byte each), laid out so that one vector lane is one row: four
// activation quants broadcast to all lanes meet four weights of eight rows
// in one instruction, and the eight results come out in eight lanes with
// no sums across lanes (ik_llama.cpp's row-interleaved repacking is the
// same idea). The unpacking of the scales, once per row and super-block
// in the file's layout, is done once at load.
const (
	q4k8Unit   = 1184
	q4k8Mins   = 96
	q4k8Scales = 32
	q4k8Quants = 160
)

// NewQ4KMat makes a matrix of the Q4_K super-blocks of a rows x cols
// matrix, row-major as GGUF stores them. cols must be a multiple of 256.
// With rows a multiple of 8 the blocks are copied into the q4k8 layout in
// weight memory (raw is not kept); otherwise they are used in place (not
// copied: raw must stay valid and unchanged while the matrix is used).
func NewQ4KMat(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 {
		return nil, fmt.Errorf("kernels: Q4_K matrix %dx%d: columns must be a positive multiple of %d", rows, cols, QKBlockSize)
	}
	rb := cols / QKBlockSize * q4kBlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q4_K matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	m := &Mat{Type: Q4_K, Rows: rows, Cols: cols, kq: raw, kRow: rb}
	if rows%8 == 0 {
		m.repackK(raw, false, q4kBlockBytes, q4k8Unit, repackQ4K8, repackQ4K16)
	}
	return m, nil
}

// NewQ4KMatMapped is NewQ4KMat for blocks that lie in a read-only file
// mapping (a GGUF file's): as the blocks are repacked, a few MiB at a
// time, each piece's pages of the mapping are released, so that the
// process holds the weights once (the file's size and 2.8%); the weight
// memory has transparent huge pages where the system offers them (a
// Llama-3.2-1B-shape decode step took 11% less time with them than in
// the mapping's 4 KiB pages: median of 5 interleaved pairs). Where rows
// are not a multiple of 8 the blocks are moved unchanged the same way,
// with huge pages, or used in the mapping without. raw must not be Go
// memory: its pages are released.
func NewQ4KMatMapped(rows, cols int, raw []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || rows%8 != 0 {
		m, err := NewQ4KMat(rows, cols, raw)
		if err == nil {
			m.adoptMapped()
		}
		return m, err
	}
	rb := cols / QKBlockSize * q4kBlockBytes
	if len(raw)/rb != rows || len(raw) != rows*rb {
		return nil, fmt.Errorf("kernels: Q4_K matrix %dx%d needs %d bytes, have %d", rows, cols, rows*rb, len(raw))
	}
	m := &Mat{Type: Q4_K, Rows: rows, Cols: cols, kRow: rb}
	m.repackK(raw, true, q4kBlockBytes, q4k8Unit, repackQ4K8, repackQ4K16)
	return m, nil
}

// repackK puts the row-major super-blocks raw (blk bytes each) into m.kq
// in groups of eight rows, unit bytes per group and super-block, each
// unit written by pack from the eight rows' blocks (the first at src[0:],
// the others stride bytes apart); or, with pack16 not nil and useK16
// set, in the 16-row layout: pairs of groups in units of 2*unit bytes
// written by pack16 from sixteen rows' blocks, a last group of eight by
// pack. raw's pages are released as it goes when release is set.
func (m *Mat) repackK(raw []byte, release bool, blk, unit int, pack, pack16 func(dst, src []byte, stride int)) {
	nb := m.Cols / QKBlockSize
	group := 8 * m.kRow // source bytes of a group
	m.kq, m.mem = weightBytes(m.Rows / 8 * nb * unit)
	m.k8 = true
	m.k16 = pack16 != nil && useK16
	const piece = 4 << 20
	per := max(2, piece/group&^1) // groups a piece, pairs whole
	for g0 := 0; g0 < m.Rows/8; g0 += per {
		g1 := min(m.Rows/8, g0+per)
		// The piece's groups on the kernel threads: a 1B model's 800 MB
		// take seconds on one.
		if !m.k16 {
			Parallel(g1-g0, func(lo, hi int) {
				for g := g0 + lo; g < g0+hi; g++ {
					for b := 0; b < nb; b++ {
						pack(m.kq[(g*nb+b)*unit:][:unit], raw[g*group+b*blk:], m.kRow)
					}
				}
			})
		} else {
			Parallel((g1-g0+1)/2, func(lo, hi int) {
				for g := g0 + 2*lo; g < min(g1, g0+2*hi); g += 2 {
					for b := 0; b < nb; b++ {
						if g+1 < m.Rows/8 {
							pack16(m.kq[(g*nb+2*b)*unit:][:2*unit], raw[g*group+b*blk:], m.kRow)
						} else {
							pack(m.kq[(g*nb+b)*unit:][:unit], raw[g*group+b*blk:], m.kRow)
						}
					}
				}
			})
		}
		if release {
			releaseMapped(raw[g0*group : g1*group])
		}
	}
}

// repackQ4K8 writes the q4k8 unit of eight rows' super-blocks, the first
// at src[0:144] and the others stride bytes apart.
func repackQ4K8(dst, src []byte, stride int) {
	for r := range 8 {
		blk := src[r*stride : r*stride+q4kBlockBytes]
		repackK4(dst, r, blk[:16], blk[16:144])
	}
}

// repackK4 writes row r's part of a q4k8 unit: from the header h (d, dmin,
// the packed scales and mins) and the 128 bytes of nibbles qs of a Q4_K
// or Q5_K super-block.
func repackK4(dst []byte, r int, h, qs []byte) {
	copy(dst[2*r:2*r+2], h[0:2])
	copy(dst[16+2*r:16+2*r+2], h[2:4])
	for j := range 8 {
		sc, mn := q4kScaleMin(j, h[4:16])
		dst[q4k8Scales+8*j+r] = sc
		dst[q4k8Mins+16*(j/2)+2*r+j&1] = mn
	}
	// Each 32 bytes of nibbles hold sub-blocks 2jp (low nibbles) and
	// 2jp+1 (high ones).
	for jp := range 4 {
		q := qs[32*jp : 32*jp+32]
		lo := dst[q4k8Quants+128*(2*jp)+4*r:]
		hi := dst[q4k8Quants+128*(2*jp+1)+4*r:]
		for v := range 4 {
			a := q[8*v : 8*v+8]
			l, h := lo[32*v:32*v+4], hi[32*v:32*v+4]
			for i := range 4 {
				l[i] = a[i]&15 | a[4+i]<<4
				h[i] = a[i]>>4 | a[4+i]&0xF0
			}
		}
	}
}

// q4k8Weight returns row r%8's scale, min, d, dmin and quant i of
// sub-block j from its group's unit u.
func q4k8Weight(u []byte, r, j, i int) (sc, mn byte, q byte) {
	sc = u[q4k8Scales+8*j+r]
	mn = u[q4k8Mins+16*(j/2)+2*r+j&1]
	return sc, mn, quarterNibble(u[q4k8Quants+128*j:], 32, r, i)
}

// quarterNibble returns quant i (0..31) of row r of a sub-block (or
// block) whose quarters lie qs bytes apart from q: in quarter i/8 the
// row's four bytes at 4r, the quants 8v..8v+3 in their low nibbles,
// 8v+4..8v+7 in their high ones (every eight- and 16-row layout).
func quarterNibble(q []byte, qs, r, i int) byte {
	b := q[qs*(i/8)+4*r+i%4]
	if i%8 < 4 {
		return b & 15
	}
	return b >> 4
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
	if m.k8 {
		m.k45Row(dst, r, q4k8Unit, q4k8Weight, q4k16Weight)
		return
	}
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
// of 16 and of 32.
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
			binary.LittleEndian.PutUint32(o[q8kNeg16Off+4*g:], uint32(-16*int32(s)))
		}
		for j := range 8 {
			s := int32(int16(binary.LittleEndian.Uint16(o[q8kSumsOff+4*j:]))) + int32(int16(binary.LittleEndian.Uint16(o[q8kSumsOff+4*j+2:])))
			binary.LittleEndian.PutUint32(o[q8kSubSumsOff+4*j:], uint32(s))
			binary.LittleEndian.PutUint32(o[q8kNeg8Off+4*j:], uint32(-8*s))
			binary.LittleEndian.PutUint16(o[q8kSub16Off+2*j:], uint16(s))
			binary.LittleEndian.PutUint16(o[q8kSub16x8Off+2*j:], uint16(8*s))
		}
		for r := range 32 {
			var s int32
			for _, v := range q[8*r : 8*r+8] {
				s += int32(int8(v))
			}
			binary.LittleEndian.PutUint32(o[q8kNeg32Off+4*r:], uint32(-32*s))
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

// k45DotGo is q4kDotGo for row l of a group in the q4k8 or q5k8 layout
// (unit bytes a unit, weight its accessor), w the group's units.
func k45DotGo(w []byte, l int, y []byte, nb, unit int, weight func(u []byte, r, j, i int) (sc, mn, q byte)) float32 {
	return k45DotAt(w, l, y, nb, unit, 16, weight)
}

// k8RowsGo computes output rows [r0, r1) (multiples of 8) of a MatMul of
// a matrix in an eight-row layout (unit bytes per group and 256 columns)
// or a 16-row one (twice that per pair), with dot8 and dot16 the
// layouts' dot products of row l of a group or pair (w its units).
func k8RowsGo(out []float32, m *Mat, xq []byte, n, r0, r1, unit int, dot8, dot16 func(w []byte, l int, y []byte, nb int) float32) {
	nb, rb := m.Cols/QKBlockSize, q8kBytes(m.Cols)
	for r := r0; r < r1; r++ {
		u, l, pair := m.kUnit(r, 0, unit)
		dot, g := dot8, unit
		if pair {
			dot, g = dot16, 2*unit
		}
		w := u[: nb*g : nb*g]
		for j := 0; j < n; j++ {
			out[j*m.Rows+r] = dot(w, l, xq[j*rb:(j+1)*rb], nb)
		}
	}
}

// q4kRowsGo computes output rows [r0, r1) of a Q4_K MatMul from the n
// quantized activation rows xq.
func q4kRowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	if m.k8 {
		k8RowsGo(out, m, xq, n, r0, r1, q4k8Unit, func(w []byte, l int, y []byte, nb int) float32 {
			return k45DotGo(w, l, y, nb, q4k8Unit, q4k8Weight)
		}, func(w []byte, l int, y []byte, nb int) float32 {
			return k45DotAt(w, l, y, nb, q4k16Unit, q4k16DMin, q4k16Weight)
		})
		return
	}
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
	matMul(j)
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
	return encodeK45Matrix("Q4_K", rows, cols, w, q4kBlockBytes, 15, func(o []byte, q *[QKBlockSize]byte) {
		putNibblesK4(o[16:144], q)
	})
}

// encodeK45Matrix quantizes the rows x cols weights w (cols a multiple of
// 256) to typ's super-blocks of blockBytes: encodeK45's header and quants
// (0..top), which place stores in the block.
func encodeK45Matrix(typ string, rows, cols int, w []float32, blockBytes int, top float32, place func(o []byte, q *[QKBlockSize]byte)) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%QKBlockSize != 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: cannot quantize %d values as a %dx%d %s matrix", len(w), rows, cols, typ)
	}
	nb := len(w) / QKBlockSize
	raw := make([]byte, nb*blockBytes)
	for b := 0; b < nb; b++ {
		o := raw[b*blockBytes : (b+1)*blockBytes]
		q := encodeK45(o[:16], w[b*QKBlockSize:(b+1)*QKBlockSize], top)
		place(o, &q)
	}
	return raw, nil
}

// putNibblesK4 stores the low four bits of a super-block's quants in the
// 128 bytes qs as Q4_K and Q5_K lay them out: each run of 32 bytes holds
// two sub-blocks, low nibbles first.
func putNibblesK4(qs []byte, q *[QKBlockSize]byte) {
	for j := range 8 {
		for l := range 32 {
			qs[32*(j/2)+l] |= q[32*j+l] & 15 << (4 * uint(j&1))
		}
	}
}

// encodeK45 quantizes the 256 weights x of a Q4_K (top 15) or Q5_K (top
// 31) super-block: per sub-block of 32 the range [min(0, min x), max x]
// in top steps, the sub-blocks' scales and mins in 6 bits against the
// float16 d and dmin it writes with them into the header h (16 bytes). It
// returns the quants, 0..top.
func encodeK45(h []byte, x []float32, top float32) [QKBlockSize]byte {
	var scale, minv [8]float32
	var dmax, mmax float32
	for j := range 8 {
		lo, hi := float32(0), x[32*j]
		for _, v := range x[32*j : 32*j+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		scale[j], minv[j] = (hi-lo)/top, -lo
		dmax, mmax = max(dmax, scale[j]), max(mmax, minv[j])
	}
	dh, mh := FloatToHalf(dmax/63), FloatToHalf(mmax/63)
	d, dmin := HalfToFloat(dh), HalfToFloat(mh)
	binary.LittleEndian.PutUint16(h, dh)
	binary.LittleEndian.PutUint16(h[2:], mh)
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
		h[4+k] = sc[k] | sc[k+4]>>4<<6
		h[8+k] = mn[k] | mn[k+4]>>4<<6
		h[12+k] = sc[k+4]&15 | mn[k+4]&15<<4
	}
	var q [QKBlockSize]byte
	for j := range 8 {
		dq, mq := d*float32(sc[j]), dmin*float32(mn[j])
		for l, v := range x[32*j : 32*j+32] {
			if dq > 0 {
				q[32*j+l] = byte(min(float64(top), max(0, math.Round(float64((v+mq)/dq)))))
			}
		}
	}
	return q
}
