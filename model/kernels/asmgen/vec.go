package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func genVec() {
	// (Axpy and Scale are package rowstat's, genRowStat: the kernels call
	// them there.)
	for _, s := range []isa{isaAVX512, isaAVX2} {
		dot(s)
	}
	maxAVX512()
	expSubSumAVX512()
	softmaxScaledAVX512()
	normScaleAVX512()
	siluMulAVX512()
	softmaxScaledAVX2()
	siluMulAVX2()
	dotStridedAVX512()
	axpyStrided(elemF32, isaAVX512)
	attention(elemF32)
	genF16()
	prefetchRows()
	ropeAVX512()
	transpose16AVX512(elemF32)
	transpose16AVX512(elemF16)
}

// ropeAVX512 generates the two RoPE kernels.
//
// ropeInterleavedAVX512(x, cos, sin *float32, half int), half a multiple
// of 8: pairs (x[2i], x[2i+1]) rotate by (cos[i], sin[i]). Per 8 pairs: x
// times the cosines, each doubled, plus x with its pairs swapped times
// the sines doubled with the first of each pair negated.
//
// ropeHalfAVX512(x, cos, sin *float32, half int), half a multiple of 16:
// pairs (x[i], x[half+i]).
func ropeAVX512() {
	dup := GLOBL("ropedup", RODATA|NOPTR) // VPERMPS index 0,0,1,1,...,7,7
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(uint32(i/2)))
	}
	neg := GLOBL("ropeneg", RODATA|NOPTR) // sign bit of the even lanes
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i%2 == 0 {
			v = 0x80000000
		}
		DATA(4*i, U32(v))
	}

	TEXT("ropeInterleavedAVX512", NOSPLIT, "func(x, cos, sin *float32, half int)")
	Pragma("noescape")
	Doc("ropeInterleavedAVX512 rotates the pairs (x[2i], x[2i+1]) by cos[i], sin[i], i < half (a multiple of 8).")
	x := Load(Param("x"), GP64())
	c := Load(Param("cos"), GP64())
	sn := Load(Param("sin"), GP64())
	n := Load(Param("half"), GP64())
	SHRQ(U8(3), n)
	idx, sgn := ZMM(), ZMM()
	VMOVDQU32(dup, idx)
	VMOVDQU32(neg, sgn)
	countLoop("il", n, func() {
		cd, sd, v, w := ZMM(), ZMM(), ZMM(), ZMM()
		// 32-byte loads (a 64-byte one could cross the end of the
		// slices), then lanes 0-7 spread over pairs of lanes.
		VMOVUPS(Mem{Base: c}, cd.AsY())
		VPERMPS(cd, idx, cd)
		VMOVUPS(Mem{Base: sn}, sd.AsY())
		VPERMPS(sd, idx, sd)
		VXORPS(sgn, sd, sd)
		VMOVUPS(Mem{Base: x}, v)
		VPERMILPS(U8(0xB1), v, w) // pairs swapped
		VMULPS(cd, v, v)
		VFMADD231PS(sd, w, v)
		VMOVUPS(v, Mem{Base: x})
		ADDQ(U8(64), x)
		ADDQ(U8(32), c)
		ADDQ(U8(32), sn)
	})
	VZEROUPPER()
	RET()

	TEXT("ropeHalfAVX512", NOSPLIT, "func(x, cos, sin *float32, half int)")
	Pragma("noescape")
	Doc("ropeHalfAVX512 rotates the pairs (x[i], x[half+i]) by cos[i], sin[i], i < half (a multiple of 16).")
	x = Load(Param("x"), GP64())
	c = Load(Param("cos"), GP64())
	sn = Load(Param("sin"), GP64())
	n = Load(Param("half"), GP64())
	hb := GP64()
	MOVQ(n, hb)
	SHLQ(U8(2), hb) // half in bytes
	SHRQ(U8(4), n)
	countLoop("hl", n, func() {
		lo, hi, cv, sv, t := ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
		VMOVUPS(Mem{Base: x}, lo)
		VMOVUPS(Mem{Base: x, Index: hb, Scale: 1}, hi)
		VMOVUPS(Mem{Base: c}, cv)
		VMOVUPS(Mem{Base: sn}, sv)
		VMULPS(sv, hi, t)
		VFMSUB231PS(cv, lo, t) // lo*c - hi*s
		VMULPS(cv, hi, hi)
		VFMADD231PS(sv, lo, hi) // lo*s + hi*c
		VMOVUPS(t, Mem{Base: x})
		VMOVUPS(hi, Mem{Base: x, Index: hb, Scale: 1})
		ADDQ(U8(64), x)
		ADDQ(U8(64), c)
		ADDQ(U8(64), sn)
	})
	VZEROUPPER()
	RET()
}

// prefetchRows generates prefetchRows(p *byte, rows, rowBytes, stride
// int): PREFETCHT0 of every 64-byte line of rows rows of rowBytes bytes,
// stride bytes apart. Prefetches never fault.
func prefetchRows() {
	TEXT("prefetchRows", NOSPLIT, "func(p *byte, rows int, rowBytes int, stride int)")
	Pragma("noescape")
	Doc("prefetchRows prefetches the lines of rows rows of rowBytes bytes, stride bytes apart, from p.")
	p := Load(Param("p"), GP64())
	rows := Load(Param("rows"), GP64())
	rb := Load(Param("rowBytes"), GP64())
	st := Load(Param("stride"), GP64())
	off := GP64()
	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	XORQ(off, off)
	Label("line")
	CMPQ(off, rb)
	JAE(LabelRef("next"))
	PREFETCHT0(Mem{Base: p, Index: off, Scale: 1})
	ADDQ(U8(64), off)
	JMP(LabelRef("line"))
	Label("next")
	ADDQ(st, p)
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	RET()
}

// broadcastConst returns a full-width vector with every 32-bit lane = bits.
func broadcastConst(s isa, bits uint32) reg.VecVirtual {
	g := GP32()
	MOVL(U32(bits), g)
	v := s.vec()
	if s.evex {
		VPBROADCASTD(g, v)
		return v
	}
	VMOVD(g, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// dot generates dot{isa}(a, b *float32, n int) float32 = sum a[i]*b[i].
func dot(s isa) {
	name := "dot" + s.name
	TEXT(name, NOSPLIT, "func(a, b *float32, n int) float32")
	Pragma("noescape")
	Doc(name + " returns sum a[i]*b[i] for i < n.")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	const unroll = 4
	acc := make([]reg.VecVirtual, unroll)
	for i := range acc {
		acc[i] = s.vec()
		VXORPS(acc[i], acc[i], acc[i])
	}
	vb := 4 * s.lanes // bytes per vector
	off := GP64()
	XORQ(off, off)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-unroll*s.lanes), end)
	SHLQ(U8(2), end)

	Label("loop4")
	CMPQ(off, end)
	JAE(LabelRef("loop1"))
	for u := 0; u < unroll; u++ {
		v := s.vec()
		VMOVUPS(Mem{Base: a, Index: off, Scale: 1, Disp: u * vb}, v)
		VFMADD231PS(Mem{Base: b, Index: off, Scale: 1, Disp: u * vb}, v, acc[u])
	}
	ADDQ(U32(unroll*vb), off)
	JMP(LabelRef("loop4"))

	Label("loop1")
	MOVQ(n, end)
	ANDQ(I32(-s.lanes), end)
	SHLQ(U8(2), end)
	Label("loop1b")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	v := s.vec()
	VMOVUPS(Mem{Base: a, Index: off, Scale: 1}, v)
	VFMADD231PS(Mem{Base: b, Index: off, Scale: 1}, v, acc[1])
	ADDQ(U32(vb), off)
	JMP(LabelRef("loop1b"))

	Label("tail")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U32(s.lanes-1), rem)
	if s.evex {
		JZ(LabelRef("reduce"))
		bits := GP64()
		MOVQ(I32(-1), bits)
		BZHIQ(rem, bits, bits)
		k := K()
		KMOVW(bits.As32(), k)
		va, vbv := s.vec(), s.vec()
		VMOVUPS_Z(Mem{Base: a, Index: off, Scale: 1}, k, va)
		VMOVUPS_Z(Mem{Base: b, Index: off, Scale: 1}, k, vbv)
		VFMADD231PS(vbv, va, acc[0])
		Label("reduce")
		x := hsum(s, acc[0])
		Store(x, ReturnIndex(0))
		VZEROUPPER()
		RET()
		return
	}
	// AVX2: reduce the vector part, then add the scalar tail.
	x := hsum(s, acc[0])
	Label("scalar")
	TESTQ(rem, rem)
	JZ(LabelRef("done"))
	t := XMM()
	VMOVSS(Mem{Base: a, Index: off, Scale: 1}, t)
	VFMADD231SS(Mem{Base: b, Index: off, Scale: 1}, t, x)
	ADDQ(U8(4), off)
	DECQ(rem)
	JMP(LabelRef("scalar"))
	Label("done")
	Store(x, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// hsum reduces a float vector to its lane sum in lane 0 of an XMM view.
func hsum(s isa, v reg.VecVirtual) reg.Register {
	x := toXMM(s, v)
	t := XMM()
	VSHUFPS(U8(0xEE), x, x, t)
	VADDPS(t, x, x)
	VSHUFPS(U8(0x55), x, x, t)
	VADDSS(t, x, x)
	return x
}

// axpy generates axpy{isa}(a float32, x, y *float32, n int): y[i] += a*x[i].
func axpy(s isa) {
	name := "axpy" + s.name
	TEXT(name, NOSPLIT, "func(a float32, x, y *float32, n int)")
	Pragma("noescape")
	Doc(name + " computes y[i] += a*x[i] for i < n (fused multiply-add).")
	as := Load(Param("a"), XMM())
	av := s.vec()
	VBROADCASTSS(as, av)
	x := Load(Param("x"), GP64())
	y := Load(Param("y"), GP64())
	n := Load(Param("n"), GP64())
	const unroll = 4
	vb := 4 * s.lanes
	off := GP64()
	XORQ(off, off)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-unroll*s.lanes), end)
	SHLQ(U8(2), end)

	Label("loop4")
	CMPQ(off, end)
	JAE(LabelRef("loop1"))
	for u := 0; u < unroll; u++ {
		v := s.vec()
		VMOVUPS(Mem{Base: y, Index: off, Scale: 1, Disp: u * vb}, v)
		VFMADD231PS(Mem{Base: x, Index: off, Scale: 1, Disp: u * vb}, av, v)
		VMOVUPS(v, Mem{Base: y, Index: off, Scale: 1, Disp: u * vb})
	}
	ADDQ(U32(unroll*vb), off)
	JMP(LabelRef("loop4"))

	Label("loop1")
	MOVQ(n, end)
	ANDQ(I32(-s.lanes), end)
	SHLQ(U8(2), end)
	Label("loop1b")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	v := s.vec()
	VMOVUPS(Mem{Base: y, Index: off, Scale: 1}, v)
	VFMADD231PS(Mem{Base: x, Index: off, Scale: 1}, av, v)
	VMOVUPS(v, Mem{Base: y, Index: off, Scale: 1})
	ADDQ(U32(vb), off)
	JMP(LabelRef("loop1b"))

	Label("tail")
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U32(s.lanes-1), rem)
	JZ(LabelRef("done"))
	if s.evex {
		bits := GP64()
		MOVQ(I32(-1), bits)
		BZHIQ(rem, bits, bits)
		k := K()
		KMOVW(bits.As32(), k)
		v := s.vec()
		VMOVUPS_Z(Mem{Base: y, Index: off, Scale: 1}, k, v)
		xv := s.vec()
		VMOVUPS_Z(Mem{Base: x, Index: off, Scale: 1}, k, xv)
		VFMADD231PS(xv, av, v)
		VMOVUPS(v, k, Mem{Base: y, Index: off, Scale: 1})
	} else {
		Label("scalar")
		t := XMM()
		VMOVSS(Mem{Base: y, Index: off, Scale: 1}, t)
		VFMADD231SS(Mem{Base: x, Index: off, Scale: 1}, av.AsX(), t)
		VMOVSS(t, Mem{Base: y, Index: off, Scale: 1})
		ADDQ(U8(4), off)
		DECQ(rem)
		JNZ(LabelRef("scalar"))
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// maxToLane0 leaves the largest of v's 16 floats in its lane 0 and
// returns the YMM and XMM temporaries it used, free for reuse.
func maxToLane0(v reg.VecVirtual) (hy, hx reg.VecVirtual) {
	hy = YMM()
	VEXTRACTF64X4(U8(1), v, hy)
	VMAXPS(hy, v.AsY(), v.AsY())
	hx = XMM()
	VEXTRACTF32X4(U8(1), v.AsY(), hx)
	VMAXPS(hx, v.AsX(), v.AsX())
	VSHUFPS(U8(0xEE), v.AsX(), v.AsX(), hx)
	VMAXPS(hx, v.AsX(), v.AsX())
	VSHUFPS(U8(0x55), v.AsX(), v.AsX(), hx)
	VMAXSS(hx, v.AsX(), v.AsX())
	return hy, hx
}

// tailMask sets k to the low rem (1..15) lanes.
func tailMask(rem reg.Register) reg.OpmaskVirtual {
	bits := GP64()
	MOVQ(I32(-1), bits)
	BZHIQ(rem, bits, bits)
	k := K()
	KMOVW(bits.As32(), k)
	return k
}

// maxAVX512 generates maxAVX512(x *float32, n int) float32 = max x[i], n >= 1.
func maxAVX512() {
	TEXT("maxAVX512", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("maxAVX512 returns the largest of x[0..n), n >= 1.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	acc := ZMM()
	VBROADCASTSS(Mem{Base: x}, acc)
	off := GP64()
	XORQ(off, off)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-16), end)
	SHLQ(U8(2), end)
	Label("loop")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	VMAXPS(Mem{Base: x, Index: off, Scale: 1}, acc, acc)
	ADDQ(U8(64), off)
	JMP(LabelRef("loop"))
	Label("tail")
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U8(15), rem)
	JZ(LabelRef("reduce"))
	k := tailMask(rem)
	VMAXPS(Mem{Base: x, Index: off, Scale: 1}, acc, k, acc) // merge: other lanes keep acc
	Label("reduce")
	maxToLane0(acc)
	Store(acc.AsX(), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// expConsts are the registers of exp16 (Cephes expf: e^x = 2^t * e^r,
// t = round(x*log2 e), |r| <= ln2/2, e^r by a degree-7 polynomial).
type expConsts struct {
	lo, hi, log2e, ln2hi, ln2lo, one reg.VecVirtual
	p                                [6]reg.VecVirtual
}

func bcast(f float32) reg.VecVirtual {
	return broadcastConst(isaAVX512, math.Float32bits(f))
}

func newExpConsts() *expConsts {
	c := &expConsts{
		lo:    bcast(-103.9), // below: 2^t underflows to 0 (VSCALEFPS)
		hi:    bcast(100),    // above 88.72 e^x overflows to +Inf, as it should
		log2e: bcast(1.44269504088896341),
		ln2hi: bcast(0.693359375),
		ln2lo: bcast(-2.12194440e-4),
		one:   bcast(1),
	}
	for i, f := range []float32{5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4} {
		c.p[i] = bcast(f)
	}
	return c
}

// exp16 returns e^v lane-wise (v is clobbered).
func exp16(c *expConsts, v reg.VecVirtual) reg.VecVirtual {
	VMAXPS(c.lo, v, v)
	VMINPS(c.hi, v, v)
	t := ZMM()
	VMULPS(c.log2e, v, t)
	VRNDSCALEPS(U8(0), t, t) // round to nearest even integer
	VFNMADD231PS(c.ln2hi, t, v)
	VFNMADD231PS(c.ln2lo, t, v) // v = r
	p := ZMM()
	VMOVAPS(c.p[5], p)
	for i := 4; i >= 0; i-- {
		VFMADD213PS(c.p[i], v, p) // p = p*r + c_i
	}
	r2 := ZMM()
	VMULPS(v, v, r2)
	VFMADD213PS(v, r2, p) // p = p*r^2 + r
	VADDPS(c.one, p, p)
	VSCALEFPS(t, p, p) // p * 2^t
	return p
}

// expSubSumAVX512 generates expSubSumAVX512(x *float32, n int, m float32)
// float32: x[i] = e^(x[i]-m), returning the sum.
func expSubSumAVX512() {
	TEXT("expSubSumAVX512", NOSPLIT, "func(x *float32, n int, m float32) float32")
	Pragma("noescape")
	Doc("expSubSumAVX512 sets x[i] = exp(x[i]-m) for i < n and returns their sum.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	ms := Load(Param("m"), XMM())
	mv := ZMM()
	VBROADCASTSS(ms, mv)
	c := newExpConsts()
	sum := ZMM()
	VXORPS(sum, sum, sum)
	off := GP64()
	XORQ(off, off)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-16), end)
	SHLQ(U8(2), end)
	Label("loop")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	v := ZMM()
	VMOVUPS(Mem{Base: x, Index: off, Scale: 1}, v)
	VSUBPS(mv, v, v)
	e := exp16(c, v)
	VMOVUPS(e, Mem{Base: x, Index: off, Scale: 1})
	VADDPS(e, sum, sum)
	ADDQ(U8(64), off)
	JMP(LabelRef("loop"))
	Label("tail")
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U8(15), rem)
	JZ(LabelRef("reduce"))
	k := tailMask(rem)
	v = ZMM()
	VMOVUPS_Z(Mem{Base: x, Index: off, Scale: 1}, k, v)
	VSUBPS(mv, v, v)
	e = exp16(c, v)
	VMOVUPS(e, k, Mem{Base: x, Index: off, Scale: 1})
	VADDPS(e, sum, k, sum)
	Label("reduce")
	s := hsum(isaAVX512, sum)
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// floatRange walks n float32s 64 bytes (16 lanes) at a time: whole vectors,
// then the tail of n%16 under the mask k. Its registers are set up once,
// so that several loops can walk the same range.
type floatRange struct {
	off, end, rem reg.Register
	k             reg.OpmaskVirtual
}

func newFloatRange(n reg.Register) floatRange {
	r := floatRange{off: GP64(), end: GP64(), rem: GP64()}
	MOVQ(n, r.end)
	ANDQ(I32(-16), r.end)
	SHLQ(U8(2), r.end) // bytes of the whole vectors
	MOVQ(n, r.rem)
	ANDQ(U8(15), r.rem)
	r.k = tailMask(r.rem)
	return r
}

// at is element off/4 of the array at base.
func (r floatRange) at(base reg.Register) Mem { return Mem{Base: base, Index: r.off, Scale: 1} }

// loop emits body(false) for each whole vector, then body(true) for the
// tail (mask r.k) if there is one; labels start with name.
func (r floatRange) loop(name string, body func(tail bool)) {
	rangeLoop(r.off, r.end, r.rem, 64, name, body)
}

// rangeLoop emits the loop of floatRange and floatRange8: body(false) for
// each whole vector (off stepping by step bytes up to end), then
// body(true) for the tail if rem, its element count, is not zero.
func rangeLoop(off, end, rem reg.Register, step uint8, name string, body func(tail bool)) {
	XORQ(off, off)
	Label(name)
	CMPQ(off, end)
	JAE(LabelRef(name + "tail"))
	body(false)
	ADDQ(U8(step), off)
	JMP(LabelRef(name))
	Label(name + "tail")
	TESTQ(rem, rem)
	JZ(LabelRef(name + "done"))
	body(true)
	Label(name + "done")
}

// softmaxScaledAVX512 generates softmaxScaledAVX512(x *float32, n int,
// a float32): x[i] *= a, then the softmax of x in place, in one call and
// bit for bit what scaleAVX512, maxAVX512, expSubSumAVX512 and scaleAVX512
// by 1/sum do in turn (the same operations in the same order; attention
// ran those four calls per head and row, most of a softmax's time for a
// few hundred scores).
func softmaxScaledAVX512() {
	TEXT("softmaxScaledAVX512", NOSPLIT, "func(x *float32, n int, a float32)")
	Pragma("noescape")
	Doc("softmaxScaledAVX512 sets x[i] *= a for i < n, n >= 1, then x to its softmax.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	as := Load(Param("a"), XMM())
	av := ZMM()
	VBROADCASTSS(as, av)
	r := newFloatRange(n)
	k := r.k

	// x *= a and the max, from x[0]*a as maxAVX512 starts from x[0].
	acc := ZMM()
	x0 := XMM()
	VMULSS(Mem{Base: x}, as, x0)
	VBROADCASTSS(x0, acc)
	r.loop("scale", func(tail bool) {
		m, v := r.at(x), ZMM()
		if tail {
			VMOVUPS_Z(m, k, v)
			VMULPS(v, av, v)
			VMOVUPS(v, k, m)
			VMAXPS(v, acc, k, acc) // merge: other lanes keep acc
			return
		}
		VMULPS(m, av, v)
		VMOVUPS(v, m)
		VMAXPS(v, acc, acc)
	})
	maxToLane0(acc)
	mv := ZMM()
	VBROADCASTSS(acc.AsX(), mv)

	// x = e^(x - max), summed.
	c := newExpConsts()
	sum := ZMM()
	VXORPS(sum, sum, sum)
	r.loop("exp", func(tail bool) {
		m, v := r.at(x), ZMM()
		if tail {
			VMOVUPS_Z(m, k, v)
		} else {
			VMOVUPS(m, v)
		}
		VSUBPS(mv, v, v)
		e := exp16(c, v)
		if tail {
			VMOVUPS(e, k, m)
			VADDPS(e, sum, k, sum)
			return
		}
		VMOVUPS(e, m)
		VADDPS(e, sum, sum)
	})
	total := hsum(isaAVX512, sum)

	// x *= 1/sum.
	inv := XMM()
	VMOVAPS(c.one.AsX(), inv)
	VDIVSS(total, inv, inv)
	iv := ZMM()
	VBROADCASTSS(inv, iv)
	r.loop("norm", func(tail bool) {
		m, v := r.at(x), ZMM()
		if tail {
			VMOVUPS_Z(m, k, v)
			VMULPS(v, iv, v)
			VMOVUPS(v, k, m)
			return
		}
		VMULPS(m, iv, v)
		VMOVUPS(v, m)
	})
	VZEROUPPER()
	RET()
}

// scaleAVX512 generates scaleAVX512(x *float32, n int, a float32): x[i] *= a.
func scaleAVX512() { scaledAVX512("scaleAVX512", false) }

// normScaleAVX512 generates normScaleAVX512(out, x, w *float32, n int,
// a float32): out[i] = w[i] * (a * x[i]), RMSNorm's second pass, in the
// order of operations of the Go loop.
func normScaleAVX512() { scaledAVX512("normScaleAVX512", true) }

// scaledAVX512 generates a*x[i], in place, or (withW) times w[i] into out.
func scaledAVX512(name string, withW bool) {
	if withW {
		TEXT(name, NOSPLIT, "func(out, x, w *float32, n int, a float32)")
		Doc(name + " sets out[i] = w[i] * (a * x[i]) for i < n.")
	} else {
		TEXT(name, NOSPLIT, "func(x *float32, n int, a float32)")
		Doc(name + " sets x[i] *= a for i < n.")
	}
	Pragma("noescape")
	var out, w reg.Register
	if withW {
		out = Load(Param("out"), GP64())
	}
	x := Load(Param("x"), GP64())
	if withW {
		w = Load(Param("w"), GP64())
	} else {
		out = x
	}
	n := Load(Param("n"), GP64())
	av := ZMM()
	VBROADCASTSS(Load(Param("a"), XMM()), av)
	r := newFloatRange(n)
	r.loop("loop", func(tail bool) {
		v := ZMM()
		if !tail {
			VMULPS(r.at(x), av, v)
			if withW {
				VMULPS(r.at(w), v, v)
			}
			VMOVUPS(v, r.at(out))
			return
		}
		VMOVUPS_Z(r.at(x), r.k, v)
		VMULPS(v, av, v)
		if withW {
			wv := ZMM()
			VMOVUPS_Z(r.at(w), r.k, wv)
			VMULPS(wv, v, v)
		}
		VMOVUPS(v, r.k, r.at(out))
	})
	VZEROUPPER()
	RET()
}

// siluMulAVX512 generates siluMulAVX512(h, g *float32, n int):
// h[i] = h[i] / (1 + e^-h[i]) * g[i].
func siluMulAVX512() {
	TEXT("siluMulAVX512", NOSPLIT, "func(h, gate *float32, n int)")
	Pragma("noescape")
	Doc("siluMulAVX512 sets h[i] = silu(h[i]) * g[i] for i < n.")
	h := Load(Param("h"), GP64())
	g := Load(Param("gate"), GP64())
	n := Load(Param("n"), GP64())
	c := newExpConsts()
	off := GP64()
	XORQ(off, off)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-16), end)
	SHLQ(U8(2), end)
	body := func(load func(m Mem, dst reg.VecVirtual), store func(v reg.VecVirtual, m Mem)) {
		v, gv := ZMM(), ZMM()
		load(Mem{Base: h, Index: off, Scale: 1}, v)
		load(Mem{Base: g, Index: off, Scale: 1}, gv)
		neg := ZMM()
		VXORPS(neg, neg, neg)
		VSUBPS(v, neg, neg) // -v
		e := exp16(c, neg)
		VADDPS(c.one, e, e)
		VMULPS(gv, v, v)
		VDIVPS(e, v, v) // v*g / (1+e^-v)
		store(v, Mem{Base: h, Index: off, Scale: 1})
	}
	Label("loop")
	CMPQ(off, end)
	JAE(LabelRef("tail"))
	body(func(m Mem, dst reg.VecVirtual) { VMOVUPS(m, dst) }, func(v reg.VecVirtual, m Mem) { VMOVUPS(v, m) })
	ADDQ(U8(64), off)
	JMP(LabelRef("loop"))
	Label("tail")
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U8(15), rem)
	JZ(LabelRef("done"))
	k := tailMask(rem)
	body(func(m Mem, dst reg.VecVirtual) { VMOVUPS_Z(m, k, dst) }, func(v reg.VecVirtual, m Mem) { VMOVUPS(v, k, m) })
	Label("done")
	VZEROUPPER()
	RET()
}

// dotStridedAVX512 generates dotStridedAVX512(out, q, k *float32, dim,
// stride, n int): out[t] = sum_i q[i]*k[t*stride+i] over i < dim, for t < n
// (attention scores of one query against n cached keys), four keys per pass
// so that each load of q serves four dot products.
func dotStridedAVX512() {
	TEXT("dotStridedAVX512", NOSPLIT, "func(out, q, k *float32, dim, stride, n int)")
	Pragma("noescape")
	Doc("dotStridedAVX512 sets out[t] = dot(q[:dim], k[t*stride:][:dim]) for t < n.")
	out := Load(Param("out"), GP64())
	q := Load(Param("q"), GP64())
	k := Load(Param("k"), GP64())
	dim := Load(Param("dim"), GP64())
	sb := loadStride("stride", 2)
	n := Load(Param("n"), GP64())

	end := GP64()
	MOVQ(dim, end)
	ANDQ(I32(-16), end)
	SHLQ(U8(2), end)
	rem := GP64()
	MOVQ(dim, rem)
	ANDQ(U8(15), rem)
	bits := GP64()
	MOVQ(I32(-1), bits)
	BZHIQ(rem, bits, bits)
	mask := K()
	KMOVW(bits.As32(), mask)

	// group computes g dot products (g = 4 or 1) for keys at kp[0..g).
	group := func(g int, label string) {
		kp := rowPtrs(k, sb, g)
		acc := make([]reg.VecVirtual, g)
		for i := range acc {
			acc[i] = ZMM()
			VXORPS(acc[i], acc[i], acc[i])
		}
		off := GP64()
		XORQ(off, off)
		Label(label + "loop")
		CMPQ(off, end)
		JAE(LabelRef(label + "tail"))
		qv := ZMM()
		VMOVUPS(Mem{Base: q, Index: off, Scale: 1}, qv)
		for i := range acc {
			VFMADD231PS(Mem{Base: kp[i], Index: off, Scale: 1}, qv, acc[i])
		}
		ADDQ(U8(64), off)
		JMP(LabelRef(label + "loop"))
		Label(label + "tail")
		TESTQ(rem, rem)
		JZ(LabelRef(label + "sum"))
		qv = ZMM()
		VMOVUPS_Z(Mem{Base: q, Index: off, Scale: 1}, mask, qv)
		for i := range acc {
			kv := ZMM()
			VMOVUPS_Z(Mem{Base: kp[i], Index: off, Scale: 1}, mask, kv)
			VFMADD231PS(kv, qv, acc[i])
		}
		Label(label + "sum")
		storeSum4(isaAVX512, acc, Mem{Base: out})
	}

	Label("quad")
	CMPQ(n, U8(4))
	JB(LabelRef("single"))
	group(4, "q")
	ADDQ(U8(16), out)
	for i := 0; i < 4; i++ {
		ADDQ(sb, k)
	}
	SUBQ(U8(4), n)
	JMP(LabelRef("quad"))

	Label("single")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	group(1, "s")
	ADDQ(U8(4), out)
	ADDQ(sb, k)
	DECQ(n)
	JMP(LabelRef("single"))

	Label("done")
	VZEROUPPER()
	RET()
}

// axpyStrided generates axpyStrided{e}{isa}(y, a *float32, v *e, dim,
// stride, n int): y[i] += sum_t a[t]*v[t*stride+i] over t < n, for i < dim
// (attention's weighted sum of n cached values), keeping four vectors of y
// in registers while it runs over all t. Each element of y is one chain of
// fused multiply-adds in t order. It is generated for float32 on AVX-512
// (on AVX2, AxpyStrided calls axpyAVX2 once per t, the same arithmetic)
// and for F16 on AVX2 (on AVX-512, AxpyStridedF16 runs
// axpyStridedF16N1AVX512).
func axpyStrided(e elem, s isa) {
	name := e.name("axpyStrided", s.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(y, a *float32, v *%s, dim, stride, n int)", e.goType))
	Pragma("noescape")
	Doc(name + " adds sum_t a[t]*v[t*stride:][:dim] to y[:dim] over t < n" + e.note("v") + ".")
	y := Load(Param("y"), GP64())
	a := Load(Param("a"), GP64())
	v := Load(Param("v"), GP64())
	dim := Load(Param("dim"), GP64())
	sb := loadStride("stride", e.shift)
	n := Load(Param("n"), GP64())
	vb := s.lanes * e.size // bytes of v per vector

	// tail describes a last partial vector: the lanes in k (AVX-512), or
	// in ym, with v's elements loaded by partial (AVX2).
	type tail struct {
		k       reg.OpmaskVirtual
		ym      reg.VecVirtual
		partial partialLoad
	}

	// pass accumulates width vectors of y starting at element yo/size (yo:
	// byte offset in a row of v), over all t; with tl, the last vector is
	// partial.
	pass := func(width int, tl *tail, label string, yo reg.Register) {
		acc := make([]reg.VecVirtual, width)
		last := func(u int) bool { return tl != nil && u == width-1 }
		ymem := func(u int) Mem { return Mem{Base: y, Index: yo, Scale: e.floatScale(), Disp: 4 * s.lanes * u} }
		for u := range acc {
			acc[u] = s.vec()
			switch {
			case !last(u):
				VMOVUPS(ymem(u), acc[u])
			case s.evex:
				VMOVUPS_Z(ymem(u), tl.k, acc[u])
			default:
				VMASKMOVPS(ymem(u), tl.ym, acc[u])
			}
		}
		vp, ap, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: v, Index: yo, Scale: 1}, vp)
		MOVQ(a, ap)
		MOVQ(n, cnt)
		Label(label + "t")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "store"))
		av := s.vec()
		VBROADCASTSS(Mem{Base: ap}, av)
		for u := range acc {
			m := Mem{Base: vp, Disp: vb * u}
			switch {
			case !last(u):
				VFMADD231PS(e.src(m, s.vec), av, acc[u])
			case s.evex:
				t := ZMM()
				e.loadZ(m, tl.k, t)
				VFMADD231PS(t, av, acc[u])
			default:
				tl.partial(m, []reg.VecVirtual{tl.ym}, func(_ int, t reg.VecVirtual) { VFMADD231PS(t, av, acc[u]) })
			}
		}
		ADDQ(sb, vp)
		ADDQ(U8(4), ap)
		DECQ(cnt)
		JMP(LabelRef(label + "t"))
		Label(label + "store")
		for u := range acc {
			switch {
			case !last(u):
				VMOVUPS(acc[u], ymem(u))
			case s.evex:
				VMOVUPS(acc[u], tl.k, ymem(u))
			default:
				VMASKMOVPS(acc[u], tl.ym, ymem(u))
			}
		}
	}

	yo := GP64()
	XORQ(yo, yo)
	end := GP64()
	// Passes of four vectors.
	MOVQ(dim, end)
	ANDQ(I32(-4*s.lanes), end)
	SHLQ(U8(e.shift), end)
	Label("wide")
	CMPQ(yo, end)
	JAE(LabelRef("narrow"))
	pass(4, nil, "w", yo)
	ADDQ(U32(4*vb), yo)
	JMP(LabelRef("wide"))
	// Passes of one vector.
	Label("narrow")
	MOVQ(dim, end)
	ANDQ(I32(-s.lanes), end)
	SHLQ(U8(e.shift), end)
	Label("narrowloop")
	CMPQ(yo, end)
	JAE(LabelRef("tail"))
	pass(1, nil, "n", yo)
	ADDQ(U8(vb), yo)
	JMP(LabelRef("narrowloop"))
	// The last dim%lanes floats.
	Label("tail")
	rem := GP64()
	MOVQ(dim, rem)
	ANDQ(U8(s.lanes-1), rem)
	JZ(LabelRef("done"))
	if s.evex {
		pass(1, &tail{k: tailMask(rem)}, "m", yo)
	} else {
		tl := &tail{partial: e.partialAVX2(rem, s.lanes), ym: YMM()}
		idx := YMM()
		g := GP64()
		MOVQ(U64(0x0706050403020100), g)
		VMOVQ(g, idx.AsX())
		VPMOVZXBD(idx.AsX(), idx) // [0 1 ... 7]
		VMOVQ(rem, tl.ym.AsX())
		VPBROADCASTD(tl.ym.AsX(), tl.ym)
		VPCMPGTD(idx, tl.ym, tl.ym) // rem > i
		pass(1, tl, "m", yo)
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// elem describes the element type of the keys or values an attention
// kernel reads (what the KV cache stores), so that one generator body
// emits the kernel for float32 and for binary16 caches. The queries,
// weights and results are float32 either way; only the way a vector of
// keys or values reaches a register differs: float32 elements are loaded
// as they are (or serve as a memory operand), binary16 halves are widened
// by VCVTPH2PS, which is exact, so that an F16 kernel computes bit for bit
// what its float32 twin computes on the widened data.
type elem struct {
	suffix  string // inserted after the kernel's stem in function names
	goType  string // the Go element type in the signature
	docNote string // appended to the doc: "" or " (%s halves)" (%s: the operand)
	size    int    // bytes per element
	shift   uint8  // log2(size)
	// direct: a full vector of elements in memory is its float32 lanes,
	// so an arithmetic instruction can take it as its memory operand.
	direct bool
	// load sets dst to the float32 lanes of the full vector of elements
	// at m (the width of dst decides how many).
	load func(m Mem, dst reg.VecVirtual)
	// loadZ is load for the lanes set in k; the others are zeroed and
	// their elements not read.
	loadZ func(m Mem, k reg.OpmaskVirtual, dst reg.VecVirtual)
	// partialAVX2 prepares, for w (1 <= w <= lanes) in a register, AVX2
	// loads of the first w elements of rows of lanes (4, 8 or 16)
	// elements that read no byte past them.
	partialAVX2 func(w reg.Register, lanes int) partialLoad
}

// partialLoad loads the first w elements of the row at m (see
// elem.partialAVX2) as len(masks) vectors of float32 lanes, masks[h]
// having lane i of vector h set when that lane is one of the w, and
// passes vector h to use(h, v) as soon as it is loaded. Lanes past w are
// zero.
type partialLoad func(m Mem, masks []reg.VecVirtual, use func(h int, v reg.VecVirtual))

var elemF32 = elem{
	goType: "float32",
	size:   4,
	shift:  2,
	direct: true,
	load:   func(m Mem, dst reg.VecVirtual) { VMOVUPS(m, dst) },
	loadZ:  func(m Mem, k reg.OpmaskVirtual, dst reg.VecVirtual) { VMOVUPS_Z(m, k, dst) },
	partialAVX2: func(reg.Register, int) partialLoad {
		return func(m Mem, masks []reg.VecVirtual, use func(h int, v reg.VecVirtual)) {
			for h, mk := range masks {
				v := vecLike(mk)
				VMASKMOVPS(m.Offset(h*int(mk.Size())), mk, v)
				use(h, v)
			}
		}
	},
}

// vecLike allocates a vector register as wide as v (XMM or YMM).
func vecLike(v reg.Register) reg.VecVirtual {
	if v.Size() == 32 {
		return YMM()
	}
	return XMM()
}

// name is the function name stem+suffix+rest, e.g. scoresTF16N2AVX512.
func (e elem) name(stem, rest string) string { return stem + e.suffix + rest }

// note is the doc remark on operand p: none for float32.
func (e elem) note(p string) string {
	if e.docNote == "" {
		return ""
	}
	return fmt.Sprintf(e.docNote, p)
}

// floatScale is the index scale that turns a byte offset in elements into
// the byte offset of the same index in float32s.
func (e elem) floatScale() uint8 { return uint8(4 / e.size) }

// src returns the float32 lanes of the full vector of elements at m as an
// operand of an arithmetic instruction: m itself if e is direct, else a
// register from vec that load fills.
func (e elem) src(m Mem, vec func() reg.VecVirtual) Op {
	if e.direct {
		return m
	}
	v := vec()
	e.load(m, v)
	return v
}

// srcZ is src for an instruction masked by k: merge masking keeps the
// lanes off in k from being read from memory, and for other elements
// loadZ reads only the lanes set in k.
func (e elem) srcZ(m Mem, k reg.OpmaskVirtual, vec func() reg.VecVirtual) Op {
	if e.direct {
		return m
	}
	v := vec()
	e.loadZ(m, k, v)
	return v
}

// attention generates the attention kernels for keys and values of e.
func attention(e elem) {
	for nq := 1; nq <= 4; nq++ {
		scoresTNAVX512(e, nq)
		axpyStridedNAVX512(e, nq)
	}
	for nb := 2; nb <= 4; nb++ {
		scoresTBAVX512(e, nb)
	}
	scoresTAVX2(e)
	scoresRows(e, isaAVX512)
	scoresRows(e, isaAVX2)
}

// quadRow returns row u (0 to 3) of the four rows from base that are
// stride bytes apart (stride3 = 3*stride).
func quadRow(base, stride, stride3 reg.Register, u int) Mem {
	switch u {
	case 0:
		return Mem{Base: base}
	case 1:
		return Mem{Base: base, Index: stride, Scale: 1}
	case 2:
		return Mem{Base: base, Index: stride, Scale: 2}
	}
	return Mem{Base: base, Index: stride3, Scale: 1}
}

// quadLoop is the loop over the dimensions of the transposed-key kernels:
// cnt passes of step(0), ..., step(3) and next(), then step(u) for u <
// rem, the last dim%4 dimensions (rem emits what puts that count in a
// register). Labels start with label; it ends at label+"sum".
func quadLoop(label string, cnt reg.Register, rem func() reg.Register, step func(u int), next func()) {
	Label(label + "quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef(label + "rem"))
	for u := 0; u < 4; u++ {
		step(u)
	}
	next()
	DECQ(cnt)
	JMP(LabelRef(label + "quad"))
	// The last dim%4 rows go to accumulators 0, 1, 2.
	Label(label + "rem")
	r := rem()
	for u := 0; u < 3; u++ {
		CMPQ(r, U8(u))
		JE(LabelRef(label + "sum"))
		step(u)
	}
	Label(label + "sum")
}

// dimRem returns a function for quadLoop that loads dim%4 into r.
func dimRem(r reg.Register) func() reg.Register {
	return func() reg.Register {
		Load(Param("dim"), r)
		ANDQ(U8(3), r)
		return r
	}
}

// sum4 sets a0 = (a0+a1)+(a2+a3), the kernels' final order of the four
// partial sums over d mod 4.
func sum4(a0, a1, a2, a3 reg.VecVirtual) {
	VADDPS(a1, a0, a0)
	VADDPS(a3, a2, a2)
	VADDPS(a2, a0, a0)
}

// zeroAcc4 allocates n sets of four zeroed ZMM accumulators.
func zeroAcc4(n int) [][4]reg.VecVirtual {
	acc := make([][4]reg.VecVirtual, n)
	for i := range acc {
		for u := range acc[i] {
			acc[i][u] = ZMM()
			VXORPS(acc[i][u], acc[i][u], acc[i][u])
		}
	}
	return acc
}

// chunkMask opens the loop over the chunks of 16 slots at label "chunk":
// it jumps to "done" once n <= 0, and sets k to the chunk's first
// min(n, 16) lanes.
func chunkMask(n reg.Register, k reg.OpmaskVirtual) {
	Label("chunk")
	CMPQ(n, U8(0))
	JLE(LabelRef("done"))
	bits := GP64()
	MOVQ(I32(-1), bits)
	CMPQ(n, U8(16))
	JAE(LabelRef("mask"))
	BZHIQ(n, bits, bits)
	Label("mask")
	KMOVW(bits.As32(), k)
}

// scoresTAVX2 generates scoresT{e}AVX2(out, q *float32, kt *e, dim, bs,
// n int): out[j] = sum_d q[d]*kt[d*bs+j] over d < dim, for j < n <= bs.
// kt is one attention head's keys transposed (dim rows of bs slots), so
// each q[d] is broadcast and multiplied into 16 slots at once (two YMMs):
// no horizontal sums. A last partial chunk loads its keys with
// e.partialAVX2 and stores with VMASKMOVPS.
//
// Four accumulators take d = 0,1,2,3 mod 4 and are summed as
// (a0+a1)+(a2+a3), the arithmetic of scoresTN*AVX512: a slot's score
// depends only on q and its key.
func scoresTAVX2(e elem) {
	s := isaAVX2
	name := e.name("scoresT", s.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(out, q *float32, kt *%s, dim, bs, n int)", e.goType))
	Pragma("noescape")
	Doc(name + " sets out[j] = sum_d q[d]*kt[d*bs+j] over d < dim, for j < n <= bs" + e.note("kt") + ".")
	out := Load(Param("out"), GP64())
	q := Load(Param("q"), GP64())
	kt := Load(Param("kt"), GP64())
	dim := Load(Param("dim"), GP64())
	bsb := loadStride("bs", e.shift) // bytes between the rows of kt
	n := Load(Param("n"), GP64())
	bsb3 := GP64()
	LEAQ(Mem{Base: bsb, Index: bsb, Scale: 2}, bsb3)
	quads := GP64()
	MOVQ(dim, quads)
	SHRQ(U8(2), quads)
	rem := GP64()
	MOVQ(dim, rem)
	ANDQ(U8(3), rem)

	const nacc = 4
	halves := 16 / s.lanes // vectors per chunk of 16 slots

	// chunk computes the 16 slots at kt into out: rowFMA(m, b, acc) adds
	// b times the row of 16 keys at m to acc (one vector per half), and
	// store writes half h.
	chunk := func(label string, rowFMA func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual), store func(v reg.VecVirtual, m Mem, h int)) {
		acc := make([][]reg.VecVirtual, nacc)
		for u := range acc {
			acc[u] = make([]reg.VecVirtual, halves)
			for h := range acc[u] {
				acc[u][h] = s.vec()
				VXORPS(acc[u][h], acc[u][h], acc[u][h])
			}
		}
		kp, qp, cnt := GP64(), GP64(), GP64()
		MOVQ(kt, kp)
		MOVQ(q, qp)
		MOVQ(quads, cnt)
		step := func(u int) {
			b := s.vec()
			VBROADCASTSS(Mem{Base: qp, Disp: 4 * u}, b)
			rowFMA(quadRow(kp, bsb, bsb3, u), b, acc[u])
		}
		quadLoop(label, cnt, func() reg.Register { return rem }, step, func() {
			LEAQ(Mem{Base: kp, Index: bsb, Scale: 4}, kp)
			ADDQ(U8(16), qp)
		})
		for h := 0; h < halves; h++ {
			sum4(acc[0][h], acc[1][h], acc[2][h], acc[3][h])
			store(acc[0][h], Mem{Base: out, Disp: 32 * h}, h)
		}
	}

	// Full chunks, then at most one partial one.
	Label("full")
	CMPQ(n, U8(16))
	JB(LabelRef("tail"))
	chunk("f",
		func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual) {
			for h := range acc {
				VFMADD231PS(e.src(m.Offset(h*s.lanes*e.size), YMM), b, acc[h])
			}
		},
		func(v reg.VecVirtual, m Mem, _ int) { VMOVUPS(v, m) })
	ADDQ(U8(16*e.size), kt)
	ADDQ(U8(64), out)
	SUBQ(U8(16), n)
	JMP(LabelRef("full"))

	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	partial := e.partialAVX2(n, 16)
	// Lane masks: lane i of half h is on when 8h+i < n.
	idx := YMM()
	g := GP64()
	MOVQ(U64(0x0706050403020100), g)
	VMOVQ(g, idx.AsX())
	VPMOVZXBD(idx.AsX(), idx) // [0 1 ... 7]
	nv := YMM()
	VMOVQ(n, nv.AsX())
	VPBROADCASTD(nv.AsX(), nv)
	m0, m1 := YMM(), YMM()
	VPCMPGTD(idx, nv, m0) // n > i
	SUBQ(U8(8), n)
	VMOVQ(n, nv.AsX())
	VPBROADCASTD(nv.AsX(), nv)
	VPCMPGTD(idx, nv, m1) // n-8 > i
	masks := []reg.VecVirtual{m0, m1}
	chunk("t",
		func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual) {
			partial(m, masks, func(h int, v reg.VecVirtual) { VFMADD231PS(v, b, acc[h]) })
		},
		func(v reg.VecVirtual, m Mem, h int) { VMASKMOVPS(v, masks[h], m) })
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresTNAVX512 generates scoresT{e}N{nq}AVX512(out, q *[4]*float32, kt
// *e, dim, bs, n int): for i < nq and j < n <= bs,
// out[i][j] = sum_d q[i][d]*kt[d*bs+j] over d < dim. The nq queries share
// each load of a row of kt (16 slots), so a block read once serves several
// queries: the heads of a GQA group, or the rows of a batch whose sequences
// share the block.
//
// Per query, four accumulators take d = 0,1,2,3 mod 4 and are summed as
// (a0+a1)+(a2+a3): the arithmetic of scoresTAVX2 and of the Go version's
// order, the same for every nq and n, so a query's scores do not depend on
// which others it is computed with.
func scoresTNAVX512(e elem, nq int) {
	name := e.name("scoresT", fmt.Sprintf("N%dAVX512", nq))
	TEXT(name, NOSPLIT, fmt.Sprintf("func(out, q *[4]*float32, kt *%s, dim, bs, n int)", e.goType))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets out[i][j] = sum_d q[i][d]*kt[d*bs+j] over d < dim, for i < %d and j < n <= bs%s.", name, nq, e.note("kt")))
	outs := Load(Param("out"), GP64())
	qs := Load(Param("q"), GP64())
	qp := make([]reg.Register, nq)
	for i := range qp {
		qp[i] = GP64()
		MOVQ(Mem{Base: qs, Disp: 8 * i}, qp[i])
	}
	kt := Load(Param("kt"), GP64())
	bsb := loadStride("bs", e.shift)
	n := Load(Param("n"), GP64())
	bsb3 := GP64()
	LEAQ(Mem{Base: bsb, Index: bsb, Scale: 2}, bsb3)
	jb := GP64() // byte offset of the chunk in each out[i]
	XORQ(jb, jb)
	k := K()

	chunkMask(n, k)
	acc := zeroAcc4(nq)
	kp, dq, cnt := GP64(), GP64(), GP64()
	MOVQ(kt, kp)
	XORQ(dq, dq)
	Load(Param("dim"), cnt)
	SHRQ(U8(2), cnt)
	step := func(u int) {
		kr := ZMM()
		e.loadZ(quadRow(kp, bsb, bsb3, u), k, kr) // lanes past n are not read
		for i := range acc {
			VFMADD231PS_BCST(Mem{Base: qp[i], Index: dq, Scale: 1, Disp: 4 * u}, kr, acc[i][u])
		}
	}
	quadLoop("", cnt, dimRem(cnt), step, func() {
		LEAQ(Mem{Base: kp, Index: bsb, Scale: 4}, kp)
		ADDQ(U8(16), dq)
	})
	op := GP64()
	for i := range acc {
		a := acc[i]
		sum4(a[0], a[1], a[2], a[3])
		MOVQ(Mem{Base: outs, Disp: 8 * i}, op)
		VMOVUPS(a[0], k, Mem{Base: op, Index: jb, Scale: 1})
	}
	ADDQ(U8(16*e.size), kt)
	ADDQ(U8(64), jb)
	SUBQ(U8(16), n)
	JMP(LabelRef("chunk"))
	Label("done")
	VZEROUPPER()
	RET()
}

// axpyStridedNAVX512 generates axpyStrided{e}N{nq}AVX512(y, a
// *[4]*float32, v *e, dim, stride, n int): for i < nq, y[i][:dim] +=
// sum_t a[i][t]*v[t*stride:][:dim] over t < n. The nq weighted sums share
// each load of a value row. Each element of y[i] is one chain of fused
// multiply-adds in t order, as in axpyStridedAVX512: the same arithmetic
// for every nq.
func axpyStridedNAVX512(e elem, nq int) {
	name := e.name("axpyStrided", fmt.Sprintf("N%dAVX512", nq))
	TEXT(name, NOSPLIT, fmt.Sprintf("func(y, a *[4]*float32, v *%s, dim, stride, n int)", e.goType))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s adds sum_t a[i][t]*v[t*stride:][:dim] to y[i][:dim] over t < n, for i < %d%s.", name, nq, e.note("v")))
	ys := Load(Param("y"), GP64())
	as := Load(Param("a"), GP64())
	ap := make([]reg.Register, nq)
	for i := range ap {
		ap[i] = GP64()
		MOVQ(Mem{Base: as, Disp: 8 * i}, ap[i])
	}
	v := Load(Param("v"), GP64())
	sb := loadStride("stride", e.shift)
	ys4 := e.floatScale()

	// pass accumulates width vectors of every y[i] starting at element
	// yo/size (yo: byte offset in a row of v), over all t; with k, the
	// last vector is partial.
	pass := func(width int, k reg.OpmaskVirtual, label string, yo reg.Register) {
		acc := make([][]reg.VecVirtual, nq)
		yp := GP64()
		masked := func(u int) bool { return k != nil && u == width-1 }
		for i := range acc {
			acc[i] = make([]reg.VecVirtual, width)
			MOVQ(Mem{Base: ys, Disp: 8 * i}, yp)
			for u := range acc[i] {
				acc[i][u] = ZMM()
				m := Mem{Base: yp, Index: yo, Scale: ys4, Disp: 64 * u}
				if masked(u) {
					VMOVUPS_Z(m, k, acc[i][u])
				} else {
					VMOVUPS(m, acc[i][u])
				}
			}
		}
		vp, t4, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: v, Index: yo, Scale: 1}, vp)
		XORQ(t4, t4)
		Load(Param("n"), cnt)
		Label(label + "t")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "store"))
		// One sum takes the values as its operand (fewer instructions);
		// several load each vector once.
		vr := make([]Op, width)
		for u := range vr {
			m := Mem{Base: vp, Disp: 16 * e.size * u}
			switch {
			case masked(u):
				r := ZMM()
				e.loadZ(m, k, r)
				vr[u] = r
			case nq == 1:
				vr[u] = e.src(m, ZMM)
			default:
				r := ZMM()
				e.load(m, r)
				vr[u] = r
			}
		}
		for i := range acc {
			b := ZMM()
			VBROADCASTSS(Mem{Base: ap[i], Index: t4, Scale: 1}, b)
			for u := range acc[i] {
				VFMADD231PS(vr[u], b, acc[i][u])
			}
		}
		ADDQ(sb, vp)
		ADDQ(U8(4), t4)
		DECQ(cnt)
		JMP(LabelRef(label + "t"))
		Label(label + "store")
		for i := range acc {
			MOVQ(Mem{Base: ys, Disp: 8 * i}, yp)
			for u := range acc[i] {
				m := Mem{Base: yp, Index: yo, Scale: ys4, Disp: 64 * u}
				if masked(u) {
					VMOVUPS(acc[i][u], k, m)
				} else {
					VMOVUPS(acc[i][u], m)
				}
			}
		}
	}

	yo := GP64()
	XORQ(yo, yo)
	end := GP64()
	// Passes of 64 floats.
	Load(Param("dim"), end)
	ANDQ(I32(-64), end)
	SHLQ(U8(e.shift), end)
	Label("wide")
	CMPQ(yo, end)
	JAE(LabelRef("narrow"))
	pass(4, nil, "w", yo)
	ADDQ(U32(64*e.size), yo)
	JMP(LabelRef("wide"))
	// Passes of 16 floats.
	Label("narrow")
	Load(Param("dim"), end)
	ANDQ(I32(-16), end)
	SHLQ(U8(e.shift), end)
	Label("narrowloop")
	CMPQ(yo, end)
	JAE(LabelRef("tail"))
	pass(1, nil, "n", yo)
	ADDQ(U8(16*e.size), yo)
	JMP(LabelRef("narrowloop"))
	// The last dim%16 floats.
	Label("tail")
	rem := GP64()
	Load(Param("dim"), rem)
	ANDQ(U8(15), rem)
	JZ(LabelRef("done"))
	pass(1, tailMask(rem), "m", yo)
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresRows generates scoresRows{e}{isa}(out, q *float32, k *e, dim,
// stride, n int): out[j] = sum_d q[d]*k[j*stride+d] over d < dim, for
// j < n: the scores of one query against n keys stored as rows (a staged,
// not yet transposed cache block), with exactly the arithmetic of
// scoresT{e}N*AVX512 and scoresT{e}AVX2. Those keep four accumulators per
// slot, taking d = 0, 1, 2, 3 mod 4 in d order, summed as (a0+a1)+(a2+a3);
// here the four lanes of one XMM per key are those accumulators: each step
// multiply-adds four consecutive dimensions, lane u getting dimension
// 4i+u. A score is thus bit for bit the same whether its block is staged
// or sealed.
//
// Only XMM registers and VEX encodings are used, for both ISAs; the isa
// decides how the last dim%4 dimensions are masked (opmask merge on
// AVX-512, e.partialAVX2 loads and VBLENDVPS on AVX2). Keys go 8, then 4,
// then 1 at a time, for independent chains of multiply-adds.
func scoresRows(e elem, s isa) {
	name := e.name("scoresRows", s.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(out, q *float32, k *%s, dim, stride, n int)", e.goType))
	Pragma("noescape")
	Doc(name + " sets out[j] = sum_d q[d]*k[j*stride+d] over d < dim, for j < n" + e.note("k") + ", in ScoresT's order of operations.")
	out := Load(Param("out"), GP64())
	k := Load(Param("k"), GP64())
	sb := loadStride("stride", e.shift)
	n := Load(Param("n"), GP64())
	sb3 := GP64()
	LEAQ(Mem{Base: sb, Index: sb, Scale: 2}, sb3)

	// The mask of the last dim%4 dimensions.
	rem := GP64()
	Load(Param("dim"), rem)
	ANDQ(U8(3), rem)
	var km reg.OpmaskVirtual
	var vm reg.VecVirtual
	var partial partialLoad
	if s.evex {
		km = K()
		bits := GP64()
		MOVQ(I32(-1), bits)
		BZHIQ(rem, bits, bits)
		KMOVW(bits.As32(), km)
	} else {
		vm = XMM()
		idx := XMM()
		g := GP64()
		MOVQ(U64(0x03020100), g)
		VMOVQ(g, idx)
		VPMOVZXBD(idx, idx) // [0 1 2 3]
		VMOVQ(rem, vm)
		VPBROADCASTD(vm, vm)
		VPCMPGTD(idx, vm, vm)           // rem > i
		partial = e.partialAVX2(rem, 4) // unused when rem = 0
	}

	group := func(g int, label string) {
		acc := make([]reg.VecVirtual, g)
		for j := range acc {
			acc[j] = XMM()
			VXORPS(acc[j], acc[j], acc[j])
		}
		kp, kp4, qp, cnt := GP64(), GP64(), GP64(), GP64()
		MOVQ(k, kp)
		if g > 4 {
			LEAQ(Mem{Base: k, Index: sb, Scale: 4}, kp4)
		}
		Load(Param("q"), qp)
		Load(Param("dim"), cnt)
		SHRQ(U8(2), cnt)
		key := func(j int) Mem {
			if j >= 4 {
				return quadRow(kp4, sb, sb3, j-4)
			}
			return quadRow(kp, sb, sb3, j)
		}
		Label(label + "quad")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "rem"))
		qv := XMM()
		VMOVUPS(Mem{Base: qp}, qv)
		for j := range acc {
			VFMADD231PS(e.src(key(j), XMM), qv, acc[j])
		}
		ADDQ(U8(16), qp)
		ADDQ(U8(4*e.size), kp)
		if g > 4 {
			ADDQ(U8(4*e.size), kp4)
		}
		DECQ(cnt)
		JMP(LabelRef(label + "quad"))

		Label(label + "rem")
		TESTQ(rem, rem)
		JZ(LabelRef(label + "sum"))
		qv = XMM()
		if s.evex {
			VMOVUPS_Z(Mem{Base: qp}, km, qv)
			for j := range acc {
				VFMADD231PS(e.srcZ(key(j), km, XMM), qv, km, acc[j]) // lanes >= rem unchanged
			}
		} else {
			VMASKMOVPS(Mem{Base: qp}, vm, qv)
			for j := range acc {
				partial(key(j), []reg.VecVirtual{vm}, func(_ int, kv reg.VecVirtual) {
					t := XMM()
					VMOVAPS(acc[j], t)
					VFMADD231PS(kv, qv, t)
					VBLENDVPS(vm, t, acc[j], acc[j]) // lanes >= rem unchanged
				})
			}
		}
		Label(label + "sum")
		for j, a := range acc {
			t, u := XMM(), XMM()
			VMOVSHDUP(a, t)   // [a1 a1 a3 a3]
			VADDPS(a, t, t)   // [a0+a1 . a2+a3 .]
			VMOVHLPS(t, t, u) // [a2+a3 ...]
			VADDSS(u, t, t)   // (a0+a1)+(a2+a3)
			VMOVSS(t, Mem{Base: out, Disp: 4 * j})
		}
	}

	for _, g := range []int{8, 4, 1} {
		label := fmt.Sprintf("g%d", g)
		Label(label)
		CMPQ(n, U8(g))
		if g == 1 {
			JB(LabelRef("done"))
		} else {
			JB(LabelRef(fmt.Sprintf("g%d", map[int]int{8: 4, 4: 1}[g])))
		}
		group(g, label)
		ADDQ(U8(4*g), out)
		if g == 8 {
			LEAQ(Mem{Base: k, Index: sb, Scale: 8}, k)
		} else if g == 4 {
			LEAQ(Mem{Base: k, Index: sb, Scale: 4}, k)
		} else {
			ADDQ(sb, k)
		}
		SUBQ(U8(g), n)
		JMP(LabelRef(label))
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresTBAVX512 generates scoresT{e}B{nb}AVX512(out, q *float32, kt
// *[4]*e, dim, bs int): for b < nb and j < bs,
// out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] over d < dim. One query against
// nb full blocks: each broadcast of q[d] serves nb blocks, so a lone query
// (one branch, or a branch's private blocks) needs about one load per
// multiply-add rather than two. Per block the arithmetic is
// scoresT{e}N*AVX512's.
func scoresTBAVX512(e elem, nb int) {
	name := e.name("scoresT", fmt.Sprintf("B%dAVX512", nb))
	TEXT(name, NOSPLIT, fmt.Sprintf("func(out, q *float32, kt *[4]*%s, dim, bs int)", e.goType))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] over d < dim, for b < %d and j < bs%s.", name, nb, e.note("kt")))
	out := Load(Param("out"), GP64())
	kts := Load(Param("kt"), GP64())
	bsb := loadStride("bs", e.shift) // bytes between the rows of a block
	n := GP64()
	Load(Param("bs"), n)
	bsb3 := GP64()
	LEAQ(Mem{Base: bsb, Index: bsb, Scale: 2}, bsb3)
	jb := GP64() // byte offset of the chunk within a block
	XORQ(jb, jb)
	k := K()

	chunkMask(n, k)
	acc := zeroAcc4(nb)
	kp := make([]reg.Register, nb)
	for b := range kp {
		kp[b] = GP64()
		MOVQ(Mem{Base: kts, Disp: 8 * b}, kp[b])
		ADDQ(jb, kp[b])
	}
	qp, cnt := GP64(), GP64()
	Load(Param("q"), qp)
	Load(Param("dim"), cnt)
	SHRQ(U8(2), cnt)
	step := func(u int) {
		qb := ZMM()
		VBROADCASTSS(Mem{Base: qp, Disp: 4 * u}, qb)
		for b := range acc {
			kr := e.srcZ(quadRow(kp[b], bsb, bsb3, u), k, ZMM)
			VFMADD231PS(kr, qb, k, acc[b][u]) // lanes past bs are not read
		}
	}
	quadLoop("", cnt, dimRem(cnt), step, func() {
		for b := range kp {
			LEAQ(Mem{Base: kp[b], Index: bsb, Scale: 4}, kp[b])
		}
		ADDQ(U8(16), qp)
	})
	ob := GP64() // block b's output
	MOVQ(out, ob)
	for b := range acc {
		a := acc[b]
		sum4(a[0], a[1], a[2], a[3])
		VMOVUPS(a[0], k, Mem{Base: ob, Index: jb, Scale: e.floatScale()})
		if b < nb-1 { // bs floats on
			if e.size == 4 {
				ADDQ(bsb, ob)
			} else {
				LEAQ(Mem{Base: ob, Index: bsb, Scale: e.floatScale()}, ob)
			}
		}
	}
	ADDQ(U8(16*e.size), jb)
	SUBQ(U8(16), n)
	JMP(LabelRef("chunk"))
	Label("done")
	VZEROUPPER()
	RET()
}
