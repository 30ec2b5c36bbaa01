package kernels

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// DType is the storage type of a weight matrix.
type DType uint8

const (
	F32  DType = iota // float32, row-major
	Q8_0              // ggml Q8_0: blocks of 32 int8 with one float16 scale
	Q4_K              // ggml Q4_K: super-blocks of 256 4-bit weights (q4k.go), as stored
	Q6_K              // ggml Q6_K: super-blocks of 256 6-bit weights (q6k.go), as stored
	Q5_K              // ggml Q5_K: super-blocks of 256 5-bit weights (q5k.go), as stored
	Q4_0              // ggml Q4_0: blocks of 32 4-bit weights with a float16 scale (q40.go), as stored
	F16               // IEEE float16, row-major, as stored (halfmat.go)
	BF16              // bfloat16, row-major, as stored (halfmat.go)
)

func (t DType) String() string {
	switch t {
	case F32:
		return "F32"
	case Q8_0:
		return "Q8_0"
	case Q4_K:
		return "Q4_K"
	case Q6_K:
		return "Q6_K"
	case Q5_K:
		return "Q5_K"
	case Q4_0:
		return "Q4_0"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("DType(%d)", uint8(t))
}

// SameActs reports whether products with matrices of types a and b take
// their activations in the same form, so that one MatMulMany serves both:
// the same type, or two of Q4_K, Q5_K, Q6_K and Q4_0 (activations in
// Q8_K), or two of F32, F16 and BF16 (float activations).
func SameActs(a, b DType) bool {
	k := func(t DType) bool { return t == Q4_K || t == Q5_K || t == Q6_K || t == Q4_0 }
	f := func(t DType) bool { return t == F32 || t == F16 || t == BF16 }
	return a == b || k(a) && k(b) || f(a) && f(b)
}

// Q8BlockSize is the number of weights that share one scale in Q8_0.
const Q8BlockSize = 32

// Mat is a weight matrix of Rows x Cols (row-major: row r holds the weights
// of output r). It is read-only once built and safe for concurrent use.
//
// F32 weights are the caller's slice, row-major. Q8_0 weights are unpacked
// from ggml's 34-byte blocks into a layout the kernels stream directly (see
// q8.go): panels of 16 rows whose quants, biased to uint8 (q+128), are
// interleaved 4 bytes per row for VNNI, followed by the rows' float16
// block scales.
type Mat struct {
	Type       DType
	Rows, Cols int

	f32  []float32 // F32: Rows*Cols
	half []uint16  // F16, BF16: Rows*Cols

	// Q8_0 (layout in q8.go): panel p (rows 16p..16p+15) is
	// q8q[p*q8Stride:][:q8Stride].
	q8q      []uint8
	q8Panels int
	q8Stride int // bytes per panel

	mem *weightChunk // the memory q8q lies in (weightmem.go)

	// K-quants (Q4_K, Q5_K, Q6_K): the GGUF super-blocks, row-major, kRow
	// bytes a row; with k8 in groups of eight rows (the q4k8, q5k8 and
	// q6k8 layouts: q4k.go, q5k.go, q6k.go), kRow still the file's bytes
	// a row.
	kq   []byte
	kRow int
	k8   bool
	k16  bool // Q4_K, Q6_K with k8: in pairs of groups (k16.go)
}

// NewF32Mat wraps row-major float32 weights (not copied).
func NewF32Mat(rows, cols int, w []float32) (*Mat, error) {
	if rows <= 0 || cols <= 0 || len(w)/cols != rows || len(w) != rows*cols {
		return nil, fmt.Errorf("kernels: F32 matrix %dx%d needs %d values, have %d", rows, cols, rows*cols, len(w))
	}
	return &Mat{Type: F32, Rows: rows, Cols: cols, f32: w}, nil
}

// NewQ8Mat unpacks ggml Q8_0 blocks (per block: float16 scale, then 32
// int8) of a rows x cols matrix. cols must be a multiple of 32.
func NewQ8Mat(rows, cols int, raw []byte) (*Mat, error) {
	return newQ8MatFrom(rows, cols, raw, false)
}

// NewQ8MatMapped is NewQ8Mat for blocks in a read-only file mapping (a
// GGUF file's): the panels are unpacked a few MiB of blocks at a time on
// the kernel threads, and each piece's pages of the mapping are released
// once unpacked, so that the process holds the weights once (the file's
// size: the panels take as many bytes as the blocks). raw must not be Go
// memory that is used afterwards: its pages are released.
func NewQ8MatMapped(rows, cols int, raw []byte) (*Mat, error) {
	return newQ8MatFrom(rows, cols, raw, true)
}

func newQ8MatFrom(rows, cols int, raw []byte, release bool) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%Q8BlockSize != 0 {
		return nil, fmt.Errorf("kernels: Q8_0 matrix %dx%d: columns must be a positive multiple of %d", rows, cols, Q8BlockSize)
	}
	nb := cols / Q8BlockSize // blocks per row
	if len(raw)/q8RawBlock/nb != rows || len(raw) != rows*nb*q8RawBlock {
		return nil, fmt.Errorf("kernels: Q8_0 matrix %dx%d needs %d bytes, have %d", rows, cols, rows*nb*q8RawBlock, len(raw))
	}
	m := newQ8Mat(rows, cols)
	panelRaw := q8PanelRows * nb * q8RawBlock // source bytes of a whole panel
	const piece = 4 << 20
	per := max(1, piece/panelRaw) // panels a piece
	for p0 := 0; p0 < m.q8Panels; p0 += per {
		p1 := min(m.q8Panels, p0+per)
		if (p1-p0)*panelRaw >= 1<<20 {
			Parallel(p1-p0, func(lo, hi int) { m.packQ8Panels(raw, 0, p0+lo, p0+hi) })
		} else {
			m.packQ8Panels(raw, 0, p0, p1)
		}
		if release {
			releaseMapped(raw[min(len(raw), p0*panelRaw):min(len(raw), p1*panelRaw)])
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

// QuantizeQ8Mapped is QuantizeQ8 for a matrix of another type, stored as
// rowBytes bytes a row in raw (a read-only file mapping) and widened to
// float32 by dequant (dst holds as many rows as src): a panel of rows at
// a time on the kernel threads, so that no more than a few panels are
// ever float32, each piece's pages of the mapping released once read.
// The result is QuantizeQ8's, bit for bit. raw must not be Go memory that
// is used afterwards.
func QuantizeQ8Mapped(rows, cols, rowBytes int, raw []byte, dequant func(dst []float32, src []byte) error) (*Mat, error) {
	if rows <= 0 || cols <= 0 || cols%Q8BlockSize != 0 || rowBytes <= 0 || len(raw)/rowBytes != rows || len(raw) != rows*rowBytes {
		return nil, fmt.Errorf("kernels: cannot quantize %d bytes as a %dx%d Q8_0 matrix of %d bytes a row", len(raw), rows, cols, rowBytes)
	}
	m := newQ8Mat(rows, cols)
	panelRaw := q8PanelRows * rowBytes
	const piece = 4 << 20
	per := max(1, piece/panelRaw)
	var mu sync.Mutex
	var first error
	for p0 := 0; p0 < m.q8Panels; p0 += per {
		p1 := min(m.q8Panels, p0+per)
		Parallel(p1-p0, func(lo, hi int) {
			w := make([]float32, q8PanelRows*cols)
			for p := p0 + lo; p < p0+hi; p++ {
				r0, r1 := p*q8PanelRows, min(rows, (p+1)*q8PanelRows)
				err := dequant(w[:(r1-r0)*cols], raw[r0*rowBytes:r1*rowBytes])
				var q []byte
				if err == nil {
					q, err = EncodeQ8(r1-r0, cols, w[:(r1-r0)*cols])
				}
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					return
				}
				m.packQ8Panels(q, r0, p, p+1)
			}
		})
		if first != nil {
			return nil, first
		}
		releaseMapped(raw[min(len(raw), p0*panelRaw):min(len(raw), p1*panelRaw)])
	}
	return m, nil
}

// EncodeQ8 returns ggml Q8_0 blocks for row-major float32 weights.
func EncodeQ8(rows, cols int, w []float32) ([]byte, error) {
	if rows <= 0 || cols <= 0 || cols%Q8BlockSize != 0 || len(w)/cols != rows || len(w) != rows*cols {
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
	case F16, BF16:
		m.halfRow(dst[:m.Cols], r)
	case Q4_K:
		m.q4kRow(dst[:m.Cols], r)
	case Q6_K:
		m.q6kRow(dst[:m.Cols], r)
	case Q5_K:
		m.q5kRow(dst[:m.Cols], r)
	case Q4_0:
		m.q40Row(dst[:m.Cols], r)
	case Q8_0:
		nb := m.Cols / Q8BlockSize
		dst = dst[:m.Cols]
		for b := 0; b < nb; b++ {
			blk, l := m.q8Block(r, b)
			d := m.q8Scale(r, b)
			for e := 0; e < Q8BlockSize; e++ {
				dst[b*Q8BlockSize+e] = d * float32(int8(blk[q8QuantOff(l, e)]^0x80))
			}
		}
	}
}

// Bytes is the memory the matrix's weights take.
func (m *Mat) Bytes() int64 {
	return int64(len(m.f32))*4 + int64(len(m.half))*2 + int64(len(m.q8q)) + int64(len(m.kq))
}

// MatMul computes out[b*Rows+r] = sum_i m[r,i] * x[b*Cols+i] for the n rows
// of x: every weight is read once for the whole batch. out must not overlap
// x.
//
// For Q8_0 weights the rows of x are first quantized the same way, per
// block of 32 (scale max|x|/127, round half to even, float32 scale), and
// the products are exact int8 dot products scaled by both block scales, as
// llama.cpp does: the result differs from the float product with the
// dequantized weights by the activation rounding (typically 1e-3 relative).
//
// The rows of m are split across the default pool's threads (see
// SetThreads) when the product is large enough to gain from it.
func (m *Mat) MatMul(out, x []float32, n int) {
	MatMulMany([]*Mat{m}, [][]float32{out}, x, n)
}

// MaxMany is the most matrices one MatMulMany call takes.
const MaxMany = 3

// MatMulMany computes, for each i, what mats[i].MatMul(outs[i], x, n) does,
// as one job: x is quantized once (Q8_0) and the pool splits the rows of
// all the matrices in one loop, so that a layer's query, key and value
// projections (or its two feed-forward inputs) cost one hand-off to the
// threads, not three. The matrices must have the same type (or be
// K-quants, see SameActs) and Cols; at most MaxMany.
func MatMulMany(mats []*Mat, outs [][]float32, x []float32, n int) {
	j := newMatMulJob("MatMulMany", mats, outs, n)
	for _, m := range mats {
		if len(x) < n*m.Cols {
			panic(fmt.Sprintf("kernels: MatMul %dx%d with %d rows: x has %d", m.Rows, m.Cols, n, len(x)))
		}
	}
	j.x = x
	if n == 0 {
		return
	}
	switch mats[0].Type {
	case F32, F16, BF16:
		matMul(j)
	case Q8_0:
		cols := mats[0].Cols
		s := getQ8Scratch(n * q8XBytes(cols))
		s.quantize(x, n, cols, false)
		j.xq = s.buf
		j.work /= 4
		matMul(j)
		j.xq = nil
		putQ8Scratch(s)
	case Q4_K, Q5_K, Q6_K, Q4_0:
		j.work /= 4
		kMatMul(j)
	}
}

// Q8Acts is a batch of activation rows quantized, as MatMul quantizes
// them, for products with Q8_0 matrices as wide as the rows: rows quantized
// where they are made (a norm, an activation function), by the thread
// that made them, and read by one MatMulQ8Acts. Quantizing in MatMul
// costs a hand-off to the threads of its own, and reads the rows from the
// cache of whichever core wrote them.
type Q8Acts struct {
	cols, n int
	buf     []byte
}

// Reset sizes a for n rows of cols columns (a multiple of 32); the rows'
// contents are undefined until quantized.
func (a *Q8Acts) Reset(n, cols int) {
	if n < 0 || cols <= 0 || cols%Q8BlockSize != 0 {
		panic(fmt.Sprintf("kernels: Q8Acts of %d rows of %d columns", n, cols))
	}
	a.cols, a.n = cols, n
	size := n * q8XBytes(cols)
	if cap(a.buf) < size {
		a.buf = alignedBytes(size)
	}
	a.buf = a.buf[:size]
}

// Quantize sets row i to x (as many values as a row has columns),
// quantized. Distinct rows may be quantized concurrently.
func (a *Q8Acts) Quantize(i int, x []float32) {
	if uint(i) >= uint(a.n) || len(x) != a.cols {
		panic(fmt.Sprintf("kernels: Q8Acts.Quantize of row %d of %d, %d values for %d columns", i, a.n, len(x), a.cols))
	}
	rb := q8XBytes(a.cols)
	quantizeQ8Rows(a.buf[i*rb:(i+1)*rb], x, 1, a.cols)
}

// MatMulQ8Acts is MatMulMany with the rows already quantized: for each i,
// outs[i] = mats[i] times the rows of a, bit for bit what MatMulMany
// computes from the rows they were quantized from. The matrices must be
// Q8_0, with as many columns as a's rows.
func MatMulQ8Acts(mats []*Mat, outs [][]float32, a *Q8Acts) {
	j := newMatMulJob("MatMulQ8Acts", mats, outs, a.n)
	if mats[0].Type != Q8_0 || mats[0].Cols != a.cols {
		panic(fmt.Sprintf("kernels: MatMulQ8Acts of %v %dx%d with rows of %d columns", mats[0].Type, mats[0].Rows, mats[0].Cols, a.cols))
	}
	if a.n == 0 {
		return
	}
	j.xq = a.buf
	j.work /= 4
	matMul(j)
}

// newMatMulJob checks the matrices and outputs of a product of n
// activation rows and sets up its job (without the activations).
func newMatMulJob(fn string, mats []*Mat, outs [][]float32, n int) matMulJob {
	if len(mats) == 0 || len(mats) > MaxMany || len(outs) != len(mats) {
		panic(fmt.Sprintf("kernels: %s with %d matrices and %d outputs", fn, len(mats), len(outs)))
	}
	j := matMulJob{n: n, nm: len(mats)}
	m0 := mats[0]
	for i, m := range mats {
		if n < 0 || len(outs[i]) < n*m.Rows {
			panic(fmt.Sprintf("kernels: MatMul %dx%d with %d rows: out has %d", m.Rows, m.Cols, n, len(outs[i])))
		}
		if !SameActs(m.Type, m0.Type) || m.Cols != m0.Cols {
			panic(fmt.Sprintf("kernels: %s of %v %dx%d and %v %dx%d", fn, m0.Type, m0.Rows, m0.Cols, m.Type, m.Rows, m.Cols))
		}
		rb := m.rowBlock()
		j.m[i], j.out[i] = m, outs[i]
		j.start[i+1] = j.start[i] + (m.Rows+rb-1)/rb
		j.work += m.Rows * m.Cols * n
	}
	return j
}

// rowBlock is the number of weight rows the micro-kernels handle per pass
// (F32: 4 rows; Q8_0: two panels of 16); MatMul splits work across
// threads in whole blocks.
func (m *Mat) rowBlock() int {
	switch m.Type {
	case Q8_0:
		return 2 * q8PanelRows
	case Q4_K, Q5_K, Q6_K, Q4_0:
		if m.k16 {
			return 16
		}
		return 8
	}
	return 4
}

// parallelWork is the work below which MatMul stays on the calling
// goroutine, in multiply-adds of F32 (Q8_0 multiply-adds count a quarter:
// they run about four times faster): starting a loop on the pool costs
// about a microsecond, the time of some 1<<16 F32 multiply-adds.
const parallelWork = 1 << 16

// matMulJob is one MatMulMany split over blocks of m.rowBlock() weight
// rows: blocks [start[i], start[i+1]) are those of m[i].
type matMulJob struct {
	m     [MaxMany]*Mat
	out   [MaxMany][]float32
	start [MaxMany + 1]int
	nm    int
	x     []float32
	xq    []byte // Q8_0: quantized x (q8.go)
	n     int
	work  int // multiply-adds (Q8_0: a quarter of them)
}

func (j *matMulJob) Run(lo, hi int) {
	for i := 0; i < j.nm; i++ {
		b0, b1 := max(lo, j.start[i]), min(hi, j.start[i+1])
		if b0 >= b1 {
			continue
		}
		m, rb := j.m[i], j.m[i].rowBlock()
		r0, r1 := (b0-j.start[i])*rb, min((b1-j.start[i])*rb, m.Rows)
		switch m.Type {
		case F32:
			f32Rows(j.out[i], j.x, m.f32, j.n, m.Rows, m.Cols, r0, r1)
		case F16, BF16:
			halfRows(j.out[i], m, j.x, j.n, r0, r1)
		case Q8_0:
			q8Rows(j.out[i], m, j.xq, j.n, r0, r1)
		case Q4_K:
			q4kRows(j.out[i], m, j.xq, j.n, r0, r1)
		case Q6_K:
			q6kRows(j.out[i], m, j.xq, j.n, r0, r1)
		case Q5_K:
			q5kRows(j.out[i], m, j.xq, j.n, r0, r1)
		case Q4_0:
			q40Rows(j.out[i], m, j.xq, j.n, r0, r1)
		}
	}
}

// xBlockBytes bounds the activation rows one pass over a weight block
// reuses, so that they stay in the L2 cache for long batches (prefill).
const xBlockBytes = 256 << 10

// xBlockRows returns how many activation rows of rowBytes to process per
// pass over the weights: a multiple of 4, at least 4.
func xBlockRows(rowBytes int) int {
	return max(4, xBlockBytes/rowBytes&^3)
}

// f32RowsGo computes output rows [r0, r1) of an F32 MatMul in pure Go.
func f32RowsGo(out, x, w []float32, n, rows, cols, r0, r1 int) {
	for r := r0; r < r1; r++ {
		wr := w[r*cols : (r+1)*cols]
		for b := 0; b < n; b++ {
			out[b*rows+r] = dotGo(wr, x[b*cols:(b+1)*cols])
		}
	}
}
