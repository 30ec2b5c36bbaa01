package kernels

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"
)

// Q8_0 products follow llama.cpp: each activation row is quantized once per
// MatMul to int8 blocks of 32 with one float32 scale per block, and every
// weight block times activation block is an exact integer dot product
// scaled by the two block scales.
//
// # Layout
//
// The weight rows are stored in panels of 16, the way a GEMM packs its
// operands. A panel holds, for each block of 32 columns, 512 bytes of
// quants: 8 vectors of 64 bytes, in vector k 32-bit lane l holding bytes
// 4k..4k+3 of row l's block, biased to uint8 (q+128) so that they can be
// VPDPBUSD's unsigned operand. After the quants come the scales: per
// block 32 bytes, the 16 rows' float16 scales as GGUF stores them, padded
// to a whole cache line. A panel is q8Stride bytes: 1.0625 bytes a weight,
// as in the file. The last panel is padded with rows of scale 0 and quants
// 128 (zero).
//
// This serves AVX-512 VNNI: VPDPBUSD multiplies 64 unsigned bytes by 64
// signed bytes and adds each group of 4 products into one of 16 int32
// lanes. With a broadcast of 4 activation quants as the signed operand,
// lane l sums row l: eight VPDPBUSDs make a panel's 16 block sums, which
// three instructions convert, scale (the 16 weight scales, widened once
// per block and panel, times the activation's scale) and add into 16
// float accumulators. No horizontal sums are needed, and a tile of 2
// panels and 6 activation rows keeps 24 sums in registers: 96 VPDPBUSDs
// per block against 38 other vector instructions.
//
// Activations are quantized into a scratch buffer, per row and block 40
// bytes: the 32 int8 quants, the float32 scale and an int32 correction,
// -128 times the sum of the quants. A sum that starts from the correction
// cancels the weights' bias exactly: sum (q_w+128)*q_x - 128*sum q_x =
// sum q_w*q_x. Scratch buffers come from a sync.Pool, so MatMul allocates
// nothing once warm.
const (
	q8PanelRows  = 16
	q8PanelBlock = 512 // quant bytes per panel and block
	q8ScaleBlock = 32  // scale bytes per panel and block
	q8XBlock     = 40  // activation bytes per block
	q8XScaleOff  = 32
	q8XCorrOff   = 36
)

// q8PanelBytes is the size of a panel of rows of nb blocks.
func q8PanelBytes(nb int) int { return nb*q8PanelBlock + (nb*q8ScaleBlock+63)&^63 }

// q8XBytes is the size of a quantized activation row of cols columns.
func q8XBytes(cols int) int { return cols / Q8BlockSize * q8XBlock }

// q8QuantOff is the offset, in a panel block, of quant e of lane (row) l.
func q8QuantOff(l, e int) int { return e/4*64 + 4*l + e%4 }

// q8RawBlock is the size of a ggml Q8_0 block: a float16 scale, then 32
// int8 quants.
const q8RawBlock = 2 + Q8BlockSize

// newQ8Mat allocates a Q8_0 matrix whose panels packQ8Panels fills.
func newQ8Mat(rows, cols int) *Mat {
	nb := cols / Q8BlockSize
	m := &Mat{Type: Q8_0, Rows: rows, Cols: cols, q8Panels: (rows + q8PanelRows - 1) / q8PanelRows, q8Stride: q8PanelBytes(nb)}
	m.q8q, m.mem = weightBytes(m.q8Panels * m.q8Stride)
	return m
}

// packQ8Panels fills panels [p0, p1) of m from the row-major ggml Q8_0
// blocks raw, which start at row r0 of the matrix: each row's quants biased into its lane (4 bytes a vector),
// its float16 scales copied as stored; the lanes past m.Rows get quants
// 128 (zero) and scale 0.
func (m *Mat) packQ8Panels(raw []byte, r0, p0, p1 int) {
	nb := m.Cols / Q8BlockSize
	rowBytes := nb * q8RawBlock
	for p := p0; p < p1; p++ {
		panel := m.q8q[p*m.q8Stride : (p+1)*m.q8Stride]
		scales := panel[nb*q8PanelBlock:]
		for l := range q8PanelRows {
			r := p*q8PanelRows + l
			if r >= m.Rows {
				for b := range nb {
					for k := range q8PanelBlock / 64 {
						binary.LittleEndian.PutUint32(panel[b*q8PanelBlock+64*k+4*l:], 0x80808080)
					}
				}
				continue
			}
			src := raw[(r-r0)*rowBytes : (r-r0+1)*rowBytes]
			for b := range nb {
				s := src[b*q8RawBlock : (b+1)*q8RawBlock]
				copy(scales[b*q8ScaleBlock+2*l:][:2], s[:2])
				dst := panel[b*q8PanelBlock+4*l:]
				_ = dst[64*7+3]
				for k := range 8 {
					binary.LittleEndian.PutUint32(dst[64*k:], binary.LittleEndian.Uint32(s[2+4*k:])^0x80808080)
				}
			}
		}
	}
}

// q8Block returns the quants of block b of row r's panel, and r's lane.
func (m *Mat) q8Block(r, b int) (blk []byte, l int) {
	off := r/q8PanelRows*m.q8Stride + b*q8PanelBlock
	return m.q8q[off : off+q8PanelBlock : off+q8PanelBlock], r % q8PanelRows
}

// q8ScaleAt is the offset in m.q8q of the float16 scale of block b of row r.
func (m *Mat) q8ScaleAt(r, b int) int {
	nb := m.Cols / Q8BlockSize
	return r/q8PanelRows*m.q8Stride + nb*q8PanelBlock + b*q8ScaleBlock + 2*(r%q8PanelRows)
}

// q8Scale returns the scale of block b of row r.
func (m *Mat) q8Scale(r, b int) float32 {
	return HalfToFloat(binary.LittleEndian.Uint16(m.q8q[m.q8ScaleAt(r, b):]))
}

func getF32(b []byte, off int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
}

func putF32(b []byte, off int, v float32) {
	binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v))
}

// alignedBytes returns a zeroed slice of n bytes starting on a 64-byte
// boundary (one cache line, one ZMM load).
func alignedBytes(n int) []byte {
	b := make([]byte, n+63)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n : off+n]
}

type q8Scratch struct {
	buf, mem []byte
	quant    quantTask // the pool's task when the rows are quantized in parallel
}

// quantTask quantizes rows [lo, hi) of x (cols wide) into buf: for Q8_0
// products, or with k for K-quant ones (Q8_K).
type quantTask struct {
	buf  []byte
	x    []float32
	cols int
	k    bool
}

func (t *quantTask) Run(lo, hi int) {
	if t.k {
		rb := q8kBytes(t.cols)
		for i := lo; i < hi; i++ {
			quantizeQ8K(t.buf[i*rb:(i+1)*rb], t.x[i*t.cols:(i+1)*t.cols])
		}
		return
	}
	rb := q8XBytes(t.cols)
	quantizeQ8Rows(t.buf[lo*rb:hi*rb], t.x[lo*t.cols:hi*t.cols], hi-lo, t.cols)
}

// parallelQuantRows is the batch from which MatMul quantizes its rows on
// the pool's threads: 16 rows of 2048 take some 10 us on one.
const parallelQuantRows = 8

// quantize fills s.buf with the n quantized rows of x (Q8_K with k), on
// the pool's threads for many rows. The task lives in the pooled scratch,
// so that handing it to the pool allocates nothing.
func (s *q8Scratch) quantize(x []float32, n, cols int, k bool) {
	s.quant = quantTask{buf: s.buf, x: x, cols: cols, k: k}
	if n < parallelQuantRows {
		s.quant.Run(0, n)
	} else {
		DefaultPool().RunTask(n, &s.quant)
	}
	s.quant = quantTask{}
}

var q8Scratches = sync.Pool{New: func() any { return new(q8Scratch) }}

// getQ8Scratch returns a scratch buffer of n bytes (contents undefined).
func getQ8Scratch(n int) *q8Scratch {
	s := q8Scratches.Get().(*q8Scratch)
	if cap(s.mem) < n {
		s.mem = alignedBytes(n)
	}
	s.buf = s.mem[:n]
	return s
}

func putQ8Scratch(s *q8Scratch) {
	s.buf = nil
	q8Scratches.Put(s)
}

// quantizeQ8RowGo quantizes one activation row into its scratch row. It
// defines the rounding the assembly reproduces bit for bit: d =
// max|x|/127 and q = round-half-even(x * (1/d)), in float32.
func quantizeQ8RowGo(dst []byte, x []float32) {
	for b := 0; b < len(x)/Q8BlockSize; b++ {
		xb := x[b*Q8BlockSize : (b+1)*Q8BlockSize]
		blk := dst[b*q8XBlock : (b+1)*q8XBlock]
		amax := float32(0)
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		var sum int32
		for e, v := range xb {
			q := int8(math.RoundToEven(float64(v * id)))
			blk[e] = byte(q)
			sum += int32(q)
		}
		putF32(blk, q8XScaleOff, d)
		binary.LittleEndian.PutUint32(blk[q8XCorrOff:], uint32(-128*sum))
	}
}

// quantizeQ8RowsGo quantizes n rows of cols (a multiple of 32) values.
func quantizeQ8RowsGo(dst []byte, x []float32, n, cols int) {
	rb := q8XBytes(cols)
	for b := 0; b < n; b++ {
		quantizeQ8RowGo(dst[b*rb:(b+1)*rb], x[b*cols:(b+1)*cols])
	}
}

// q8RowsGo computes output rows [r0, r1) of a Q8_0 MatMul in pure Go from
// quantized activations xq. Blocks are visited in order and each adds
// float32(int dot) * (weight scale * activation scale), as the assembly
// does lane by lane.
func q8RowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	nb := m.Cols / Q8BlockSize
	rb := q8XBytes(m.Cols)
	for r := r0; r < r1; r++ {
		for j := 0; j < n; j++ {
			xr := xq[j*rb : (j+1)*rb]
			var sum float32
			for b := 0; b < nb; b++ {
				blk, l := m.q8Block(r, b)
				xb := xr[b*q8XBlock : (b+1)*q8XBlock]
				var s int32
				for e := 0; e < Q8BlockSize; e++ {
					s += int32(int8(blk[q8QuantOff(l, e)]^0x80)) * int32(int8(xb[e]))
				}
				sum += float32(s) * (m.q8Scale(r, b) * getF32(xb, q8XScaleOff))
			}
			out[j*m.Rows+r] = sum
		}
	}
}
