package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The F16 kernels: conversions between float32 and IEEE binary16 (the KV
// cache's F16 storage), and the attention kernels of vec.go with an F16
// key or value operand. Each F16 kernel is its float32 twin's instruction
// sequence with the loads of that operand replaced by VCVTPH2PS (an exact
// widening), so that it computes, bit for bit, what the twin computes on
// the widened data.
//
// Partial loads read no byte past the operand's last element: on AVX-512
// with an opmask (masked-off elements are not accessed), on AVX2 with
// halfTail.

// genF16 generates the F16 kernels into the vec set.
func genF16() {
	for _, s := range []isa{isaAVX512, isaAVX2} {
		toHalf(s)
		fromHalf(s)
	}
	for nq := 1; nq <= 4; nq++ {
		scoresTF16NAVX512(nq)
		axpyStridedF16NAVX512(nq)
	}
	for nb := 2; nb <= 4; nb++ {
		scoresTF16BAVX512(nb)
	}
	scoresTF16AVX2()
	axpyStridedF16AVX2()
	scoresRowsF16(isaAVX512)
	scoresRowsF16(isaAVX2)
}

// roundNearestEven is VCVTPS2PH's immediate: round to nearest even,
// whatever the MXCSR rounding mode.
const roundNearestEven = 0

// toHalf generates toHalf{isa}(dst *uint16, src *float32, n int):
// dst[i] = binary16(src[i]) for i < n.
func toHalf(s isa) {
	name := "toHalf" + s.name
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	Pragma("noescape")
	Doc(name + " sets dst[i] = binary16(src[i]) for i < n, rounding to nearest even.")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	half := func() reg.VecVirtual { // a vector of lanes halves
		if s.evex {
			return YMM()
		}
		return XMM()
	}
	conv := func(disp int) {
		v, h := s.vec(), half()
		VMOVUPS(Mem{Base: src, Index: n, Scale: 4, Disp: disp * 4}, v)
		VCVTPS2PH(U8(roundNearestEven), v, h)
		VMOVUPS(h, Mem{Base: dst, Index: n, Scale: 2, Disp: disp * 2})
	}
	halfLoops(s, n, conv)

	Label("tail")
	rem := GP64()
	Load(Param("n"), rem)
	ANDQ(U32(s.lanes-1), rem)
	JZ(LabelRef("done"))
	if s.evex {
		k := tailMask(rem)
		v, h := ZMM(), YMM()
		VMOVUPS_Z(Mem{Base: src, Index: n, Scale: 4}, k, v)
		VCVTPS2PH(U8(roundNearestEven), v, h)
		VMOVDQU16(h, k, Mem{Base: dst, Index: n, Scale: 2})
	} else {
		Label("scalar")
		x := XMM()
		VMOVSS(Mem{Base: src, Index: n, Scale: 4}, x)
		VCVTPS2PH(U8(roundNearestEven), x, x)
		VPEXTRW(U8(0), x, Mem{Base: dst, Index: n, Scale: 2})
		INCQ(n)
		DECQ(rem)
		JNZ(LabelRef("scalar"))
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// fromHalf generates fromHalf{isa}(dst *float32, src *uint16, n int):
// dst[i] = float32(src[i]) for i < n.
func fromHalf(s isa) {
	name := "fromHalf" + s.name
	TEXT(name, NOSPLIT, "func(dst *float32, src *uint16, n int)")
	Pragma("noescape")
	Doc(name + " sets dst[i] = float32(binary16 src[i]) for i < n.")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	conv := func(disp int) {
		v := s.vec()
		VCVTPH2PS(Mem{Base: src, Index: n, Scale: 2, Disp: disp * 2}, v)
		VMOVUPS(v, Mem{Base: dst, Index: n, Scale: 4, Disp: disp * 4})
	}
	halfLoops(s, n, conv)

	Label("tail")
	rem := GP64()
	Load(Param("n"), rem)
	ANDQ(U32(s.lanes-1), rem)
	JZ(LabelRef("done"))
	if s.evex {
		k := tailMask(rem)
		v, h := ZMM(), YMM()
		VMOVDQU16_Z(Mem{Base: src, Index: n, Scale: 2}, k, h)
		VCVTPH2PS(h, v)
		VMOVUPS(v, k, Mem{Base: dst, Index: n, Scale: 4})
	} else {
		Label("scalar")
		g, x := GP32(), XMM()
		MOVWLZX(Mem{Base: src, Index: n, Scale: 2}, g)
		VMOVD(g, x)
		VCVTPH2PS(x, x)
		VMOVSS(x, Mem{Base: dst, Index: n, Scale: 4})
		INCQ(n)
		DECQ(rem)
		JNZ(LabelRef("scalar"))
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// halfLoops runs conv(d) for the element offsets d of whole vectors, four
// and then one per iteration, with i (initially n, the length) turned into
// the element index, and leaves i at the first element of the tail.
func halfLoops(s isa, i reg.Register, conv func(disp int)) {
	end4, end1 := GP64(), GP64()
	MOVQ(i, end4)
	ANDQ(I32(-4*s.lanes), end4)
	MOVQ(i, end1)
	ANDQ(I32(-s.lanes), end1)
	XORQ(i, i)
	Label("loop4")
	CMPQ(i, end4)
	JAE(LabelRef("loop1"))
	for u := 0; u < 4; u++ {
		conv(u * s.lanes)
	}
	ADDQ(U8(4*s.lanes), i)
	JMP(LabelRef("loop4"))
	Label("loop1")
	CMPQ(i, end1)
	JAE(LabelRef("tail"))
	conv(0)
	ADDQ(U8(s.lanes), i)
	JMP(LabelRef("loop1"))
}

// halfTail loads the first w (1 <= w <= 8 or 16) halves of an XMM or YMM
// vector of halves on AVX2 without reading any other byte, zeroing the
// rest: VPMASKMOVD takes the w/2 whole dwords, VPBROADCASTW and VPBLENDVB
// then put in half w-1 (again, when w is even).
type halfTail struct {
	vec      func() reg.VecVirtual
	dw, last reg.VecVirtual // dword i < w/2; word i == w-1
	lastb    reg.Register   // byte offset of half w-1
}

func newHalfTail(w reg.Register, ymm bool) *halfTail {
	h := &halfTail{vec: XMM}
	if ymm {
		h.vec = YMM
	}
	g := GP64()
	idx, t := h.vec(), h.vec()
	MOVQ(U64(0x0706050403020100), g)
	VMOVQ(g, idx.AsX())
	VPMOVZXBD(idx.AsX(), idx) // dword lanes [0 1 ...]
	MOVQ(w, g)
	SHRQ(U8(1), g)
	VMOVQ(g, t.AsX())
	VPBROADCASTD(t.AsX(), t)
	h.dw = h.vec()
	VPCMPGTD(idx, t, h.dw) // w/2 > i

	MOVQ(U64(0x0706050403020100), g)
	VMOVQ(g, idx.AsX())
	if ymm {
		MOVQ(U64(0x0f0e0d0c0b0a0908), g)
		VPINSRQ(U8(1), g, idx.AsX(), idx.AsX())
	}
	VPMOVZXBW(idx.AsX(), idx) // word lanes [0 1 ...]
	h.lastb = GP64()
	MOVQ(w, h.lastb)
	DECQ(h.lastb)
	VMOVQ(h.lastb, t.AsX())
	VPBROADCASTW(t.AsX(), t)
	h.last = h.vec()
	VPCMPEQW(idx, t, h.last) // i == w-1
	ADDQ(h.lastb, h.lastb)
	return h
}

// load sets dst to the first w halves at base, zeroes after them.
func (h *halfTail) load(base reg.Register, dst reg.VecVirtual) {
	VPMASKMOVD(Mem{Base: base}, h.dw, dst)
	t := h.vec()
	VPBROADCASTW(Mem{Base: base, Index: h.lastb, Scale: 1}, t)
	VPBLENDVB(h.last, t, dst, dst)
}

// scoresTF16NAVX512 generates scoresTF16N{nq}AVX512(out, q *[4]*float32,
// kt *uint16, dim, bs, n int): scoresTN{nq}AVX512 for keys stored as
// halves, each row of 16 slots widened by VCVTPH2PS where the float32
// version loads it.
func scoresTF16NAVX512(nq int) {
	name := fmt.Sprintf("scoresTF16N%dAVX512", nq)
	TEXT(name, NOSPLIT, "func(out, q *[4]*float32, kt *uint16, dim, bs, n int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets out[i][j] = sum_d q[i][d]*kt[d*bs+j] over d < dim, for i < %d and j < n <= bs (kt halves).", name, nq))
	outs := Load(Param("out"), GP64())
	qs := Load(Param("q"), GP64())
	qp := make([]reg.Register, nq)
	for i := range qp {
		qp[i] = GP64()
		MOVQ(Mem{Base: qs, Disp: 8 * i}, qp[i])
	}
	kt := Load(Param("kt"), GP64())
	bsb := loadStride("bs", 1)
	n := Load(Param("n"), GP64())
	bsb3 := GP64()
	LEAQ(Mem{Base: bsb, Index: bsb, Scale: 2}, bsb3)
	jb := GP64() // byte offset of the chunk in each out[i]
	XORQ(jb, jb)
	k := K()

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

	acc := make([][4]reg.VecVirtual, nq)
	for i := range acc {
		for u := range acc[i] {
			acc[i][u] = ZMM()
			VXORPS(acc[i][u], acc[i][u], acc[i][u])
		}
	}
	kp, dq, cnt := GP64(), GP64(), GP64()
	MOVQ(kt, kp)
	XORQ(dq, dq)
	Load(Param("dim"), cnt)
	SHRQ(U8(2), cnt)
	row := func(u int) Mem {
		switch u {
		case 0:
			return Mem{Base: kp}
		case 1:
			return Mem{Base: kp, Index: bsb, Scale: 1}
		case 2:
			return Mem{Base: kp, Index: bsb, Scale: 2}
		}
		return Mem{Base: kp, Index: bsb3, Scale: 1}
	}
	step := func(u int) {
		kr := ZMM()
		VCVTPH2PS_Z(row(u), k, kr) // lanes past n are not read
		for i := range acc {
			VFMADD231PS_BCST(Mem{Base: qp[i], Index: dq, Scale: 1, Disp: 4 * u}, kr, acc[i][u])
		}
	}
	Label("quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef("rem"))
	for u := 0; u < 4; u++ {
		step(u)
	}
	LEAQ(Mem{Base: kp, Index: bsb, Scale: 4}, kp)
	ADDQ(U8(16), dq)
	DECQ(cnt)
	JMP(LabelRef("quad"))
	// The last dim%4 rows go to accumulators 0, 1, 2.
	Label("rem")
	rem := cnt
	Load(Param("dim"), rem)
	ANDQ(U8(3), rem)
	for u := 0; u < 3; u++ {
		CMPQ(rem, U8(u))
		JE(LabelRef("sum"))
		step(u)
	}
	Label("sum")
	op := GP64()
	for i := range acc {
		a := acc[i]
		VADDPS(a[1], a[0], a[0])
		VADDPS(a[3], a[2], a[2])
		VADDPS(a[2], a[0], a[0])
		MOVQ(Mem{Base: outs, Disp: 8 * i}, op)
		VMOVUPS(a[0], k, Mem{Base: op, Index: jb, Scale: 1})
	}
	ADDQ(U8(32), kt)
	ADDQ(U8(64), jb)
	SUBQ(U8(16), n)
	JMP(LabelRef("chunk"))
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresTF16BAVX512 generates scoresTF16B{nb}AVX512(out, q *float32, kt
// *[4]*uint16, dim, bs int): scoresTB{nb}AVX512 for blocks of halves.
func scoresTF16BAVX512(nb int) {
	name := fmt.Sprintf("scoresTF16B%dAVX512", nb)
	TEXT(name, NOSPLIT, "func(out, q *float32, kt *[4]*uint16, dim, bs int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets out[b*bs+j] = sum_d q[d]*kt[b][d*bs+j] over d < dim, for b < %d and j < bs (kt halves).", name, nb))
	out := Load(Param("out"), GP64())
	kts := Load(Param("kt"), GP64())
	bsb := loadStride("bs", 1) // bytes between the rows of a block
	n := GP64()
	Load(Param("bs"), n)
	bsb3 := GP64()
	LEAQ(Mem{Base: bsb, Index: bsb, Scale: 2}, bsb3)
	jh := GP64() // byte offset of the chunk within a block of halves
	XORQ(jh, jh)
	k := K()

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

	acc := make([][4]reg.VecVirtual, nb)
	for b := range acc {
		for u := range acc[b] {
			acc[b][u] = ZMM()
			VXORPS(acc[b][u], acc[b][u], acc[b][u])
		}
	}
	kp := make([]reg.Register, nb)
	for b := range kp {
		kp[b] = GP64()
		MOVQ(Mem{Base: kts, Disp: 8 * b}, kp[b])
		ADDQ(jh, kp[b])
	}
	qp, cnt := GP64(), GP64()
	Load(Param("q"), qp)
	Load(Param("dim"), cnt)
	SHRQ(U8(2), cnt)
	row := func(b, u int) Mem {
		switch u {
		case 0:
			return Mem{Base: kp[b]}
		case 1:
			return Mem{Base: kp[b], Index: bsb, Scale: 1}
		case 2:
			return Mem{Base: kp[b], Index: bsb, Scale: 2}
		}
		return Mem{Base: kp[b], Index: bsb3, Scale: 1}
	}
	step := func(u int) {
		qb := ZMM()
		VBROADCASTSS(Mem{Base: qp, Disp: 4 * u}, qb)
		for b := range acc {
			kr := ZMM()
			VCVTPH2PS_Z(row(b, u), k, kr) // lanes past bs are not read
			VFMADD231PS(kr, qb, k, acc[b][u])
		}
	}
	Label("quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef("rem"))
	for u := 0; u < 4; u++ {
		step(u)
	}
	for b := range kp {
		LEAQ(Mem{Base: kp[b], Index: bsb, Scale: 4}, kp[b])
	}
	ADDQ(U8(16), qp)
	DECQ(cnt)
	JMP(LabelRef("quad"))
	Label("rem")
	rem := cnt
	Load(Param("dim"), rem)
	ANDQ(U8(3), rem)
	for u := 0; u < 3; u++ {
		CMPQ(rem, U8(u))
		JE(LabelRef("sum"))
		step(u)
	}
	Label("sum")
	ob := GP64() // block b's output
	MOVQ(out, ob)
	for b := range acc {
		a := acc[b]
		VADDPS(a[1], a[0], a[0])
		VADDPS(a[3], a[2], a[2])
		VADDPS(a[2], a[0], a[0])
		VMOVUPS(a[0], k, Mem{Base: ob, Index: jh, Scale: 2})
		if b < nb-1 {
			LEAQ(Mem{Base: ob, Index: bsb, Scale: 2}, ob) // bs floats on
		}
	}
	ADDQ(U8(32), jh)
	SUBQ(U8(16), n)
	JMP(LabelRef("chunk"))
	Label("done")
	VZEROUPPER()
	RET()
}

// axpyStridedF16NAVX512 generates axpyStridedF16N{nq}AVX512(y, a
// *[4]*float32, v *uint16, dim, stride, n int): axpyStridedN{nq}AVX512 for
// values stored as halves, each vector of a value row widened once and
// shared by the nq sums.
func axpyStridedF16NAVX512(nq int) {
	name := fmt.Sprintf("axpyStridedF16N%dAVX512", nq)
	TEXT(name, NOSPLIT, "func(y, a *[4]*float32, v *uint16, dim, stride, n int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s adds sum_t a[i][t]*v[t*stride:][:dim] to y[i][:dim] over t < n, for i < %d (v halves).", name, nq))
	ys := Load(Param("y"), GP64())
	as := Load(Param("a"), GP64())
	ap := make([]reg.Register, nq)
	for i := range ap {
		ap[i] = GP64()
		MOVQ(Mem{Base: as, Disp: 8 * i}, ap[i])
	}
	v := Load(Param("v"), GP64())
	sb := loadStride("stride", 1)

	// pass accumulates width vectors of every y[i] starting at element
	// yh/2 (yh: byte offset in a row of halves), over all t; with k, the
	// last vector is partial.
	pass := func(width int, k reg.OpmaskVirtual, label string, yh reg.Register) {
		acc := make([][]reg.VecVirtual, nq)
		yp := GP64()
		masked := func(u int) bool { return k != nil && u == width-1 }
		for i := range acc {
			acc[i] = make([]reg.VecVirtual, width)
			MOVQ(Mem{Base: ys, Disp: 8 * i}, yp)
			for u := range acc[i] {
				acc[i][u] = ZMM()
				m := Mem{Base: yp, Index: yh, Scale: 2, Disp: 64 * u}
				if masked(u) {
					VMOVUPS_Z(m, k, acc[i][u])
				} else {
					VMOVUPS(m, acc[i][u])
				}
			}
		}
		vp, t4, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: v, Index: yh, Scale: 1}, vp)
		XORQ(t4, t4)
		Load(Param("n"), cnt)
		Label(label + "t")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "store"))
		vr := make([]reg.VecVirtual, width)
		for u := range vr {
			m := Mem{Base: vp, Disp: 32 * u}
			vr[u] = ZMM()
			if masked(u) {
				VCVTPH2PS_Z(m, k, vr[u])
			} else {
				VCVTPH2PS(m, vr[u])
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
				m := Mem{Base: yp, Index: yh, Scale: 2, Disp: 64 * u}
				if masked(u) {
					VMOVUPS(acc[i][u], k, m)
				} else {
					VMOVUPS(acc[i][u], m)
				}
			}
		}
	}

	yh := GP64()
	XORQ(yh, yh)
	end := GP64()
	// Passes of 64 floats.
	Load(Param("dim"), end)
	ANDQ(I32(-64), end)
	SHLQ(U8(1), end)
	Label("wide")
	CMPQ(yh, end)
	JAE(LabelRef("narrow"))
	pass(4, nil, "w", yh)
	ADDQ(U32(128), yh)
	JMP(LabelRef("wide"))
	// Passes of 16 floats.
	Label("narrow")
	Load(Param("dim"), end)
	ANDQ(I32(-16), end)
	SHLQ(U8(1), end)
	Label("narrowloop")
	CMPQ(yh, end)
	JAE(LabelRef("tail"))
	pass(1, nil, "n", yh)
	ADDQ(U8(32), yh)
	JMP(LabelRef("narrowloop"))
	// The last dim%16 floats.
	Label("tail")
	rem := GP64()
	Load(Param("dim"), rem)
	ANDQ(U8(15), rem)
	JZ(LabelRef("done"))
	pass(1, tailMask(rem), "m", yh)
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresTF16AVX2 generates scoresTF16AVX2(out, q *float32, kt *uint16,
// dim, bs, n int): scoresTAVX2 for keys stored as halves. Where the float32
// version multiply-adds a row's 16 slots from memory (two YMMs), this one
// widens the 16 halves with VCVTPH2PS first; a last partial chunk loads
// its halves with halfTail where scoresTAVX2 uses VMASKMOVPS.
func scoresTF16AVX2() {
	s := isaAVX2
	name := "scoresTF16" + s.name
	TEXT(name, NOSPLIT, "func(out, q *float32, kt *uint16, dim, bs, n int)")
	Pragma("noescape")
	Doc(name + " sets out[j] = sum_d q[d]*kt[d*bs+j] over d < dim, for j < n <= bs (kt halves).")
	out := Load(Param("out"), GP64())
	q := Load(Param("q"), GP64())
	kt := Load(Param("kt"), GP64())
	dim := Load(Param("dim"), GP64())
	bsb := loadStride("bs", 1) // bytes between the rows of kt
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
	const halves = 2 // YMMs per chunk of 16 slots

	// chunk computes the 16 slots at kt into out: rowFMA(kp, m, b, acc)
	// adds b times the row at m (kp+offset) to acc[0] and acc[1], and
	// store writes the sums.
	chunk := func(label string, rowFMA func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual), store func(acc []reg.VecVirtual)) {
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
		row := func(u int) Mem { // row u of the current quad
			switch u {
			case 0:
				return Mem{Base: kp}
			case 1:
				return Mem{Base: kp, Index: bsb, Scale: 1}
			case 2:
				return Mem{Base: kp, Index: bsb, Scale: 2}
			}
			return Mem{Base: kp, Index: bsb3, Scale: 1}
		}
		step := func(u int) {
			b := s.vec()
			VBROADCASTSS(Mem{Base: qp, Disp: 4 * u}, b)
			rowFMA(row(u), b, acc[u])
		}
		Label(label + "quad")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "rem"))
		for u := 0; u < nacc; u++ {
			step(u)
		}
		LEAQ(Mem{Base: kp, Index: bsb, Scale: 4}, kp)
		ADDQ(U8(16), qp)
		DECQ(cnt)
		JMP(LabelRef(label + "quad"))
		// The last dim%4 rows go to accumulators 0, 1, 2.
		Label(label + "rem")
		for u := 0; u < nacc-1; u++ {
			CMPQ(rem, U8(u))
			JE(LabelRef(label + "sum"))
			step(u)
		}
		Label(label + "sum")
		for h := 0; h < halves; h++ {
			VADDPS(acc[1][h], acc[0][h], acc[0][h])
			VADDPS(acc[3][h], acc[2][h], acc[2][h])
			VADDPS(acc[2][h], acc[0][h], acc[0][h])
		}
		store(acc[0])
	}

	// Full chunks: VCVTPH2PS from memory.
	Label("full")
	CMPQ(n, U8(16))
	JB(LabelRef("tail"))
	chunk("f",
		func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual) {
			for h := range acc {
				t := YMM()
				VCVTPH2PS(m.Offset(16*h), t)
				VFMADD231PS(t, b, acc[h])
			}
		},
		func(acc []reg.VecVirtual) {
			for h, a := range acc {
				VMOVUPS(a, Mem{Base: out, Disp: 32 * h})
			}
		})
	ADDQ(U8(32), kt)
	ADDQ(U8(64), out)
	SUBQ(U8(16), n)
	JMP(LabelRef("full"))

	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	ht := newHalfTail(n, true)
	rp := GP64()
	chunk("t",
		func(m Mem, b reg.VecVirtual, acc []reg.VecVirtual) {
			LEAQ(m, rp)
			hv := YMM()
			ht.load(rp, hv)
			t := YMM()
			VCVTPH2PS(hv.AsX(), t)
			VFMADD231PS(t, b, acc[0])
			hi := XMM()
			VEXTRACTI128(U8(1), hv, hi)
			t = YMM()
			VCVTPH2PS(hi, t)
			VFMADD231PS(t, b, acc[1])
		},
		func(acc []reg.VecVirtual) {
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
			VMASKMOVPS(acc[0], m0, Mem{Base: out})
			VMASKMOVPS(acc[1], m1, Mem{Base: out, Disp: 32})
		})
	Label("done")
	VZEROUPPER()
	RET()
}

// axpyStridedF16AVX2 generates axpyStridedF16AVX2(y, a *float32, v
// *uint16, dim, stride, n int): y[i] += sum_t a[t]*v[t*stride+i] over
// t < n, for i < dim, with y in registers (32 floats per pass). Each
// element of y is one chain of fused multiply-adds in t order, the
// arithmetic of axpyAVX2 called once per t (AxpyStrided's AVX2 level).
func axpyStridedF16AVX2() {
	name := "axpyStridedF16AVX2"
	TEXT(name, NOSPLIT, "func(y, a *float32, v *uint16, dim, stride, n int)")
	Pragma("noescape")
	Doc(name + " adds sum_t a[t]*v[t*stride:][:dim] to y[:dim] over t < n (v halves).")
	y := Load(Param("y"), GP64())
	a := Load(Param("a"), GP64())
	v := Load(Param("v"), GP64())
	sb := loadStride("stride", 1)

	// pass accumulates width vectors of y from element yh/2 over all t;
	// with ht, one partial vector of rem lanes (ym: its float lanes).
	pass := func(width int, ht *halfTail, ym reg.VecVirtual, label string, yh reg.Register) {
		acc := make([]reg.VecVirtual, width)
		for u := range acc {
			acc[u] = YMM()
			m := Mem{Base: y, Index: yh, Scale: 2, Disp: 32 * u}
			if ht != nil {
				VMASKMOVPS(m, ym, acc[u])
			} else {
				VMOVUPS(m, acc[u])
			}
		}
		vp, ap, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: v, Index: yh, Scale: 1}, vp)
		MOVQ(a, ap)
		Load(Param("n"), cnt)
		Label(label + "t")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "store"))
		av := YMM()
		VBROADCASTSS(Mem{Base: ap}, av)
		for u := range acc {
			t := YMM()
			if ht != nil {
				hx := XMM()
				ht.load(vp, hx)
				VCVTPH2PS(hx, t)
			} else {
				VCVTPH2PS(Mem{Base: vp, Disp: 16 * u}, t)
			}
			VFMADD231PS(t, av, acc[u])
		}
		ADDQ(sb, vp)
		ADDQ(U8(4), ap)
		DECQ(cnt)
		JMP(LabelRef(label + "t"))
		Label(label + "store")
		for u := range acc {
			m := Mem{Base: y, Index: yh, Scale: 2, Disp: 32 * u}
			if ht != nil {
				VMASKMOVPS(acc[u], ym, m)
			} else {
				VMOVUPS(acc[u], m)
			}
		}
	}

	yh := GP64()
	XORQ(yh, yh)
	end := GP64()
	// Passes of 32 floats.
	Load(Param("dim"), end)
	ANDQ(I32(-32), end)
	SHLQ(U8(1), end)
	Label("wide")
	CMPQ(yh, end)
	JAE(LabelRef("narrow"))
	pass(4, nil, nil, "w", yh)
	ADDQ(U8(64), yh)
	JMP(LabelRef("wide"))
	// Passes of 8 floats.
	Label("narrow")
	Load(Param("dim"), end)
	ANDQ(I32(-8), end)
	SHLQ(U8(1), end)
	Label("narrowloop")
	CMPQ(yh, end)
	JAE(LabelRef("tail"))
	pass(1, nil, nil, "n", yh)
	ADDQ(U8(16), yh)
	JMP(LabelRef("narrowloop"))
	// The last dim%8 floats.
	Label("tail")
	rem := GP64()
	Load(Param("dim"), rem)
	ANDQ(U8(7), rem)
	JZ(LabelRef("done"))
	ht := newHalfTail(rem, false)
	idx, ym := YMM(), YMM()
	g := GP64()
	MOVQ(U64(0x0706050403020100), g)
	VMOVQ(g, idx.AsX())
	VPMOVZXBD(idx.AsX(), idx) // [0 1 ... 7]
	VMOVQ(rem, ym.AsX())
	VPBROADCASTD(ym.AsX(), ym)
	VPCMPGTD(idx, ym, ym) // rem > i
	pass(1, ht, ym, "m", yh)
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresRowsF16 generates scoresRowsF16{isa}(out, q *float32, k *uint16,
// dim, stride, n int): scoresRows{isa} for keys stored as rows of halves,
// each four dimensions of a key widened by VCVTPH2PS, so that a score is
// bit for bit what the F16 ScoresT kernels compute from the same key.
func scoresRowsF16(s isa) {
	name := "scoresRowsF16" + s.name
	TEXT(name, NOSPLIT, "func(out, q *float32, k *uint16, dim, stride, n int)")
	Pragma("noescape")
	Doc(name + " sets out[j] = sum_d q[d]*k[j*stride+d] over d < dim, for j < n (k halves), in ScoresT's order of operations.")
	out := Load(Param("out"), GP64())
	k := Load(Param("k"), GP64())
	sb := loadStride("stride", 1)
	n := Load(Param("n"), GP64())
	sb3 := GP64()
	LEAQ(Mem{Base: sb, Index: sb, Scale: 2}, sb3)

	// The mask of the last dim%4 dimensions.
	rem := GP64()
	Load(Param("dim"), rem)
	ANDQ(U8(3), rem)
	var km reg.OpmaskVirtual
	var vm reg.VecVirtual
	var ht *halfTail
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
		VPCMPGTD(idx, vm, vm)        // rem > i
		ht = newHalfTail(rem, false) // unused when rem = 0
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
			base := kp
			if j >= 4 {
				base, j = kp4, j-4
			}
			switch j {
			case 0:
				return Mem{Base: base}
			case 1:
				return Mem{Base: base, Index: sb, Scale: 1}
			case 2:
				return Mem{Base: base, Index: sb, Scale: 2}
			}
			return Mem{Base: base, Index: sb3, Scale: 1}
		}
		Label(label + "quad")
		TESTQ(cnt, cnt)
		JZ(LabelRef(label + "rem"))
		qv := XMM()
		VMOVUPS(Mem{Base: qp}, qv)
		for j := range acc {
			kv := XMM()
			VCVTPH2PS(key(j), kv)
			VFMADD231PS(kv, qv, acc[j])
		}
		ADDQ(U8(16), qp)
		ADDQ(U8(8), kp)
		if g > 4 {
			ADDQ(U8(8), kp4)
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
				kv := XMM()
				VCVTPH2PS_Z(key(j), km, kv)
				VFMADD231PS(kv, qv, km, acc[j]) // lanes >= rem unchanged
			}
		} else {
			VMASKMOVPS(Mem{Base: qp}, vm, qv)
			p := GP64()
			for j := range acc {
				kv, t := XMM(), XMM()
				LEAQ(key(j), p)
				ht.load(p, kv)
				VCVTPH2PS(kv, kv)
				VMOVAPS(acc[j], t)
				VFMADD231PS(kv, qv, t)
				VBLENDVPS(vm, t, acc[j], acc[j]) // lanes >= rem unchanged
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
