package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The attention metrics' sums over a head's positions: float32 terms,
// added in float32 over blocks of sumBlock vectors (sumBlock terms a
// lane), each block's sums then in float64, as logitMomentsAVX2 does.

const sumBlock = 8

// blockSum8 emits the loop of such a sum over n float32s: term(tail, k)
// returns the vector of 8 terms at the range's offset (tail: only the
// lanes of the mask k are real; the rest must come out 0). The float64
// total is stored to the function's return value.
func blockSum8(n reg.Register, name string, term func(r floatRange8, tail bool) reg.VecVirtual) {
	r := newFloatRange8(n)
	f32, f64 := YMM(), YMM()
	VXORPS(f32, f32, f32)
	VXORPD(f64, f64, f64)
	flush := func() {
		lo, hi := YMM(), YMM()
		VCVTPS2PD(f32.AsX(), lo)
		VEXTRACTF128(U8(1), f32, hi.AsX())
		VCVTPS2PD(hi.AsX(), hi)
		VADDPD(lo, f64, f64)
		VADDPD(hi, f64, f64)
		VXORPS(f32, f32, f32)
	}
	bend := GP64()
	XORQ(r.off, r.off)
	Label(name + "block")
	CMPQ(r.off, r.end)
	JAE(LabelRef(name + "tail"))
	LEAQ(Mem{Base: r.off, Disp: 32 * sumBlock}, bend)
	CMPQ(bend, r.end)
	CMOVQHI(r.end, bend)
	Label(name + "vec")
	VADDPS(term(r, false), f32, f32)
	ADDQ(U8(32), r.off)
	CMPQ(r.off, bend)
	JB(LabelRef(name + "vec"))
	flush()
	JMP(LabelRef(name + "block"))
	Label(name + "tail")
	TESTQ(r.rem, r.rem)
	JZ(LabelRef(name + "sum"))
	VADDPS(term(r, true), f32, f32)
	flush()
	Label(name + "sum")
	hi := XMM()
	VEXTRACTF128(U8(1), f64, hi)
	VADDPD(hi, f64.AsX(), hi)
	t := XMM()
	VSHUFPD(U8(1), hi, hi, t)
	VADDSD(t, hi, hi)
	Store(hi, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// load8 loads the 8 floats of base at the range's offset (masked in the
// tail: the other lanes read 0).
func load8(r floatRange8, base reg.Register, tail bool) reg.VecVirtual {
	v := YMM()
	if tail {
		VMASKMOVPS(r.at(base), r.k, v)
	} else {
		VMOVUPS(r.at(base), v)
	}
	return v
}

// absSumAVX2 generates absSumAVX2(x *float32, n int) float64 = Σ |x[i]|.
func absSumAVX2() {
	TEXT("absSumAVX2", NOSPLIT, "func(x *float32, n int) float64")
	Pragma("noescape")
	Doc("absSumAVX2 returns the sum of |x[i]| for i < n.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	abs := broadcastConst(isaAVX2, 0x7fffffff)
	blockSum8(n, "abs", func(r floatRange8, tail bool) reg.VecVirtual {
		v := load8(r, x, tail)
		VANDPS(abs, v, v)
		return v
	})
}

// absDiffSumAVX2 generates absDiffSumAVX2(x, y *float32, n int) float64 =
// Σ |x[i] - y[i]|.
func absDiffSumAVX2() {
	TEXT("absDiffSumAVX2", NOSPLIT, "func(x, y *float32, n int) float64")
	Pragma("noescape")
	Doc("absDiffSumAVX2 returns the sum of |x[i] - y[i]| for i < n.")
	x := Load(Param("x"), GP64())
	y := Load(Param("y"), GP64())
	n := Load(Param("n"), GP64())
	abs := broadcastConst(isaAVX2, 0x7fffffff)
	blockSum8(n, "absdiff", func(r floatRange8, tail bool) reg.VecVirtual {
		v, w := load8(r, x, tail), load8(r, y, tail)
		VSUBPS(w, v, v)
		VANDPS(abs, v, v)
		return v
	})
}

// surprisalSumAVX2 generates surprisalSumAVX2(p, s *float32, n int, c
// float32) float64 = Σ p[i]·(c - s[i]) over the i with p[i] > 0: a head's
// attention entropy, in nats, when c - s[i] = -log p[i] (terms of one
// sign: no cancellation; p = 0 with s = -Inf adds nothing).
func surprisalSumAVX2() {
	TEXT("surprisalSumAVX2", NOSPLIT, "func(p, s *float32, n int, c float32) float64")
	Pragma("noescape")
	Doc("surprisalSumAVX2 returns the sum of p[i]*(c-s[i]) over i < n with p[i] > 0.")
	p := Load(Param("p"), GP64())
	s := Load(Param("s"), GP64())
	n := Load(Param("n"), GP64())
	cs := Load(Param("c"), XMM())
	c := YMM()
	VBROADCASTSS(cs, c)
	zero := YMM()
	VXORPS(zero, zero, zero)
	blockSum8(n, "surprisal", func(r floatRange8, tail bool) reg.VecVirtual {
		pv, sv := load8(r, p, tail), load8(r, s, tail)
		t := YMM()
		VSUBPS(sv, c, t) // c - s
		VMULPS(pv, t, t)
		pos := YMM()
		VCMPPS(U8(0x1e), zero, pv, pos) // p > 0 (ordered)
		VANDPS(pos, t, t)
		return t
	})
}
