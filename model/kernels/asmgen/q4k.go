package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Q4_K super-block (144 bytes): float16 d, float16 dmin, 12 bytes of
// packed 6-bit scales and mins, 128 bytes of nibbles. Q8_K activation
// block (292 bytes, the kernels package's layout): float32 d, 256 int8
// quants, 16 int16 sums of runs of 16. See q4k.go in the kernels package.
const (
	q4kBlock  = 144
	q8kBlock  = 292
	q8kQuants = 4
	q8kSums   = 260
	q4kNXMax  = 4 // activation rows per tile
)

var q4kConsts Mem
var q4kConstsDone bool

// q4kConstTable: 32 bytes of 0x0F, then 8 VPSHUFB controls of 32 bytes
// that broadcast int16 word j of each 128-bit lane.
func q4kConstTable() Mem {
	if !q4kConstsDone {
		q4kConsts = GLOBL("q4kconsts", RODATA|NOPTR)
		for i := 0; i < 8; i++ {
			DATA(4*i, U32(0x0F0F0F0F))
		}
		for j := 0; j < 8; j++ {
			w := uint32(2*j) | uint32(2*j+1)<<8
			for i := 0; i < 8; i++ {
				DATA(32+32*j+4*i, U32(w|w<<16))
			}
		}
		q4kConstsDone = true
	}
	return q4kConsts
}

// q4kTileAVX2 generates q4kTile{nx}AVX2(w *byte, x *byte, ldx int, nb int,
// out *float32, ldo int, nrows int): for each of nrows consecutive Q4_K
// weight rows (nb super-blocks each, no gap) its dot products with nx Q8_K activation rows
// (ldx bytes apart) of nb super-blocks, out[j*ldo+r] for activation row
// j and weight row r.
//
// Per super-block the scales and mins are unpacked once in general
// registers (llama.cpp's three-word shuffle) and the nibbles once per 64
// weights; per activation row VPMADDUBSW (nibbles unsigned, quants
// signed: at most 2*15*127, no int16 overflow) then VPMADDWD by the
// sub-block's scale sum into int32 lanes. At the block's end the sums
// become float, times d*d_y, and the mins' term (the quants' run sums
// paired, VPMADDWD by the mins) times dmin*d_y is taken off.
func q4kTileAVX2(nx int) {
	name := fmt.Sprintf("q4kTile%dAVX2", nx)
	cst := q4kConstTable()
	kTile(name, "Q4_K", nx, func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual) {
		// Scales (bytes 0-7) and mins (bytes 8-15) from the 12 packed
		// bytes u0, u1, u2.
		u0, u1, u2, t := GP32(), GP32(), GP32(), GP32()
		MOVL(Mem{Base: wp, Disp: 4}, u0)
		MOVL(Mem{Base: wp, Disp: 8}, u1)
		MOVL(Mem{Base: wp, Disp: 12}, u2)
		sc1 := GP32() // scales 4-7: (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4
		MOVL(u2, sc1)
		ANDL(U32(0x0F0F0F0F), sc1)
		MOVL(u0, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
		ORL(t, sc1)
		mn1 := GP32() // mins 4-7: ((u2 >> 4) & 0x0f..) | ((u1 >> 6) & 0x03..) << 4
		MOVL(u2, mn1)
		SHRL(U8(4), mn1)
		ANDL(U32(0x0F0F0F0F), mn1)
		MOVL(u1, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
		ORL(t, mn1)
		ANDL(U32(0x3F3F3F3F), u0) // scales 0-3
		ANDL(U32(0x3F3F3F3F), u1) // mins 0-3
		sc, mn := GP64(), GP64()
		MOVL(sc1, sc.As32())
		SHLQ(U8(32), sc)
		ORQ(u0.As64(), sc)
		MOVL(mn1, mn.As32())
		SHLQ(U8(32), mn)
		ORQ(u1.As64(), mn)
		scales := YMM()
		VMOVQ(sc, scales.AsX())
		VPMOVZXBW(scales.AsX(), scales.AsX())
		VINSERTI128(U8(1), scales.AsX(), scales, scales)

		sumi := make([]reg.VecVirtual, nx)
		for j := range sumi {
			sumi[j] = YMM()
			VPXOR(sumi[j], sumi[j], sumi[j])
		}
		for k := 0; k < 4; k++ {
			lo, hi := YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 16 + 32*k}, hi)
			VPAND(cst, hi, lo)
			VPSRLW(U8(4), hi, hi)
			VPAND(cst, hi, hi)
			for h, q := range []reg.VecVirtual{lo, hi} {
				s := YMM()
				VPSHUFB(cst.Offset(32+32*(2*k+h)), scales, s)
				for j := 0; j < nx; j++ {
					p := YMM()
					VPMADDUBSW(Mem{Base: xr[j], Disp: q8kQuants + 64*k + 32*h}, q, p)
					VPMADDWD(s, p, p)
					VPADDD(p, sumi[j], sumi[j])
				}
			}
		}
		// d and dmin, and the mins as int16.
		dd := XMM()
		VMOVD(Mem{Base: wp}, dd)
		VCVTPH2PS(dd, dd)
		dD, dM := YMM(), YMM()
		VBROADCASTSS(dd, dD)
		VMOVSHDUP(dd, dd)
		VBROADCASTSS(dd, dM)
		mins := XMM()
		VMOVQ(mn, mins)
		VPMOVZXBW(mins, mins)
		for j := 0; j < nx; j++ {
			ps, hs := XMM(), XMM()
			VMOVDQU(Mem{Base: xr[j], Disp: q8kSums}, ps)
			VMOVDQU(Mem{Base: xr[j], Disp: q8kSums + 16}, hs)
			VPHADDW(hs, ps, ps) // the 8 sub-blocks' sums
			VPMADDWD(mins, ps, ps)
			VCVTDQ2PS(ps, ps) // 4 lanes; the upper ones are zero
			dy, f := YMM(), YMM()
			VBROADCASTSS(Mem{Base: xr[j]}, dy)
			VCVTDQ2PS(sumi[j], f)
			s := YMM()
			VMULPS(dD, dy, s)
			VFMADD231PS(f, s, acc[j])
			VMULPS(dM, dy, s)
			VFNMADD231PS(ps.AsY(), s, acc[j])
			ADDQ(U32(q8kBlock), xr[j])
		}
		ADDQ(U32(q4kBlock), wp)
	})
}

// kTile generates a K-quant tile function: for each of nrows weight rows,
// nb blocks of block (which advances wp and the activation pointers xr
// past one super-block, adding into the nx sums acc), then the sums'
// lanes added up into out.
func kTile(name, typ string, nx int, block func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual)) {
	TEXT(name, NOSPLIT, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, nrows int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes nrows %s weight rows times %d Q8_K activation rows.", name, typ, nx))
	wp := Load(Param("w"), GP64()) // the weights, row after row
	outp := Load(Param("out"), GP64())
	nrows := Load(Param("nrows"), GP64())

	Label("row")
	TESTQ(nrows, nrows)
	JZ(LabelRef("done"))
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nx)
	acc := make([]reg.VecVirtual, nx)
	for j := range acc {
		acc[j] = YMM()
		VXORPS(acc[j], acc[j], acc[j])
	}
	nb := Load(Param("nb"), GP64())
	countLoop("blk", nb, func() { block(wp, xr, acc) })
	op := GP64()
	MOVQ(outp, op)
	ldo := loadStride("ldo", 2)
	for j := 0; j < nx; j++ {
		x := hsum(isaAVX2, acc[j])
		VMOVSS(x, Mem{Base: op})
		if j+1 < nx {
			ADDQ(ldo, op)
		}
	}
	ADDQ(U8(4), outp)
	DECQ(nrows)
	JMP(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}

func genQ4K() {
	for nx := 1; nx <= q4kNXMax; nx++ {
		q4kTileAVX2(nx)
	}
	for nx := 1; nx <= q4kNXMax; nx++ {
		q6kTileAVX2(nx)
	}
}

// Q6_K super-block (210 bytes): 128 bytes of low nibbles (ql), 64 of high
// bit pairs (qh), 16 int8 scales, float16 d. Weight e = 128h + 32k + l
// (h < 2, k < 4, l < 32) is d * sc[e/16] * (q - 32), q's low four bits
// from ql[64h + 32(k&1) + l] (the high nibble for k >= 2) and its top two
// from qh[32h + l] bits 2k, 2k+1.
const q6kBlock = 210

var q6kConsts Mem
var q6kConstsDone bool

// q6kConstTable: 32 bytes each of 0x0F, 0x03, 0x0C, 0x30, then the
// VPSHUFB control that fills the low lane with word 0 and the high lane
// with word 1.
func q6kConstTable() Mem {
	if !q6kConstsDone {
		q6kConsts = GLOBL("q6kconsts", RODATA|NOPTR)
		for c, b := range []uint32{0x0F0F0F0F, 0x03030303, 0x0C0C0C0C, 0x30303030} {
			for i := 0; i < 8; i++ {
				DATA(32*c+4*i, U32(b))
			}
		}
		for i := 0; i < 4; i++ {
			DATA(128+4*i, U32(0x01000100))
		}
		for i := 0; i < 4; i++ {
			DATA(144+4*i, U32(0x03020302))
		}
		q6kConstsDone = true
	}
	return q6kConsts
}

// q6kTileAVX2 generates q6kTile{nx}AVX2, q4kTile's counterpart for Q6_K
// weights: per 32 weights the 6-bit values are put together from the
// nibbles and bit pairs (masks and shifts that keep within bytes), then
// VPMADDUBSW (values unsigned, 0..63) and VPMADDWD by the two groups'
// scales (low lane, high lane); the values' offset of 32 is taken off
// once per block as 32 * Σ_g sc_g * bsum_g.
func q6kTileAVX2(nx int) {
	name := fmt.Sprintf("q6kTile%dAVX2", nx)
	cst := q6kConstTable()
	kTile(name, "Q6_K", nx, func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual) {
		sumi := make([]reg.VecVirtual, nx)
		// The offset: sumi = -32 * Σ_g sc_g * bsum_g.
		all := YMM()
		VPMOVSXBW(Mem{Base: wp, Disp: 192}, all)
		for j := range sumi {
			sumi[j] = YMM()
			VPMADDWD(Mem{Base: xr[j], Disp: q8kSums}, all, sumi[j])
			VPSLLD(U8(5), sumi[j], sumi[j])
			z := YMM()
			VPXOR(z, z, z)
			VPSUBD(sumi[j], z, sumi[j])
		}
		for h := 0; h < 2; h++ {
			qa, qb, qh := YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 64 * h}, qa)
			VMOVDQU(Mem{Base: wp, Disp: 64*h + 32}, qb)
			VMOVDQU(Mem{Base: wp, Disp: 128 + 32*h}, qh)
			for k := 0; k < 4; k++ {
				q, t := YMM(), YMM()
				src := qa
				if k&1 == 1 {
					src = qb
				}
				if k < 2 {
					VPAND(cst, src, q) // low nibbles
				} else {
					VPSRLW(U8(4), src, q)
					VPAND(cst, q, q) // high nibbles
				}
				switch k {
				case 0: // bits 0-1 of qh, to 4-5
					VPAND(cst.Offset(32), qh, t)
					VPSLLW(U8(4), t, t)
				case 1: // bits 2-3, to 4-5
					VPAND(cst.Offset(64), qh, t)
					VPSLLW(U8(2), t, t)
				case 2: // bits 4-5 stay
					VPAND(cst.Offset(96), qh, t)
				case 3: // bits 6-7, to 4-5
					VPSRLW(U8(2), qh, t)
					VPAND(cst.Offset(96), t, t)
				}
				VPOR(t, q, q)
				s := YMM()
				VPBROADCASTW(Mem{Base: wp, Disp: 192 + 8*h + 2*k}, s.AsX())
				VPMOVSXBW(s.AsX(), s)
				VPSHUFB(cst.Offset(128), s, s)
				for j := 0; j < nx; j++ {
					p := YMM()
					VPMADDUBSW(Mem{Base: xr[j], Disp: q8kQuants + 128*h + 32*k}, q, p)
					VPMADDWD(s, p, p)
					VPADDD(p, sumi[j], sumi[j])
				}
			}
		}
		dd := XMM()
		VPINSRW(U8(0), Mem{Base: wp, Disp: 208}, dd, dd)
		VCVTPH2PS(dd, dd)
		dD := YMM()
		VBROADCASTSS(dd, dD)
		for j := 0; j < nx; j++ {
			dy, f := YMM(), YMM()
			VBROADCASTSS(Mem{Base: xr[j]}, dy)
			VMULPS(dD, dy, dy)
			VCVTDQ2PS(sumi[j], f)
			VFMADD231PS(f, dy, acc[j])
			ADDQ(U32(q8kBlock), xr[j])
		}
		ADDQ(U32(q6kBlock), wp)
	})
}
