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
	f32NRAVX2   = 3 // 4x3 for whole vectors only (no tail: 16 registers)
)

func genMatMul() {
	for _, s := range []isa{isaAVX512, isaAVX2} {
		nrMax := f32NRAVX512
		if !s.evex {
			nrMax = f32NRAVX2
		}
		for _, wk := range []weightKind{wF32, wF16, wBF16} {
			for _, mr := range []int{1, 4} {
				for nr := 1; nr <= nrMax; nr++ {
					f32Tile(s, mr, nr, wk)
				}
			}
		}
	}
	genQ8()
	genQ4K()
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

// weightKind is the element type of a float tile's weights: float32,
// or float16 or bfloat16 widened to float32 as they are loaded.
type weightKind int

const (
	wF32 weightKind = iota
	wF16
	wBF16
)

// f32Tile generates f32Tile{mr}x{nr}{isa} (F32 weights), or
// f16Tile{mr}x{nr}{isa} and bf16Tile{mr}x{nr}{isa} for wk's half-width
// weights: for i < mr, j < nr, out[j*ldo+i] = sum_k w[i*ldw+k] *
// x[j*ldx+k] over k < cols. The half-width tiles widen each weight vector
// exactly to float32 as they load it (VCVTPH2PS, or a zero-extension and
// a shift for bfloat16) and then do the F32 tile's operations in the same
// order, so their sums are bit for bit the F32 tile's on the widened
// weights; on AVX2 they take whole vectors only (cols a multiple of 8).
func f32Tile(s isa, mr, nr int, wk weightKind) {
	prefix, typ := "f32", "F32"
	switch wk {
	case wF16:
		prefix, typ = "f16", "F16"
	case wBF16:
		prefix, typ = "bf16", "BF16"
	}
	name := fmt.Sprintf("%sTile%dx%d%s", prefix, mr, nr, s.name)
	wsig := "*float32"
	if wk != wF32 {
		wsig = "*uint16"
	}
	TEXT(name, NOSPLIT, "func(w "+wsig+", ldw int, x *float32, ldx int, cols int, out *float32, ldo int)")
	Pragma("noescape")
	// AVX2 has 16 vector registers: a 4x3 tile's 12 sums, 3 activation
	// vectors and a weight vector leave none for a tail mask.
	whole := !s.evex && (mr*nr+nr+1 >= 16 || wk != wF32)
	if whole {
		Doc(fmt.Sprintf("%s computes a %dx%d tile of dot products of %s weight rows and activation rows; cols must be a multiple of %d.", name, mr, nr, typ, s.lanes))
	} else {
		Doc(fmt.Sprintf("%s computes a %dx%d tile of dot products of %s weight rows and activation rows.", name, mr, nr, typ))
	}

	wshift := uint8(2)
	if wk != wF32 {
		wshift = 1
	}
	wr := rowPtrs(Load(Param("w"), GP64()), loadStride("ldw", wshift), mr)
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
	var offh reg.GPVirtual // the weights' offset: half off for half-width weights
	if wk != wF32 {
		offh = GP64()
		XORQ(offh, offh)
	}
	// loadW widens the weight vector at m into dst.
	loadW := func(m Mem, dst reg.VecVirtual) {
		switch wk {
		case wF16:
			VCVTPH2PS(m, dst)
		case wBF16:
			VPMOVZXWD(m, dst)
			VPSLLD(U8(16), dst, dst)
		default:
			VMOVUPS(m, dst)
		}
	}

	step := func(load func(m Mem, dst reg.VecVirtual), loadW func(m Mem, dst reg.VecVirtual)) {
		xv := make([]reg.VecVirtual, nr)
		for j := range xv {
			xv[j] = s.vec()
			load(Mem{Base: xr[j], Index: off, Scale: 1}, xv[j])
		}
		for i := 0; i < mr; i++ {
			wv := s.vec()
			if wk == wF32 {
				loadW(Mem{Base: wr[i], Index: off, Scale: 1}, wv)
			} else {
				loadW(Mem{Base: wr[i], Index: offh, Scale: 1}, wv)
			}
			for j := 0; j < nr; j++ {
				VFMADD231PS(wv, xv[j], acc[i][j])
			}
		}
	}

	Label("loop")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	step(func(m Mem, dst reg.VecVirtual) { VMOVUPS(m, dst) }, loadW)
	ADDQ(U32(4*s.lanes), off)
	if wk != wF32 {
		ADDQ(U32(2*s.lanes), offh)
	}
	JMP(LabelRef("loop"))

	Label("tail")
	if !whole {
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
			masked := func(m Mem, dst reg.VecVirtual) { VMOVUPS_Z(m, k, dst) }
			maskedW := masked
			switch wk {
			case wF16:
				maskedW = func(m Mem, dst reg.VecVirtual) { VCVTPH2PS_Z(m, k, dst) }
			case wBF16:
				maskedW = func(m Mem, dst reg.VecVirtual) {
					VPMOVZXWD_Z(m, k, dst)
					VPSLLD(U8(16), dst, dst)
				}
			}
			step(masked, maskedW)
		} else {
			mask := avx2TailMask(rem)
			masked := func(m Mem, dst reg.VecVirtual) { VMASKMOVPS(m, mask, dst) }
			step(masked, masked)
		}
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
