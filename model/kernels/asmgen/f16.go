package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The F16 kernels: conversions between float32 and IEEE binary16 (the KV
// cache's F16 storage), and the attention kernels of vec.go for keys and
// values stored as halves (elemF16). Each F16 attention kernel comes from
// its float32 twin's generator, with the loads of the keys or values
// widening them by VCVTPH2PS (exact), so that it computes, bit for bit,
// what the twin computes on the widened data.
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
	attention(elemF16)
	axpyStrided(elemF16, isaAVX2)
}

// elemF16 is the binary16 element of the attention kernels.
var elemF16 = elem{
	suffix:  "F16",
	goType:  "uint16",
	docNote: " (%s halves)",
	size:    2,
	shift:   1,
	load:    func(m Mem, dst reg.VecVirtual) { VCVTPH2PS(m, dst) },
	loadZ:   func(m Mem, k reg.OpmaskVirtual, dst reg.VecVirtual) { VCVTPH2PS_Z(m, k, dst) },
	partialAVX2: func(w reg.Register, lanes int) partialLoad {
		return newHalfTail(w, lanes > 8).widen
	},
}

// roundNearestEven is VCVTPS2PH's immediate: round to nearest even,
// whatever the MXCSR rounding mode.
const roundNearestEven = 0

// toHalf generates toHalf{isa}(dst *uint16, src *float32, n int):
// dst[i] = binary16(src[i]) for i < n.
func toHalf(s isa) {
	dst, src, n := convFunc("toHalf"+s.name, "uint16", "float32",
		"sets dst[i] = binary16(src[i]) for i < n, rounding to nearest even.")
	half := func() reg.VecVirtual { // a vector of lanes halves
		if s.evex {
			return YMM()
		}
		return XMM()
	}
	halfConv(s, n,
		func(disp int) {
			v, h := s.vec(), half()
			VMOVUPS(Mem{Base: src, Index: n, Scale: 4, Disp: disp * 4}, v)
			VCVTPS2PH(U8(roundNearestEven), v, h)
			VMOVUPS(h, Mem{Base: dst, Index: n, Scale: 2, Disp: disp * 2})
		},
		func(k reg.OpmaskVirtual) {
			v, h := ZMM(), YMM()
			VMOVUPS_Z(Mem{Base: src, Index: n, Scale: 4}, k, v)
			VCVTPS2PH(U8(roundNearestEven), v, h)
			VMOVDQU16(h, k, Mem{Base: dst, Index: n, Scale: 2})
		},
		func() {
			x := XMM()
			VMOVSS(Mem{Base: src, Index: n, Scale: 4}, x)
			VCVTPS2PH(U8(roundNearestEven), x, x)
			VPEXTRW(U8(0), x, Mem{Base: dst, Index: n, Scale: 2})
		})
}

// fromHalf generates fromHalf{isa}(dst *float32, src *uint16, n int):
// dst[i] = float32(src[i]) for i < n.
func fromHalf(s isa) {
	dst, src, n := convFunc("fromHalf"+s.name, "float32", "uint16",
		"sets dst[i] = float32(binary16 src[i]) for i < n.")
	halfConv(s, n,
		func(disp int) {
			v := s.vec()
			VCVTPH2PS(Mem{Base: src, Index: n, Scale: 2, Disp: disp * 2}, v)
			VMOVUPS(v, Mem{Base: dst, Index: n, Scale: 4, Disp: disp * 4})
		},
		func(k reg.OpmaskVirtual) {
			v, h := ZMM(), YMM()
			VMOVDQU16_Z(Mem{Base: src, Index: n, Scale: 2}, k, h)
			VCVTPH2PS(h, v)
			VMOVUPS(v, k, Mem{Base: dst, Index: n, Scale: 4})
		},
		func() {
			g, x := GP32(), XMM()
			MOVWLZX(Mem{Base: src, Index: n, Scale: 2}, g)
			VMOVD(g, x)
			VCVTPH2PS(x, x)
			VMOVSS(x, Mem{Base: dst, Index: n, Scale: 4})
		})
}

// convFunc declares the conversion name(dst *to, src *from, n int), doc
// its documentation after the name, and loads its arguments.
func convFunc(name, to, from, doc string) (dst, src, n reg.Register) {
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *%s, src *%s, n int)", to, from))
	Pragma("noescape")
	Doc(name + " " + doc)
	return Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("n"), GP64())
}

// halfConv emits a conversion's loops over n elements, n in i: conv(d)
// converts the whole vector at element offset i+d, four and then one per
// iteration, with i (initially n) turned into the element index. The last
// n%lanes elements, from offset i, go to masked(k) with k their lanes on
// AVX-512, and to scalar one at a time on AVX2.
func halfConv(s isa, i reg.Register, conv func(disp int), masked func(k reg.OpmaskVirtual), scalar func()) {
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

	Label("tail")
	rem := GP64()
	Load(Param("n"), rem)
	ANDQ(U32(s.lanes-1), rem)
	JZ(LabelRef("done"))
	if s.evex {
		masked(tailMask(rem))
	} else {
		Label("scalar")
		scalar()
		INCQ(i)
		DECQ(rem)
		JNZ(LabelRef("scalar"))
	}
	Label("done")
	VZEROUPPER()
	RET()
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

// widen is elemF16's partialLoad: one halfTail load of the row's halves
// (a YMM of 16 for two vectors of floats, else an XMM), widened a vector
// of floats at a time.
func (h *halfTail) widen(m Mem, masks []reg.VecVirtual, use func(h int, v reg.VecVirtual)) {
	if len(masks) > 2 {
		panic("asmgen: a halfTail row widens to at most two vectors")
	}
	p := m.Base
	if m.Index != nil || m.Disp != 0 {
		p = GP64()
		LEAQ(m, p)
	}
	hv := h.vec()
	h.load(p, hv)
	for i, mk := range masks {
		src := hv.AsX()
		if i == 1 {
			hi := XMM()
			VEXTRACTI128(U8(1), hv, hi)
			src = hi
		}
		v := vecLike(mk)
		VCVTPH2PS(src, v)
		use(i, v)
	}
}
