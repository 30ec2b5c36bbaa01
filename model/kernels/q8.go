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
// A row of nb blocks is stored as nsc = nb/8 super-chunks of 8 blocks (256
// columns), then the nb%8 remaining blocks as chunks of 2 (the last one
// padded with a zero block if needed). This serves AVX-512 VNNI: VPDPBUSD
// multiplies 64 unsigned bytes by 64 signed bytes and adds each group of 4
// products into one of 16 int32 lanes.
//
//   - Super-chunk: 4 vectors of 64 bytes; in vector k, lane l (bytes
//     4l..4l+3) holds bytes 8k+4(l&1)..+3 of block l>>1. Lanes 2i and 2i+1
//     see only block i, so four VPDPBUSDs sum whole blocks in int32 before
//     a single convert-scale-accumulate in float: 7 vector operations per
//     256 columns and pair of rows, instead of 16 with one block per lane
//     group.
//   - Chunk: block 0 then block 1 (lanes 0-7, lanes 8-15), one VPDPBUSD.
//
// Weights (Mat.q8q, Mat.q8d) hold the quants biased to uint8, q+128, so
// that they can be VPDPBUSD's unsigned operand, and the float32 block
// scales in block order (a padding block has scale 0 and quants 128).
//
// Activations are quantized into a scratch buffer, per row and per
// super-chunk 384 bytes: the 256 quant bytes (int8) as above, 16 float32
// lane scales (lanes 2i, 2i+1: block i's), and 16 int32 lane corrections,
// -128 times the sum of the lane's 16 quants; per chunk 192 bytes: 64
// quant bytes, 16 lane scales (8 per block), 16 corrections (-128 times
// the lane's 4 quants). A lane that starts from its correction sums
// (q_w+128)*q_x - 128*q_x = q_w*q_x exactly. Scratch buffers come from a
// sync.Pool, so MatMul allocates nothing once warm.
const (
	scBlocks    = 8
	scWBytes    = 256
	scXBytes    = 384
	chunkWBytes = 64
	chunkXBytes = 192
)

// q8Geom is the layout of a Q8_0 row.
type q8Geom struct {
	nsc   int // super-chunks
	ntail int // blocks after the super-chunks, < 8
}

func q8GeomOf(cols int) q8Geom {
	nb := cols / Q8BlockSize
	return q8Geom{nsc: nb / scBlocks, ntail: nb % scBlocks}
}

func (g q8Geom) blocks() int { return scBlocks*g.nsc + g.ntail }
func (g q8Geom) chunks() int { return (g.ntail + 1) / 2 }
func (g q8Geom) scales() int { return scBlocks*g.nsc + 2*g.chunks() } // per row, padding included
func (g q8Geom) wBytes() int { return scWBytes*g.nsc + chunkWBytes*g.chunks() }
func (g q8Geom) xBytes() int { return scXBytes*g.nsc + chunkXBytes*g.chunks() }

// scOffset is where byte e of block i of a super-chunk goes.
func scOffset(i, e int) int { return e/8*64 + (2*i+e/4%2)*4 + e%4 }

// wOff is the offset in a weight row of byte e of block b.
func (g q8Geom) wOff(b, e int) int {
	if b < scBlocks*g.nsc {
		return b/scBlocks*scWBytes + scOffset(b%scBlocks, e)
	}
	return g.nsc*scWBytes + (b-scBlocks*g.nsc)*Q8BlockSize + e
}

// xOff is the offset in an activation row of byte e of block b.
func (g q8Geom) xOff(b, e int) int {
	if b < scBlocks*g.nsc {
		return b/scBlocks*scXBytes + scOffset(b%scBlocks, e)
	}
	t := b - scBlocks*g.nsc
	return g.nsc*scXBytes + t/2*chunkXBytes + t%2*Q8BlockSize + e
}

// xScaleOff is the offset in an activation row of the lane scales of
// block b (2 floats in a super-chunk, 8 in a chunk).
func (g q8Geom) xScaleOff(b int) (off, n int) {
	if b < scBlocks*g.nsc {
		return b/scBlocks*scXBytes + 256 + 8*(b%scBlocks), 2
	}
	t := b - scBlocks*g.nsc
	return g.nsc*scXBytes + t/2*chunkXBytes + 64 + 32*(t%2), 8
}

// newQ8Mat allocates an empty Q8_0 matrix (scales 0, quants 128).
func newQ8Mat(rows, cols int) *Mat {
	g := q8GeomOf(cols)
	m := &Mat{Type: Q8_0, Rows: rows, Cols: cols, q8g: g, q8Blocks: g.scales(), q8Stride: g.wBytes()}
	m.q8d = make([]float32, rows*m.q8Blocks)
	m.q8q = alignedBytes(rows * m.q8Stride)
	for i := range m.q8q {
		m.q8q[i] = 0x80
	}
	return m
}

// alignedBytes returns a zeroed slice of n bytes starting on a 64-byte
// boundary (one cache line, one ZMM load).
func alignedBytes(n int) []byte {
	b := make([]byte, n+63)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n : off+n]
}

type q8Scratch struct{ buf, mem []byte }

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
func quantizeQ8RowGo(dst []byte, x []float32, g q8Geom) {
	dst = dst[:g.xBytes()]
	for b := 0; b < g.blocks(); b++ {
		xb := x[b*Q8BlockSize : (b+1)*Q8BlockSize]
		amax := float32(0)
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		for e, v := range xb {
			dst[g.xOff(b, e)] = byte(int8(math.RoundToEven(float64(v * id))))
		}
		off, n := g.xScaleOff(b)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(dst[off+4*i:], math.Float32bits(d))
		}
	}
	for sc := 0; sc < g.nsc; sc++ {
		c := dst[sc*scXBytes:][:scXBytes]
		for l := 0; l < 16; l++ {
			var s int32
			for k := 0; k < 4; k++ {
				for t := 0; t < 4; t++ {
					s += int32(int8(c[64*k+4*l+t]))
				}
			}
			binary.LittleEndian.PutUint32(c[320+4*l:], uint32(-128*s))
		}
	}
	for ch := 0; ch < g.chunks(); ch++ {
		c := dst[g.nsc*scXBytes+ch*chunkXBytes:][:chunkXBytes]
		if 2*ch+1 == g.ntail {
			zeroChunkHalf1(c)
		}
		q8ChunkCorrections(c)
	}
}

// zeroChunkHalf1 clears the second block of an activation chunk (padding).
func zeroChunkHalf1(c []byte) {
	clear(c[32:64])
	clear(c[96:128])
	clear(c[160:192])
}

func q8ChunkCorrections(c []byte) {
	for l := 0; l < 16; l++ {
		s := int32(int8(c[4*l])) + int32(int8(c[4*l+1])) + int32(int8(c[4*l+2])) + int32(int8(c[4*l+3]))
		binary.LittleEndian.PutUint32(c[128+4*l:], uint32(-128*s))
	}
}

// quantizeQ8RowsGo quantizes n rows of cols (a multiple of 32) values.
func quantizeQ8RowsGo(dst []byte, x []float32, n, cols int) {
	g := q8GeomOf(cols)
	rb := g.xBytes()
	for b := 0; b < n; b++ {
		quantizeQ8RowGo(dst[b*rb:(b+1)*rb], x[b*cols:(b+1)*cols], g)
	}
}

// q8RowsGo computes output rows [r0, r1) of a Q8_0 MatMul in pure Go from
// quantized activations xq. Blocks are visited in order and each adds
// float32(int dot) * (weight scale * activation scale).
func q8RowsGo(out []float32, m *Mat, xq []byte, n, r0, r1 int) {
	g := m.q8g
	rb := g.xBytes()
	for r := r0; r < r1; r++ {
		wq := m.q8q[r*m.q8Stride : (r+1)*m.q8Stride]
		wd := m.q8d[r*m.q8Blocks : (r+1)*m.q8Blocks]
		for b := 0; b < n; b++ {
			xr := xq[b*rb : (b+1)*rb]
			var sum float32
			for sc := 0; sc < g.nsc; sc++ {
				ws := wq[sc*scWBytes:][:scWBytes]
				xs := xr[sc*scXBytes:][:scXBytes]
				var isum [scBlocks]int32
				for p := 0; p < scWBytes; p += 4 {
					w4, x4 := ws[p:p+4:p+4], xs[p:p+4:p+4]
					isum[p&63>>3] += int32(int8(w4[0]^0x80))*int32(int8(x4[0])) +
						int32(int8(w4[1]^0x80))*int32(int8(x4[1])) +
						int32(int8(w4[2]^0x80))*int32(int8(x4[2])) +
						int32(int8(w4[3]^0x80))*int32(int8(x4[3]))
				}
				for i, s := range isum {
					dx := math.Float32frombits(binary.LittleEndian.Uint32(xs[256+8*i:]))
					sum += float32(s) * (wd[sc*scBlocks+i] * dx)
				}
			}
			for ch := 0; ch < g.chunks(); ch++ {
				ws := wq[g.nsc*scWBytes+ch*chunkWBytes:][:chunkWBytes]
				xs := xr[g.nsc*scXBytes+ch*chunkXBytes:][:chunkXBytes]
				for h := 0; h < 2 && 2*ch+h < g.ntail; h++ {
					var s int32
					for p := 32 * h; p < 32*h+32; p++ {
						s += int32(int8(ws[p]^0x80)) * int32(int8(xs[p]))
					}
					dx := math.Float32frombits(binary.LittleEndian.Uint32(xs[64+32*h:]))
					sum += float32(s) * (wd[scBlocks*g.nsc+2*ch+h] * dx)
				}
			}
			out[b*m.Rows+r] = sum
		}
	}
}
