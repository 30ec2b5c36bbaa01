package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// isa describes one vector instruction set the kernels are generated for.
type isa struct {
	name  string                // suffix of the generated function names
	lanes int                   // float32 lanes per vector
	vec   func() reg.VecVirtual // allocates one full-width vector register
	evex  bool                  // AVX-512 (opmask tails, EVEX-only reductions)
}

var (
	isaAVX512 = isa{name: "AVX512", lanes: 16, vec: ZMM, evex: true}
	isaAVX2   = isa{name: "AVX2", lanes: 8, vec: YMM, evex: false}
)

// Maximum micro-kernel shapes: MR weight rows x NR activation rows.
const (
	f32NRAVX512 = 4
	f32NRAVX2   = 2
	q8NRVNNI    = 3
	q8NRAVX2    = 2
)

func genMatMul() {
	for _, s := range []isa{isaAVX512, isaAVX2} {
		nrMax := f32NRAVX512
		if !s.evex {
			nrMax = f32NRAVX2
		}
		for _, mr := range []int{1, 4} {
			for nr := 1; nr <= nrMax; nr++ {
				f32Tile(s, mr, nr)
			}
		}
	}
	for _, mr := range []int{1, 4} {
		for nr := 1; nr <= q8NRVNNI; nr++ {
			q8TileVNNI(mr, nr)
		}
	}
	for _, mr := range []int{1, 4} {
		for nr := 1; nr <= q8NRAVX2; nr++ {
			q8TileAVX2(mr, nr)
		}
	}
}

// rowPtrs returns n pointers: base, base+stride, base+2*stride, ...
func rowPtrs(base, stride reg.Register, n int) []reg.Register {
	p := []reg.Register{base}
	for i := 1; i < n; i++ {
		r := GP64()
		LEAQ(Mem{Base: p[i-1], Index: stride, Scale: 1}, r)
		p = append(p, r)
	}
	return p
}

// loadStride loads an element stride parameter and scales it to bytes.
func loadStride(name string, elemShift uint8) reg.Register {
	r := Load(Param(name), GP64())
	if elemShift != 0 {
		SHLQ(U8(elemShift), r)
	}
	return r
}

// toXMM sums the lanes of a float vector down to 4 lanes (an XMM view of the
// same register).
func toXMM(s isa, v reg.VecVirtual) reg.Register {
	if s.evex {
		hi := YMM()
		VEXTRACTF64X4(U8(1), v.AsZ(), hi)
		VADDPS(hi, v.AsY(), v.AsY())
		lo := XMM()
		VEXTRACTF32X4(U8(1), v.AsY(), lo)
		VADDPS(lo, v.AsX(), v.AsX())
		return v.AsX()
	}
	hi := XMM()
	VEXTRACTF128(U8(1), v.AsY(), hi)
	VADDPS(hi, v.AsX(), v.AsX())
	return v.AsX()
}

// storeSum4 stores sum(acc[i]) to out[i] for i < len(acc) (1 or 4).
// Only instructions with EVEX forms are used so that any register works.
func storeSum4(s isa, acc []reg.VecVirtual, out Mem) {
	if len(acc) == 1 {
		x := toXMM(s, acc[0])
		t := XMM()
		VSHUFPS(U8(0xEE), x, x, t) // [x2 x3 x2 x3]
		VADDPS(t, x, x)            // [x0+x2 x1+x3 ..]
		VSHUFPS(U8(0x55), x, x, t) // [x1+x3 ...]
		VADDSS(t, x, x)
		VMOVSS(x, out)
		return
	}
	a, b, c, d := toXMM(s, acc[0]), toXMM(s, acc[1]), toXMM(s, acc[2]), toXMM(s, acc[3])
	t := XMM()
	VUNPCKLPS(b, a, t) // [a0 b0 a1 b1]
	VUNPCKHPS(b, a, a) // [a2 b2 a3 b3]
	VADDPS(t, a, a)    // [a0+a2 b0+b2 a1+a3 b1+b3]
	VUNPCKLPS(d, c, t)
	VUNPCKHPS(d, c, c)
	VADDPS(t, c, c)            // [c0+c2 d0+d2 c1+c3 d1+d3]
	VSHUFPS(U8(0x44), c, a, t) // [a0+a2 b0+b2 c0+c2 d0+d2]
	VSHUFPS(U8(0xEE), c, a, a) // [a1+a3 b1+b3 c1+c3 d1+d3]
	VADDPS(t, a, a)
	VMOVUPS(a, out)
}

var sum4IdxMem Mem
var sum4IdxDone bool

// sum4Idx is the VPERMPS index that gathers lanes 0, 4, 8 and 12.
func sum4Idx() Mem {
	if !sum4IdxDone {
		sum4IdxMem = GLOBL("sum4idx", RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			DATA(4*i, U32(uint32(4*(i%4))))
		}
		sum4IdxDone = true
	}
	return sum4IdxMem
}

// storeSum4ZMM is storeSum4 for four ZMM accumulators as a reduction tree:
// 128-bit lane shuffles halve the vectors twice, leaving lane k with four
// partial sums of acc[k]; two in-lane rotations finish the sums, and idx
// (sum4Idx) gathers them. 15 instructions where storeSum4 takes 26.
func storeSum4ZMM(acc []reg.VecVirtual, idx reg.VecVirtual, out Mem) {
	a, b, c, d := acc[0], acc[1], acc[2], acc[3]
	t := ZMM()
	VSHUFF64X2(U8(0x44), b, a, t) // [a.L0 a.L1 b.L0 b.L1]
	VSHUFF64X2(U8(0xEE), b, a, a) // [a.L2 a.L3 b.L2 b.L3]
	VADDPS(t, a, a)
	VSHUFF64X2(U8(0x44), d, c, t)
	VSHUFF64X2(U8(0xEE), d, c, c)
	VADDPS(t, c, c)
	VSHUFF64X2(U8(0x88), c, a, t) // [ab.L0 ab.L2 cd.L0 cd.L2]
	VSHUFF64X2(U8(0xDD), c, a, a) // [ab.L1 ab.L3 cd.L1 cd.L3]
	VADDPS(t, a, a)               // lane k: 4 partial sums of acc[k]
	VPERMILPS(U8(0x4E), a, t)
	VADDPS(t, a, a)
	VPERMILPS(U8(0xB1), a, t)
	VADDPS(t, a, a) // every element of lane k: sum(acc[k])
	VPERMPS(a, idx, a)
	VMOVUPS(a.AsX(), out)
}

// f32Tile generates f32Tile{mr}x{nr}{isa}: for i < mr, j < nr,
// out[j*ldo+i] = sum_k w[i*ldw+k] * x[j*ldx+k] over k < cols.
func f32Tile(s isa, mr, nr int) {
	name := fmt.Sprintf("f32Tile%dx%d%s", mr, nr, s.name)
	TEXT(name, NOSPLIT, "func(w *float32, ldw int, x *float32, ldx int, cols int, out *float32, ldo int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a %dx%d tile of dot products of F32 weight rows and activation rows.", name, mr, nr))

	wr := rowPtrs(Load(Param("w"), GP64()), loadStride("ldw", 2), mr)
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 2), nr)

	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nr)
		for j := range acc[i] {
			acc[i][j] = s.vec()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}

	cols := Load(Param("cols"), GP64())
	end := GP64()
	MOVQ(cols, end)
	ANDQ(I32(-s.lanes), end)
	SHLQ(U8(2), end)
	off := GP64()
	XORQ(off, off)

	step := func(load func(m Mem, dst reg.VecVirtual)) {
		xv := make([]reg.VecVirtual, nr)
		for j := range xv {
			xv[j] = s.vec()
			load(Mem{Base: xr[j], Index: off, Scale: 1}, xv[j])
		}
		for i := 0; i < mr; i++ {
			wv := s.vec()
			load(Mem{Base: wr[i], Index: off, Scale: 1}, wv)
			for j := 0; j < nr; j++ {
				VFMADD231PS(wv, xv[j], acc[i][j])
			}
		}
	}

	Label("loop")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	step(func(m Mem, dst reg.VecVirtual) { VMOVUPS(m, dst) })
	ADDQ(U32(4*s.lanes), off)
	JMP(LabelRef("loop"))

	Label("tail")
	rem := GP64()
	MOVQ(cols, rem)
	ANDQ(U32(s.lanes-1), rem)
	JZ(LabelRef("reduce"))
	if s.evex {
		bits := GP64()
		MOVQ(I32(-1), bits)
		BZHIQ(rem, bits, bits)
		k := K()
		KMOVW(bits.As32(), k)
		step(func(m Mem, dst reg.VecVirtual) { VMOVUPS_Z(m, k, dst) })
	} else {
		mask := avx2TailMask(rem)
		step(func(m Mem, dst reg.VecVirtual) { VMASKMOVPS(m, mask, dst) })
	}

	Label("reduce")
	outp := Load(Param("out"), GP64())
	ldo := loadStride("ldo", 2)
	for j := 0; j < nr; j++ {
		col := make([]reg.VecVirtual, mr)
		for i := range col {
			col[i] = acc[i][j]
		}
		storeSum4(s, col, Mem{Base: outp})
		if j+1 < nr {
			ADDQ(ldo, outp)
		}
	}
	VZEROUPPER()
	RET()
}

var tailMaskData Mem
var tailMaskDone bool

// avx2TailMask returns a YMM lane mask with the low rem (1..7) lanes set.
func avx2TailMask(rem reg.Register) reg.VecVirtual {
	if !tailMaskDone {
		tailMaskData = GLOBL("tailmask8", RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			v := uint32(0)
			if i < 8 {
				v = 0xffffffff
			}
			DATA(4*i, U32(v))
		}
		tailMaskDone = true
	}
	base := GP64()
	LEAQ(tailMaskData, base)
	idx := GP64()
	MOVQ(U32(8), idx)
	SUBQ(rem, idx)
	mask := YMM()
	VMOVDQU(Mem{Base: base, Index: idx, Scale: 4}, mask)
	return mask
}

// Q8_0 layouts (see q8.go in the kernels package for the full story).
//
// A row of nb blocks is stored as n16 = nb/16 wide super-chunks of 16
// blocks, then n8 (0 or 1) super-chunks of 8 blocks, then nchunk chunks of
// 2 blocks (the last one padded with a zero block when needed).
//
// Wide super-chunk: 8 vectors of 64 bytes; vector k, 32-bit lane l holds
// bytes 4k .. 4k+3 of block l. Eight VPDPBUSDs sum block l in lane l.
// Super-chunk: 4 vectors of 64 bytes; vector k, 32-bit lane l holds bytes
// 8k+4(l&1) .. +3 of block l>>1. Four VPDPBUSDs thus sum, in lanes 2i and
// 2i+1, the whole of block i, with no scaling in between.
// Chunk: 64 bytes, block 0 then block 1 (lanes 0-7 and 8-15).
//
// Weights: quants biased to uint8 (q+128); per row 16, 8 or 2 float32
// block scales per unit, in block order.
// Activations (signed int8), per wide super-chunk 640 bytes: 512 quant
// bytes, 16 float32 scales (lane l = block l), 16 int32 lane corrections
// (-128 * the sum of the lane's 32 quants); per super-chunk 384 bytes: the
// 256 quant bytes, 16 scales (lanes 2i, 2i+1 = block i), 16 corrections;
// per chunk 192 bytes: 64 quant bytes, 16 scales (8 per block), 16
// corrections. Starting each lane from its correction cancels the +128
// weight bias exactly.
const (
	wideWBytes  = 512
	wideXBytes  = 640
	scWBytes    = 256
	scXBytes    = 384
	chunkXBytes = 192
)

var permIdx Mem
var permIdxDone bool

// q8Prologue loads the tile pointers shared by the Q8 kernels.
func q8Prologue(mr, nr int) (wr, dr, xr []reg.Register) {
	wr = rowPtrs(Load(Param("w"), GP64()), loadStride("ldw", 0), mr)
	dr = rowPtrs(Load(Param("d"), GP64()), loadStride("ldd", 2), mr)
	xr = rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nr)
	return
}

func q8Advance(wr, dr, xr []reg.Register, w, d, x int) {
	for _, p := range wr {
		ADDQ(U32(w), p)
	}
	for _, p := range dr {
		ADDQ(U32(d), p)
	}
	for _, p := range xr {
		ADDQ(U32(x), p)
	}
}

// countLoop emits a loop that runs body while the count in n is not zero,
// decrementing it each time, then falls through. Labels start with name.
func countLoop(name string, n reg.Register, body func()) {
	Label(name + "loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "done"))
	body()
	DECQ(n)
	JMP(LabelRef(name + "loop"))
	Label(name + "done")
}

// q8Epilogue reduces and stores the float accumulators.
func q8Epilogue(s isa, acc [][]reg.VecVirtual, nr int) {
	outp := Load(Param("out"), GP64())
	ldo := loadStride("ldo", 2)
	var idx reg.VecVirtual
	if s.evex && len(acc) == 4 && nr > 1 { // (one column: the chain is latency-bound)
		idx = ZMM()
		VMOVDQU32(sum4Idx(), idx)
	}
	for j := 0; j < nr; j++ {
		col := make([]reg.VecVirtual, len(acc))
		for i := range col {
			col[i] = acc[i][j]
		}
		if idx != nil {
			storeSum4ZMM(col, idx, Mem{Base: outp})
		} else {
			storeSum4(s, col, Mem{Base: outp})
		}
		if j+1 < nr {
			ADDQ(ldo, outp)
		}
	}
}

const q8Sig = "func(w *uint8, ldw int, d *float32, ldd int, x *byte, ldx int, n16 int, n8 int, nchunk int, out *float32, ldo int, pf int, pfs int, nt int)"

// q8TileVNNI generates q8Tile{mr}x{nr}VNNI (AVX-512 VNNI): for i < mr,
// j < nt*nr, out[j*ldo+i] = the Q8_0 dot product of weight row i and
// activation row j (layouts above), as nt tiles of nr activation rows.
// ldw and ldx are byte strides, ldd is in float32s; pf and pfs steer the
// prefetching (below).
//
// The tile is register-blocked: per 64-byte step it loads the nr
// activation vectors once and each weight vector once, and does all mr*nr
// VPDPBUSDs from registers. (With a memory operand per VPDPBUSD the tile
// is bound by two 512-bit loads per cycle at about one VPDPBUSD a cycle.)
// The int32 sums start from the activation rows' corrections and are
// converted, scaled and added into the float accumulators once per unit,
// three instructions per pair of rows; over a wide super-chunk's eight
// VPDPBUSDs that leaves the tile close to the two VPDPBUSDs a cycle the
// core can issue. It needs 2*mr*nr accumulators, nr activation vectors
// and a weight vector: at most 4x3.
func q8TileVNNI(mr, nr int) {
	name := fmt.Sprintf("q8Tile%dx%dVNNI", mr, nr)
	TEXT(name, NOSPLIT, q8Sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a %dx%d tile of Q8_0 weight rows times quantized activation rows.", name, mr, nr))
	if 2*mr*nr+nr+1 > 31 {
		panic(name + ": too many registers")
	}

	if !permIdxDone {
		permIdx = GLOBL("q8permidx", RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			DATA(4*i, U32(uint32(i/8)))
		}
		permIdxDone = true
	}
	// The tiles of one call share the weight rows and take the activation
	// rows nr at a time: after each, x and out move on nr rows (kept in
	// their argument slots, as the loop needs every register).
	pa, pfs := GP64(), Load(Param("pfs"), GP64())
	Load(Param("pf"), pa)
	ADDQ(Load(Param("w"), GP64()), pa)
	Label("tile")
	wr, dr, xr := q8Prologue(mr, nr)
	acc := make([][]reg.VecVirtual, mr)
	isum := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nr)
		isum[i] = make([]reg.VecVirtual, nr)
		for j := range acc[i] {
			acc[i][j] = ZMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
			isum[i][j] = ZMM()
		}
	}
	// The same registers serve every loop, which keeps avo's greedy
	// allocator within the 32 vector registers.
	xv := make([]reg.VecVirtual, nr)
	for j := range xv {
		xv[j] = ZMM()
	}
	wv, dv, sc := ZMM(), ZMM(), ZMM()

	// Prefetch: with pfs != 0 the kernel prefetches mr lines per 64-byte
	// step, at w+pf, w+pf+pfs, w+pf+2*pfs, ... (w: the first weight row
	// at entry), so that the caller can spread the lines of the row group
	// it will need next over the tiles of this one and the memory traffic
	// overlaps the arithmetic. With pfs == 0 it prefetches nothing: a
	// second copy of the loops has no PREFETCH, whose load-port slots the
	// tile can use. The AVX2 kernels ignore both.

	// unit emits one unit of steps 64-byte vectors: corr and xscale are
	// the activation offsets of the corrections and scales, and dscale(i)
	// loads weight row i's block scales into dv, lane by lane.
	unit := func(prefetch bool, steps, corr int, dscale func(i int), xscale int) {
		for j := 0; j < nr; j++ {
			VMOVDQU32(Mem{Base: xr[j], Disp: corr}, isum[0][j])
			for i := 1; i < mr; i++ {
				VMOVDQA32(isum[0][j], isum[i][j])
			}
		}
		for k := 0; k < steps; k++ {
			if prefetch {
				for i := 0; i < mr; i++ {
					PREFETCHT0(Mem{Base: pa})
					ADDQ(pfs, pa)
				}
			}
			for j := range xv {
				VMOVDQU64(Mem{Base: xr[j], Disp: 64 * k}, xv[j])
			}
			for i := 0; i < mr; i++ {
				VMOVDQU64(Mem{Base: wr[i], Disp: 64 * k}, wv)
				for j := 0; j < nr; j++ {
					VPDPBUSD(xv[j], wv, isum[i][j])
				}
			}
		}
		for i := 0; i < mr; i++ {
			dscale(i)
			for j := 0; j < nr; j++ {
				VCVTDQ2PS(isum[i][j], isum[i][j])
				VMULPS(Mem{Base: xr[j], Disp: xscale}, dv, sc)
				VFMADD231PS(sc, isum[i][j], acc[i][j])
			}
		}
	}

	n := GP64()
	loops := func(prefetch bool, pre string) {
		Load(Param("n16"), n)
		countLoop(pre+"wide", n, func() {
			unit(prefetch, 8, 576, func(i int) {
				VMOVUPS(Mem{Base: dr[i]}, dv) // 16 scales, lane l = block l
			}, 512)
			q8Advance(wr, dr, xr, wideWBytes, 64, wideXBytes)
		})
		Load(Param("n8"), n)
		countLoop(pre+"sc", n, func() {
			unit(prefetch, 4, 320, func(i int) {
				VPMOVZXDQ(Mem{Base: dr[i]}, dv) // 8 scales -> even lanes
				VMOVSLDUP(dv, dv)               // lanes 2b, 2b+1 = scale of block b
			}, 256)
			q8Advance(wr, dr, xr, scWBytes, 32, scXBytes)
		})
		Load(Param("nchunk"), n)
		countLoop(pre+"chunk", n, func() {
			unit(prefetch, 1, 128, func(i int) {
				VMOVSD(Mem{Base: dr[i]}, dv.AsX())
				VMOVDQU32(permIdx, sc)
				VPERMPS(dv, sc, dv) // lanes 0-7: block 0's scale, 8-15: block 1's
			}, 64)
			q8Advance(wr, dr, xr, 64, 8, chunkXBytes)
		})
	}
	TESTQ(pfs, pfs)
	JZ(LabelRef("nopf"))
	loops(true, "pf")
	JMP(LabelRef("sums"))
	Label("nopf")
	loops(false, "")
	Label("sums")
	q8Epilogue(isaAVX512, acc, nr)
	t := Load(Param("nt"), GP64())
	DECQ(t)
	JZ(LabelRef("done"))
	Store(t, Param("nt"))
	x, step := Load(Param("x"), GP64()), Load(Param("ldx"), GP64())
	IMUL3Q(U8(nr), step, step)
	ADDQ(step, x)
	Store(x, Param("x"))
	o := Load(Param("out"), GP64())
	Load(Param("ldo"), step)
	IMUL3Q(U8(4*nr), step, step)
	ADDQ(step, o)
	Store(o, Param("out"))
	JMP(LabelRef("tile"))
	Label("done")
	VZEROUPPER()
	RET()
}

var avx2Consts Mem
var avx2ConstsDone bool

// q8TileAVX2 is q8TileVNNI for AVX2: 32-byte halves, and the sign trick
// (|w| unsigned times sign(w)*x signed) with VPMADDUBSW and VPMADDWD, since
// the biased weights would overflow VPMADDUBSW's int16 sums.
func q8TileAVX2(mr, nr int) {
	name := fmt.Sprintf("q8Tile%dx%dAVX2", mr, nr)
	TEXT(name, NOSPLIT, q8Sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a %dx%d tile of Q8_0 weight rows times quantized activation rows.", name, mr, nr))

	if !avx2ConstsDone {
		// 32 bytes of 0x80, then 16 int16 ones.
		avx2Consts = GLOBL("q8avx2consts", RODATA|NOPTR)
		for i := 0; i < 8; i++ {
			DATA(4*i, U32(0x80808080))
		}
		for i := 0; i < 8; i++ {
			DATA(32+4*i, U32(0x00010001))
		}
		avx2ConstsDone = true
	}
	wr, dr, xr := q8Prologue(mr, nr)
	cst := GP64()
	LEAQ(avx2Consts, cst)
	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nr)
		for j := range acc[i] {
			acc[i][j] = YMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}

	// dot32 returns the int32 lanes of sign-trick products of the 32 biased
	// weight bytes at wm with the activation bytes at each xm[j].
	dot32 := func(wm Mem, xm []Mem, into []reg.VecVirtual, first bool) {
		ws := YMM()
		VMOVDQU(wm, ws)
		VPXOR(Mem{Base: cst}, ws, ws) // remove the +128 bias
		aw := YMM()
		VPABSB(ws, aw)
		for j := range xm {
			t := YMM()
			VMOVDQU(xm[j], t)
			VPSIGNB(ws, t, t)
			VPMADDUBSW(t, aw, t)
			VPMADDWD(Mem{Base: cst, Disp: 32}, t, t)
			if first {
				VMOVDQA(t, into[j])
			} else {
				VPADDD(t, into[j], into[j])
			}
		}
	}

	// unit emits a (wide) super-chunk of steps 64-byte vectors as two
	// 32-byte halves u; dscale(i, u) loads weight row i's block scales of
	// half u, lane by lane, and xscale is the activation scales' offset.
	unit := func(steps int, dscale func(i, u int) reg.VecVirtual, xscale int) {
		for i := 0; i < mr; i++ {
			for u := 0; u < 2; u++ {
				isum := make([]reg.VecVirtual, nr)
				for j := range isum {
					isum[j] = YMM()
				}
				for k := 0; k < steps; k++ {
					xm := make([]Mem, nr)
					for j := range xm {
						xm[j] = Mem{Base: xr[j], Disp: 64*k + 32*u}
					}
					dot32(Mem{Base: wr[i], Disp: 64*k + 32*u}, xm, isum, k == 0)
				}
				dv := dscale(i, u)
				for j := 0; j < nr; j++ {
					VCVTDQ2PS(isum[j], isum[j])
					sc := YMM()
					VMULPS(Mem{Base: xr[j], Disp: xscale + 32*u}, dv, sc)
					VFMADD231PS(sc, isum[j], acc[i][j])
				}
			}
		}
	}

	n := Load(Param("n16"), GP64())
	countLoop("wide", n, func() {
		unit(8, func(i, u int) reg.VecVirtual { // blocks 8u .. 8u+7, one per lane
			dv := YMM()
			VMOVUPS(Mem{Base: dr[i], Disp: 32 * u}, dv)
			return dv
		}, 512)
		q8Advance(wr, dr, xr, wideWBytes, 64, wideXBytes)
	})
	Load(Param("n8"), n)
	countLoop("sc", n, func() {
		unit(4, func(i, u int) reg.VecVirtual { // blocks 4u .. 4u+3, one per lane pair
			dv := YMM()
			VPMOVZXDQ(Mem{Base: dr[i], Disp: 16 * u}, dv)
			VMOVSLDUP(dv, dv)
			return dv
		}, 256)
		q8Advance(wr, dr, xr, scWBytes, 32, scXBytes)
	})
	Load(Param("nchunk"), n)
	countLoop("chunk", n, func() {
		for i := 0; i < mr; i++ {
			for h := 0; h < 2; h++ {
				isum := make([]reg.VecVirtual, nr)
				xm := make([]Mem, nr)
				for j := range isum {
					isum[j] = YMM()
					xm[j] = Mem{Base: xr[j], Disp: 32 * h}
				}
				dot32(Mem{Base: wr[i], Disp: 32 * h}, xm, isum, true)
				dv := YMM()
				VBROADCASTSS(Mem{Base: dr[i], Disp: 4 * h}, dv)
				for j := 0; j < nr; j++ {
					VCVTDQ2PS(isum[j], isum[j])
					sc := YMM()
					VMULPS(Mem{Base: xr[j], Disp: 64 + 32*h}, dv, sc)
					VFMADD231PS(sc, isum[j], acc[i][j])
				}
			}
		}
		q8Advance(wr, dr, xr, 64, 8, chunkXBytes)
	})
	q8Epilogue(isaAVX2, acc, nr)
	VZEROUPPER()
	RET()
}
