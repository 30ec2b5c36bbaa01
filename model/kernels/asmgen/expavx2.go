package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// AVX2 has no VSCALEFPS and no opmasks, so its exp builds 2^t in the
// exponent bits and its kernels take their tails through VMASKMOVPS.
//
// exp8 follows exp16 (Cephes expf: t = round(x*log2 e), r = x - t*ln 2 in
// two parts, e^r by the same polynomial) and scales by 2^t as 2^(t-1)
// times 2, so that both factors are normal floats for every t in
// [-125, 128]: inputs are clamped to [expLo, 89], results above FLT_MAX
// round to +Inf in the last product, and inputs below expLo give 0 (their
// true exponentials are below 2.7e-38). kernels.exp32 is the same
// arithmetic in Go.
const expLo = -86.5

// expConsts8 is the base of a table of exp8's constants, each as 8
// lanes (AVX2 has 16 vector registers: the constants stay in memory).
type expConsts8 struct{ base reg.Register }

// The table's vectors, 32 bytes each.
const (
	eLo = iota
	eHi
	eLog2e
	eLn2hi
	eLn2lo
	eOne
	eTwo
	eBias
	eP0 // then p1..p5
)

var exp8Table Mem
var exp8TableDone bool

func newExpConsts8() *expConsts8 {
	if !exp8TableDone {
		exp8Table = GLOBL("exp8consts", RODATA|NOPTR)
		vals := []uint32{math.Float32bits(expLo), math.Float32bits(89), math.Float32bits(1.44269504088896341),
			math.Float32bits(0.693359375), math.Float32bits(-2.12194440e-4), math.Float32bits(1), math.Float32bits(2), 126}
		for _, f := range []float32{5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4} {
			vals = append(vals, math.Float32bits(f))
		}
		for i, v := range vals {
			for l := 0; l < 8; l++ {
				DATA(32*i+4*l, U32(v))
			}
		}
		exp8TableDone = true
	}
	c := &expConsts8{base: GP64()}
	LEAQ(exp8Table, c.base)
	return c
}

func (c *expConsts8) at(i int) Mem { return Mem{Base: c.base, Disp: 32 * i} }

// exp8 returns e^v lane-wise (v is clobbered).
func exp8(c *expConsts8, v reg.VecVirtual) reg.VecVirtual {
	under := YMM()
	VCMPPS(U8(1), c.at(eLo), v, under) // v < lo (false for NaN)
	VMAXPS(c.at(eLo), v, v)
	VMINPS(c.at(eHi), v, v)
	t := YMM()
	VMULPS(c.at(eLog2e), v, t)
	VROUNDPS(U8(0), t, t) // to nearest even
	VFNMADD231PS(c.at(eLn2hi), t, v)
	VFNMADD231PS(c.at(eLn2lo), t, v) // v = r
	p := YMM()
	VMOVAPS(c.at(eP0+5), p)
	for i := 4; i >= 0; i-- {
		VFMADD213PS(c.at(eP0+i), v, p)
	}
	r2 := YMM()
	VMULPS(v, v, r2)
	VFMADD213PS(v, r2, p)
	VADDPS(c.at(eOne), p, p)
	ti := YMM()
	VCVTPS2DQ(t, ti)
	VPADDD(c.at(eBias), ti, ti)
	VPSLLD(U8(23), ti, ti) // 2^(t-1)
	VMULPS(ti, p, p)
	VMULPS(c.at(eTwo), p, p)
	VANDNPS(p, under, p) // 0 below lo
	return p
}

// floatRange8 walks n float32s 32 bytes (8 lanes) at a time, then the
// tail of n%8 under the mask k.
type floatRange8 struct {
	off, end, rem reg.Register
	k             reg.VecVirtual
}

func newFloatRange8(n reg.Register) floatRange8 {
	r := floatRange8{off: GP64(), end: GP64(), rem: GP64()}
	MOVQ(n, r.end)
	ANDQ(I32(-8), r.end)
	SHLQ(U8(2), r.end)
	MOVQ(n, r.rem)
	ANDQ(U8(7), r.rem)
	r.k = YMM()
	VXORPS(r.k, r.k, r.k)
	JZ(LabelRef("nomask"))
	VMOVAPS(avx2TailMask(r.rem), r.k)
	Label("nomask")
	return r
}

func (r floatRange8) at(base reg.Register) Mem { return Mem{Base: base, Index: r.off, Scale: 1} }

func (r floatRange8) loop(name string, body func(tail bool)) {
	rangeLoop(r.off, r.end, r.rem, 32, name, body)
}

// hmax8 leaves the largest of v's 8 floats in every lane of the result.
func hmax8(v reg.VecVirtual) reg.VecVirtual {
	t := YMM()
	VPERM2F128(U8(1), v, v, t)
	VMAXPS(t, v, v)
	VSHUFPS(U8(0x4E), v, v, t)
	VMAXPS(t, v, v)
	VSHUFPS(U8(0xB1), v, v, t)
	VMAXPS(t, v, v)
	return v
}

// softmaxScaledAVX2 generates softmaxScaledAVX2(x *float32, n int, a
// float32): x[i] *= a, then the softmax of x in place (n >= 1), as
// softmaxScaledAVX512 does with exp8.
func softmaxScaledAVX2() {
	TEXT("softmaxScaledAVX2", NOSPLIT, "func(x *float32, n int, a float32)")
	Pragma("noescape")
	Doc("softmaxScaledAVX2 sets x[i] *= a for i < n, n >= 1, then x to its softmax.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	as := Load(Param("a"), XMM())
	av := YMM()
	VBROADCASTSS(as, av)
	r := newFloatRange8(n)

	acc, x0 := YMM(), XMM()
	VMULSS(Mem{Base: x}, as, x0)
	VBROADCASTSS(x0, acc)
	r.loop("scale", func(tail bool) {
		m, v := r.at(x), YMM()
		if tail {
			VMASKMOVPS(m, r.k, v)
			VMULPS(v, av, v)
			VMASKMOVPS(v, r.k, m)
			VBLENDVPS(r.k, v, acc, v) // lanes past n keep acc
			VMAXPS(v, acc, acc)
			return
		}
		VMULPS(m, av, v)
		VMOVUPS(v, m)
		VMAXPS(v, acc, acc)
	})
	mv := hmax8(acc)

	c := newExpConsts8()
	sum := YMM()
	VXORPS(sum, sum, sum)
	r.loop("exp", func(tail bool) {
		m, v := r.at(x), YMM()
		if tail {
			VMASKMOVPS(m, r.k, v)
		} else {
			VMOVUPS(m, v)
		}
		VSUBPS(mv, v, v)
		e := exp8(c, v)
		if tail {
			VMASKMOVPS(e, r.k, m)
			VANDPS(r.k, e, e)
		} else {
			VMOVUPS(e, m)
		}
		VADDPS(e, sum, sum)
	})
	total := hsum(isaAVX2, sum)
	inv := XMM()
	VMOVSS(c.at(eOne), inv)
	VDIVSS(total, inv, inv)
	iv := YMM()
	VBROADCASTSS(inv, iv)
	r.loop("norm", func(tail bool) {
		m, v := r.at(x), YMM()
		if tail {
			VMASKMOVPS(m, r.k, v)
			VMULPS(v, iv, v)
			VMASKMOVPS(v, r.k, m)
			return
		}
		VMULPS(m, iv, v)
		VMOVUPS(v, m)
	})
	VZEROUPPER()
	RET()
}

// siluMulAVX2 generates siluMulAVX2(h, g *float32, n int):
// h[i] = h[i] * g[i] / (1 + e^-h[i]), as siluMulAVX512 does with exp8.
func siluMulAVX2() {
	TEXT("siluMulAVX2", NOSPLIT, "func(h, gate *float32, n int)")
	Pragma("noescape")
	Doc("siluMulAVX2 sets h[i] = silu(h[i]) * g[i] for i < n.")
	h := Load(Param("h"), GP64())
	g := Load(Param("gate"), GP64())
	n := Load(Param("n"), GP64())
	r := newFloatRange8(n)
	c := newExpConsts8()
	r.loop("loop", func(tail bool) {
		v, gv := YMM(), YMM()
		if tail {
			VMASKMOVPS(r.at(h), r.k, v)
			VMASKMOVPS(r.at(g), r.k, gv)
		} else {
			VMOVUPS(r.at(h), v)
			VMOVUPS(r.at(g), gv)
		}
		neg := YMM()
		VXORPS(neg, neg, neg)
		VSUBPS(v, neg, neg)
		e := exp8(c, neg)
		VADDPS(c.at(eOne), e, e)
		VMULPS(gv, v, v)
		VDIVPS(e, v, v)
		if tail {
			VMASKMOVPS(v, r.k, r.at(h))
		} else {
			VMOVUPS(v, r.at(h))
		}
	})
	VZEROUPPER()
	RET()
}

// logitMomentsAVX2 generates logitMomentsAVX2(x *float32, n int, m
// float32, out *[3]float64): with s_i = x_i - m and e_i = e^(s_i) (exp8),
// out = (Σ e_i, Σ e_i s_i, Σ e_i s_i²), a term whose s_i is below
// exp8's range (x_i = -Inf among them) taken at its floor, e^-86.5 =
// 2.7e-38 (beside the max's e of 1, nothing). A NaN among the x_i makes out[1]
// NaN (kernels.logitMoments makes z NaN then). The three sums of the
// entropy and varentropy of softmax(x), m its max.
//
// The products and sums are float32 over blocks of momentsBlock vectors
// (momentsBlock terms a lane), each block's sums then added in float64:
// every term is of one sign (s_i <= 0), so a block's relative error is
// that of momentsBlock float32 additions, under 1e-6, while the float32
// arithmetic takes half the instructions of widening every term.
func logitMomentsAVX2() {
	const momentsBlock = 8
	TEXT("logitMomentsAVX2", NOSPLIT, "func(x *float32, n int, m float32, out *[3]float64)")
	Pragma("noescape")
	Doc("logitMomentsAVX2 sets out to the sums of e^(x[i]-m), times (x[i]-m) and its square, for i < n.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	ms := Load(Param("m"), XMM())
	mv := YMM()
	VBROADCASTSS(ms, mv)
	r := newFloatRange8(n)
	c := newExpConsts8()
	// -Inf's s is clamped to a finite value before it multiplies its e of
	// 0 (0·-Inf is NaN); a NaN s passes the clamp (it is the second
	// operand) and makes Σ e·s NaN.
	// The float64 sums live on the stack: 16 vector registers hold the
	// float32 sums, m and two exponentials in flight.
	var f32 [3]reg.VecVirtual
	var f64 [3]Mem
	zero := YMM()
	VXORPS(zero, zero, zero)
	local := AllocLocal(96)
	for i := range 3 {
		f32[i] = YMM()
		VXORPS(f32[i], f32[i], f32[i])
		f64[i] = local.Offset(32 * i)
		VMOVUPD(zero, f64[i])
	}
	// terms adds the terms of the vectors at the offset and the next ones
	// (len(vs) of them, 1 or 2), each step emitted for all of them in
	// turn: two independent exponentials interleaved keep the FMA units
	// busy where one waits on its own chain. (exp8, less its zeroing below
	// the range: a term there is e^-86.5 = 2.7e-38, of no weight beside
	// the max's 1, and -Inf's clamped s makes it -2e-36.)
	terms := func(n int, tail bool) {
		v, sc, t, p, r2 := make([]reg.VecVirtual, n), make([]reg.VecVirtual, n), make([]reg.VecVirtual, n), make([]reg.VecVirtual, n), make([]reg.VecVirtual, n)
		for i := range n {
			v[i], sc[i], t[i], p[i], r2[i] = YMM(), YMM(), YMM(), YMM(), YMM()
			at := r.at(x)
			at.Disp = 32 * i
			if tail {
				VMASKMOVPS(at, r.k, v[i])
			} else {
				VMOVUPS(at, v[i])
			}
			VSUBPS(mv, v[i], v[i]) // s
		}
		for i := range n {
			VMOVAPS(c.at(eLo), sc[i])
			VMAXPS(v[i], sc[i], sc[i]) // max(lo, s), NaN kept
		}
		for i := range n {
			VMAXPS(c.at(eLo), v[i], v[i])
			VMINPS(c.at(eHi), v[i], v[i])
			VMULPS(c.at(eLog2e), v[i], t[i])
			VROUNDPS(U8(0), t[i], t[i])
		}
		for i := range n {
			VFNMADD231PS(c.at(eLn2hi), t[i], v[i])
		}
		for i := range n {
			VFNMADD231PS(c.at(eLn2lo), t[i], v[i]) // r
			VMOVAPS(c.at(eP0+5), p[i])
			VMULPS(v[i], v[i], r2[i])
		}
		for k := 4; k >= 0; k-- {
			for i := range n {
				VFMADD213PS(c.at(eP0+k), v[i], p[i])
			}
		}
		for i := range n {
			VFMADD213PS(v[i], r2[i], p[i])
			VADDPS(c.at(eOne), p[i], p[i])
			VCVTPS2DQ(t[i], t[i])
			VPADDD(c.at(eBias), t[i], t[i])
			VPSLLD(U8(23), t[i], t[i]) // 2^(t-1)
		}
		for i := range n {
			VMULPS(t[i], p[i], p[i])
			VMULPS(c.at(eTwo), p[i], p[i]) // e
			if tail {
				VANDPS(r.k, p[i], p[i])
			}
		}
		for i := range n {
			VADDPS(p[i], f32[0], f32[0])
			VMULPS(sc[i], p[i], p[i])
			VADDPS(p[i], f32[1], f32[1])
			VFMADD231PS(sc[i], p[i], f32[2])
		}
	}
	flush := func() {
		for i := range 3 {
			lo, hi := YMM(), YMM()
			VCVTPS2PD(f32[i].AsX(), lo)
			VEXTRACTF128(U8(1), f32[i], hi.AsX())
			VCVTPS2PD(hi.AsX(), hi)
			VADDPD(lo, hi, hi)
			VADDPD(f64[i], hi, hi)
			VMOVUPD(hi, f64[i])
			VXORPS(f32[i], f32[i], f32[i])
		}
	}
	// Blocks of momentsBlock vectors, two at a time, then the tail under
	// the mask.
	bend, next := GP64(), GP64()
	XORQ(r.off, r.off)
	Label("block")
	CMPQ(r.off, r.end)
	JAE(LabelRef("tail"))
	LEAQ(Mem{Base: r.off, Disp: 32 * momentsBlock}, bend)
	CMPQ(bend, r.end)
	CMOVQHI(r.end, bend)
	Label("pair")
	LEAQ(Mem{Base: r.off, Disp: 64}, next)
	CMPQ(next, bend)
	JA(LabelRef("single"))
	terms(2, false)
	MOVQ(next, r.off)
	JMP(LabelRef("pair"))
	Label("single")
	CMPQ(r.off, bend)
	JAE(LabelRef("flush"))
	terms(1, false)
	ADDQ(U8(32), r.off)
	Label("flush")
	flush()
	JMP(LabelRef("block"))
	Label("tail")
	TESTQ(r.rem, r.rem)
	JZ(LabelRef("sum"))
	terms(1, true)
	flush()
	Label("sum")
	outp := Load(Param("out"), GP64())
	for i, m := range f64 {
		acc := YMM()
		VMOVUPD(m, acc)
		hi := XMM()
		VEXTRACTF128(U8(1), acc, hi)
		VADDPD(hi, acc.AsX(), hi)
		t := XMM()
		VSHUFPD(U8(1), hi, hi, t)
		VADDSD(t, hi, hi)
		VMOVSD(hi, Mem{Base: outp, Disp: 8 * i})
	}
	VZEROUPPER()
	RET()
}

// top2AVX2 generates top2AVX2(x *float32, n int, out *[24]uint32): per
// lane l of 8, over the x[i] with i%8 == l (NaN skipped), the largest
// (out[l], float32 bits), the second largest (out[8+l]) and the index of
// the first largest (out[16+l]); lanes without elements hold -Inf and
// index 0. kernels.top2 combines the lanes.
func top2AVX2() {
	TEXT("top2AVX2", NOSPLIT, "func(x *float32, n int, out *[24]uint32)")
	Pragma("noescape")
	Doc("top2AVX2 writes the per-lane largest, second largest and index of the first largest of x[:n].")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	r := newFloatRange8(n)
	ninf := broadcastConst(isaAVX2, 0xFF800000)
	m1, m2 := YMM(), YMM()
	VMOVAPS(ninf, m1)
	VMOVAPS(ninf, m2)
	arg, idx, eight := YMM(), YMM(), broadcastConst(isaAVX2, 8)
	VPXOR(arg, arg, arg)
	lanes := GLOBL("top2lanes", RODATA|NOPTR)
	for l := 0; l < 8; l++ {
		DATA(4*l, U32(uint32(l)))
	}
	VMOVDQU(lanes, idx)
	r.loop("loop", func(tail bool) {
		v := YMM()
		if tail {
			VMASKMOVPS(r.at(x), r.k, v)
			VBLENDVPS(r.k, v, ninf, v) // past n: -Inf
		} else {
			VMOVUPS(r.at(x), v)
		}
		ord := YMM()
		VCMPPS(U8(7), v, v, ord) // ordered: not NaN
		VBLENDVPS(ord, v, ninf, v)
		gt, lo := YMM(), YMM()
		VCMPPS(U8(0x1e), m1, v, gt) // v > m1 (GT_OQ)
		VMINPS(m1, v, lo)
		VMAXPS(lo, m2, m2)
		VMAXPS(v, m1, m1)
		VBLENDVPS(gt, idx, arg, arg)
		VPADDD(eight, idx, idx)
	})
	outp := Load(Param("out"), GP64())
	VMOVUPS(m1, Mem{Base: outp})
	VMOVUPS(m2, Mem{Base: outp, Disp: 32})
	VMOVDQU(arg, Mem{Base: outp, Disp: 64})
	VZEROUPPER()
	RET()
}

// firstAboveAVX2 generates firstAboveAVX2(x *float32, n int, thr float32)
// int: the index of the first x[i] > thr among the first n&^7 (NaN is not
// above), or n&^7 when there is none; 32 at a time, then 8.
func firstAboveAVX2() {
	TEXT("firstAboveAVX2", NOSPLIT, "func(x *float32, n int, thr float32) int")
	Pragma("noescape")
	Doc("firstAboveAVX2 returns the index of the first of x[:n&^7] above thr, or n&^7.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	tv := YMM()
	VBROADCASTSS(Load(Param("thr"), XMM()), tv)
	ANDQ(I32(-8), n)
	end32 := GP64()
	MOVQ(n, end32)
	ANDQ(I32(-32), end32)
	i := GP64()
	XORQ(i, i)
	bits := GP32()
	Label("loop32")
	CMPQ(i, end32)
	JAE(LabelRef("loop8"))
	var c [4]reg.VecVirtual
	for u := range c {
		c[u] = YMM()
		VCMPPS(U8(0x11), Mem{Base: x, Index: i, Scale: 4, Disp: 32 * u}, tv, c[u]) // thr < x (LT_OQ)
	}
	VORPS(c[1], c[0], c[0])
	VORPS(c[3], c[2], c[2])
	VORPS(c[2], c[0], c[0])
	VMOVMSKPS(c[0], bits)
	TESTL(bits, bits)
	JNZ(LabelRef("loop8")) // found in these 32: find it 8 at a time
	ADDQ(U8(32), i)
	JMP(LabelRef("loop32"))
	Label("loop8")
	CMPQ(i, n)
	JAE(LabelRef("none"))
	v := YMM()
	VCMPPS(U8(0x11), Mem{Base: x, Index: i, Scale: 4}, tv, v)
	VMOVMSKPS(v, bits)
	TESTL(bits, bits)
	JNZ(LabelRef("found"))
	ADDQ(U8(8), i)
	JMP(LabelRef("loop8"))
	Label("found")
	lane := GP32()
	TZCNTL(bits, lane)
	ADDQ(lane.As64(), i)
	Store(i, ReturnIndex(0))
	VZEROUPPER()
	RET()
	Label("none")
	Store(n, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// badFloatsAVX2 generates badFloatsAVX2(x *float32, n int) bool: whether
// one of x[:n&^7] is NaN or +Inf (-Inf is a masked logit, not bad).
func badFloatsAVX2() {
	TEXT("badFloatsAVX2", NOSPLIT, "func(x *float32, n int) bool")
	Pragma("noescape")
	Doc("badFloatsAVX2 reports whether one of x[:n&^7] is NaN or +Inf.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	ANDQ(I32(-8), n)
	pinf := broadcastConst(isaAVX2, 0x7F800000)
	acc := YMM()
	VXORPS(acc, acc, acc)
	i := GP64()
	XORQ(i, i)
	Label("loop")
	CMPQ(i, n)
	JAE(LabelRef("done"))
	v, u, e := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: x, Index: i, Scale: 4}, v)
	VCMPPS(U8(3), v, v, u)    // unordered: NaN
	VCMPPS(U8(0), pinf, v, e) // == +Inf
	VORPS(u, acc, acc)
	VORPS(e, acc, acc)
	ADDQ(U8(8), i)
	JMP(LabelRef("loop"))
	Label("done")
	bits := GP32()
	VMOVMSKPS(acc, bits)
	TESTL(bits, bits)
	r := GP8()
	SETNE(r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
