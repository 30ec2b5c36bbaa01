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
// A row of nb blocks is stored as n16 = nb/16 wide super-chunks of 16
// blocks (512 columns), then, if 8 or more blocks remain, one super-chunk
// of 8 blocks (256 columns), then the remaining blocks (fewer than 8) as
// chunks of 2, the last one padded with a zero block if needed. This serves
// AVX-512 VNNI: VPDPBUSD multiplies 64 unsigned bytes by 64 signed bytes
// and adds each group of 4 products into one of 16 int32 lanes.
//
//   - Wide super-chunk: 8 vectors of 64 bytes; in vector k, lane l (bytes
//     4l..4l+3) holds bytes 4k..4k+3 of block l. Eight VPDPBUSDs sum each
//     block in its own lane, and one convert-scale-accumulate in float
//     then serves 16 blocks. That step (three instructions per pair of
//     rows) is what bounds a register-blocked tile, so the wider the
//     super-chunk the closer the tile gets to two VPDPBUSDs a cycle.
//   - Super-chunk: 4 vectors of 64 bytes; in vector k, lane l holds bytes
//     8k+4(l&1)..+3 of block l>>1: lanes 2i and 2i+1 see only block i, and
//     four VPDPBUSDs sum whole blocks.
//   - Chunk: block 0 then block 1 (lanes 0-7, lanes 8-15), one VPDPBUSD.
//
// Weights (Mat.q8q, Mat.q8d) hold the quants biased to uint8, q+128, so
// that they can be VPDPBUSD's unsigned operand, and the float32 block
// scales in block order (a padding block has scale 0 and quants 128).
//
// Activations are quantized into a scratch buffer. Per row and wide
// super-chunk 640 bytes: the 512 quant bytes (int8) as above, 16 float32
// lane scales (lane l: block l's) and 16 int32 lane corrections, -128
// times the sum of the lane's 32 quants; per super-chunk 384 bytes: 256
// quant bytes, 16 lane scales (lanes 2i, 2i+1: block i's), 16 corrections
// (-128 times the lane's 16 quants); per chunk 192 bytes: 64 quant bytes,
// 16 lane scales (8 per block), 16 corrections (-128 times the lane's 4
// quants). A lane that starts from its correction sums (q_w+128)*q_x -
// 128*q_x = q_w*q_x exactly. Scratch buffers come from a sync.Pool, so
// MatMul allocates nothing once warm.
const (
	wideBlocks  = 16
	wideWBytes  = 512
	wideXBytes  = 640
	scBlocks    = 8
	scWBytes    = 256
	scXBytes    = 384
	chunkWBytes = 64
	chunkXBytes = 192
)

// q8Geom is the layout of a Q8_0 row.
type q8Geom struct {
	n16   int // wide super-chunks
	n8    int // super-chunks: 0 or 1
	ntail int // blocks after the super-chunks, < 8
}

func q8GeomOf(cols int) q8Geom {
	nb := cols / Q8BlockSize
	rest := nb % wideBlocks
	return q8Geom{n16: nb / wideBlocks, n8: rest / scBlocks, ntail: rest % scBlocks}
}

func (g q8Geom) blocks() int { return wideBlocks*g.n16 + scBlocks*g.n8 + g.ntail }
func (g q8Geom) chunks() int { return (g.ntail + 1) / 2 }
func (g q8Geom) scales() int { return wideBlocks*g.n16 + scBlocks*g.n8 + 2*g.chunks() } // per row, padding included
func (g q8Geom) wBytes() int { return wideWBytes*g.n16 + scWBytes*g.n8 + chunkWBytes*g.chunks() }
func (g q8Geom) xBytes() int { return wideXBytes*g.n16 + scXBytes*g.n8 + chunkXBytes*g.chunks() }

// section locates block b: its kind (0 wide, 1 super-chunk, 2 chunk
// pair), its index i within the section's unit, and the unit's number u
// among those of its kind.
func (g q8Geom) section(b int) (kind, u, i int) {
	if b < wideBlocks*g.n16 {
		return 0, b / wideBlocks, b % wideBlocks
	}
	b -= wideBlocks * g.n16
	if b < scBlocks*g.n8 {
		return 1, 0, b
	}
	b -= scBlocks * g.n8
	return 2, b / 2, b % 2
}

// wideOffset is where byte e of block i of a wide super-chunk goes.
func wideOffset(i, e int) int { return e/4*64 + 4*i + e%4 }

// scOffset is where byte e of block i of a super-chunk goes.
func scOffset(i, e int) int { return e/8*64 + (2*i+e/4%2)*4 + e%4 }

// unitBytes are the sizes of a wide super-chunk, a super-chunk and a
// chunk in a weight row or in an activation row.
type unitBytes struct{ wide, sc, chunk int }

var (
	wUnits = unitBytes{wideWBytes, scWBytes, chunkWBytes}
	xUnits = unitBytes{wideXBytes, scXBytes, chunkXBytes}
)

// quantOff is the offset of byte e of block b in a row made of units of
// the given sizes: the quants lead each unit, so only the sizes differ
// between weights and activations.
func (g q8Geom) quantOff(sz unitBytes, b, e int) int {
	switch kind, u, i := g.section(b); kind {
	case 0:
		return u*sz.wide + wideOffset(i, e)
	case 1:
		return g.n16*sz.wide + scOffset(i, e)
	default:
		return g.n16*sz.wide + g.n8*sz.sc + u*sz.chunk + i*Q8BlockSize + e
	}
}

// wOff is the offset in a weight row of byte e of block b.
func (g q8Geom) wOff(b, e int) int { return g.quantOff(wUnits, b, e) }

// xOff is the offset in an activation row of byte e of block b.
func (g q8Geom) xOff(b, e int) int { return g.quantOff(xUnits, b, e) }

// xScaleOff is the offset in an activation row of the lane scales of
// block b (1 float in a wide super-chunk, 2 in a super-chunk, 8 in a
// chunk).
func (g q8Geom) xScaleOff(b int) (off, n int) {
	switch kind, u, i := g.section(b); kind {
	case 0:
		return u*wideXBytes + 512 + 4*i, 1
	case 1:
		return g.n16*wideXBytes + 256 + 8*i, 2
	default:
		return g.n16*wideXBytes + g.n8*scXBytes + u*chunkXBytes + 64 + 32*i, 8
	}
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
	for u := 0; u < g.n16; u++ {
		laneCorrections(dst[u*wideXBytes:][:wideXBytes], 8)
	}
	if g.n8 > 0 {
		laneCorrections(dst[g.n16*wideXBytes:][:scXBytes], 4)
	}
	for ch := 0; ch < g.chunks(); ch++ {
		c := dst[g.n16*wideXBytes+g.n8*scXBytes+ch*chunkXBytes:][:chunkXBytes]
		if 2*ch+1 == g.ntail {
			zeroChunkHalf1(c)
		}
		q8ChunkCorrections(c)
	}
}

// laneCorrections writes the corrections of a (wide) super-chunk of nv
// quant vectors: lane l's is -128 times the sum of its bytes in every
// vector.
func laneCorrections(c []byte, nv int) {
	for l := 0; l < 16; l++ {
		var s int32
		for k := 0; k < nv; k++ {
			for t := 0; t < 4; t++ {
				s += int32(int8(c[64*k+4*l+t]))
			}
		}
		binary.LittleEndian.PutUint32(c[64*nv+64+4*l:], uint32(-128*s))
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
			ws, xs, blk := wq, xr, 0
			for u := 0; u < g.n16; u++ {
				lanes := q8LaneSums(ws[:wideWBytes], xs[:wideWBytes])
				for i, s := range lanes {
					sum += float32(s) * (wd[blk+i] * q8Scale(xs, 512+4*i))
				}
				ws, xs, blk = ws[wideWBytes:], xs[wideXBytes:], blk+wideBlocks
			}
			if g.n8 > 0 {
				lanes := q8LaneSums(ws[:scWBytes], xs[:scWBytes])
				for i := 0; i < scBlocks; i++ {
					s := lanes[2*i] + lanes[2*i+1]
					sum += float32(s) * (wd[blk+i] * q8Scale(xs, 256+8*i))
				}
				ws, xs, blk = ws[scWBytes:], xs[scXBytes:], blk+scBlocks
			}
			for ch := 0; ch < g.chunks(); ch++ {
				for h := 0; h < 2 && 2*ch+h < g.ntail; h++ {
					var s int32
					for p := 32 * h; p < 32*h+32; p++ {
						s += int32(int8(ws[p]^0x80)) * int32(int8(xs[p]))
					}
					sum += float32(s) * (wd[blk+h] * q8Scale(xs, 64+32*h))
				}
				ws, xs, blk = ws[chunkWBytes:], xs[chunkXBytes:], blk+2
			}
			out[b*m.Rows+r] = sum
		}
	}
}

// q8LaneSums returns the 16 int32 lane sums VPDPBUSD would accumulate over
// a (wide) super-chunk's vectors of biased weights w and quants x.
func q8LaneSums(w, x []byte) (lanes [16]int32) {
	for p := 0; p+4 <= len(w); p += 4 {
		w4, x4 := w[p:p+4:p+4], x[p:p+4:p+4]
		lanes[p&63>>2] += int32(int8(w4[0]^0x80))*int32(int8(x4[0])) +
			int32(int8(w4[1]^0x80))*int32(int8(x4[1])) +
			int32(int8(w4[2]^0x80))*int32(int8(x4[2])) +
			int32(int8(w4[3]^0x80))*int32(int8(x4[3]))
	}
	return lanes
}

// q8Scale reads the float32 at x[off:].
func q8Scale(x []byte, off int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(x[off:]))
}
