package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The eight-row layouts (q4k8, q5k8, q6k8, q408) on AVX-512 VNNI: a tile
// takes two consecutive groups at a time (sixteen weight rows, one a
// 32-bit lane of a ZMM register: each 32-byte piece of the first group's
// unit in the low half, the same piece of the second group's unit, nb
// units further, inserted in the high half), so that one VPDPBUSD with
// four activation quants broadcast from memory multiplies four weights of
// sixteen rows and adds them into int32 lanes: one instruction for the
// AVX2 tiles' VPBROADCASTD, VPMADDUBSW and VPADDW on eight rows. The
// integer sums are those of the AVX2 tiles and the Go code, exact, and
// the float steps at the end of a super-block are the same operations in
// the same order, lane by lane.
//
// Scaling the sums by the 6-bit sub-block scales: VPDPWSSD of an int32
// sum that fits in int16 by a dword holding (scale, 0) adds scale*sum
// (the sum's high word, its sign, meets the 0). So a Q4_K sub-block's
// products are summed in two registers, the low nibbles' 16 weights and
// the high nibbles' (|sum| <= 16*15*128 < 2^15 each), and each is added
// scaled into the block sum by one VPDPWSSD; Q5_K's values reach 31, so
// its sums are flushed every 8 weights.

// kvnniNXMax is the most activation rows of a VNNI tile: eight rows keep
// three ZMM registers each (Q4_K: two sums and the block sum; the float
// results are on the stack). 16 rows take two tiles instead of three of
// six rows: the nibbles are unpacked once per tile.
const kvnniNXMax = 8

// vnniConsts: 0x0F bytes, 0x10 bytes, 0x30 bytes, and the int16 -8 in
// the low word of a dword (for VPDPWSSD).
func vnniConsts() Mem {
	return constTable("kvnniconsts", func() []uint32 {
		return []uint32{0x0F0F0F0F, 0x10101010, 0x30303030, 0x0000FFF8}
	})
}

// pairLoop emits a VNNI tile for an eight-row layout of unit bytes a
// group and super-block: func(w *byte, x *byte, ldx int, nb int, out
// *float32, ldo int, npairs int), for each of npairs pairs of consecutive
// groups nb blocks of block (which advances wp past a unit of the first
// group, the second group's unit lying gs bytes further, and the
// activation pointers xr past a Q8_K block, adding into the nx sums acc,
// lane l for the pair's row l), then the sums stored, sixteen floats for
// each activation row.
func pairLoop(name, doc string, nx, unit int, block func(wp, gs reg.Register, xr []reg.Register, acc []Mem)) {
	TEXT(name, NOSPLIT, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, npairs int)")
	Pragma("noescape")
	Doc(doc)
	// The float sums live on the stack (a load and a store a super-block
	// each): the registers hold three integer sums for each of up to
	// eight activation rows.
	accMem := AllocLocal(64 * nx)
	acc := make([]Mem, nx)
	for i := range acc {
		acc[i] = accMem.Offset(64 * i)
	}
	wp := Load(Param("w"), GP64())
	outp := Load(Param("out"), GP64())
	left := Load(Param("npairs"), GP64())
	gs := Load(Param("nb"), GP64())
	IMUL3Q(U32(unit), gs, gs) // a group's bytes

	Label("pair")
	TESTQ(left, left)
	JZ(LabelRef("done"))
	z := zeroed()
	for i := range acc {
		VMOVUPS(z, acc[i])
	}
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nx)
	nb := Load(Param("nb"), GP64())
	countLoop("blk", nb, func() { block(wp, gs, xr, acc) })
	op := GP64()
	MOVQ(outp, op)
	ldo := loadStride("ldo", 2)
	for i := 0; i < nx; i++ {
		t := ZMM()
		VMOVUPS(acc[i], t)
		VMOVUPS(t, Mem{Base: op})
		if i+1 < nx {
			ADDQ(ldo, op)
		}
	}
	ADDQ(U8(64), outp)
	ADDQ(gs, wp) // past the second group
	DECQ(left)
	JMP(LabelRef("pair"))
	Label("done")
	VZEROUPPER()
	RET()
}

// pairLoad loads the 32 bytes at disp of the pair's two units into one
// ZMM register (the first group's low).
func pairLoad(wp, gs reg.Register, disp int) reg.VecVirtual {
	// (The broadcast defines the whole register: a load into its low
	// half would leave avo's liveness believing the high half live since
	// the function's entry.)
	z := ZMM()
	VBROADCASTI64X4(Mem{Base: wp, Disp: disp}, z)
	VINSERTI64X4(U8(1), Mem{Base: wp, Index: gs, Scale: 1, Disp: disp}, z, z)
	return z
}

// pairHalves returns the sixteen rows' float16 values at disp (eight in
// each unit) as float32.
func pairHalves(wp, gs reg.Register, disp int) reg.VecVirtual {
	h, z := YMM(), ZMM()
	VBROADCASTI32X4(Mem{Base: wp, Disp: disp}, h)
	VINSERTI32X4(U8(1), Mem{Base: wp, Index: gs, Scale: 1, Disp: disp}, h, h)
	VCVTPH2PS(h, z)
	return z
}

// pairBytesDW returns the sixteen rows' bytes at disp (eight in each
// unit) zero-extended (or sign-extended) to dwords.
func pairBytesDW(wp, gs reg.Register, disp int, signed bool) reg.VecVirtual {
	x, z := XMM(), ZMM()
	VMOVQ(Mem{Base: wp, Disp: disp}, x)
	VPINSRQ(U8(1), Mem{Base: wp, Index: gs, Scale: 1, Disp: disp}, x, x)
	if signed {
		VPMOVSXBD(x, z)
	} else {
		VPMOVZXBD(x, z)
	}
	return z
}

// pairBytesW returns the sixteen bytes at disp of each unit widened to
// words (zero- or sign-extended): dword l holds row l's two bytes.
func pairBytesW(wp, gs reg.Register, disp int, signed bool) reg.VecVirtual {
	y, z := YMM(), ZMM()
	VBROADCASTI32X4(Mem{Base: wp, Disp: disp}, y)
	VINSERTI32X4(U8(1), Mem{Base: wp, Index: gs, Scale: 1, Disp: disp}, y, y)
	if signed {
		VPMOVSXBW(y, z)
	} else {
		VPMOVZXBW(y, z)
	}
	return z
}

// pairPrefetch prefetches the line at disp of both groups' next units.
func pairPrefetch(wp, gs reg.Register, unit, disp int) {
	PREFETCHT0(Mem{Base: wp, Disp: unit + disp})
	PREFETCHT0(Mem{Base: wp, Index: gs, Scale: 1, Disp: unit + disp})
}

// zeroed returns a new ZMM register set to zero.
func zeroed() reg.VecVirtual {
	z := ZMM()
	VXORPS(z, z, z) // a zeroing idiom avo knows (VPXORD is not one)
	return z
}

// ternImm is VPTERNLOGD's immediate for f of the destination a and the
// sources b (the register) and c (the memory or last operand).
func ternImm(f func(a, b, c bool) bool) uint8 {
	var imm uint8
	for i := 0; i < 8; i++ {
		if f(i&4 != 0, i&2 != 0, i&1 != 0) {
			imm |= 1 << i
		}
	}
	return imm
}

// k45VNNI generates q4k8Tile{nx}VNNI or q5k8Tile{nx}VNNI (five): the
// AVX2 tiles' sums (k8Tile45) on pairs of groups.
func k45VNNI(nx int, five bool) {
	name, typ, unit := fmt.Sprintf("q4k8Tile%dVNNI", nx), "Q4_K", q4k8Unit
	if five {
		name, typ, unit = fmt.Sprintf("q5k8Tile%dVNNI", nx), "Q5_K", q5k8Unit
	}
	cst := vnniConsts()
	mask0F, bit4 := cst.Offset(0), cst.Offset(4)
	// (a | (b & c)): a quant's fifth bit, moved to bit 4, ORed in.
	orBit := ternImm(func(a, b, c bool) bool { return a || b && c })
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight %s weight rows (%sk8 layout) times %d Q8_K activation rows.", name, typ, map[bool]string{false: "q4", true: "q5"}[five], nx)
	pairLoop(name, doc, nx, unit, func(wp, gs reg.Register, xr []reg.Register, acc []Mem) {
		sumi := make([]reg.VecVirtual, nx)
		for i := range sumi {
			sumi[i] = zeroed()
		}
		// Steps (of four weights a lane) between flushes of the int16
		// sums: 4 for Q4_K (16 weights of 15), 2 for Q5_K (8 of 31).
		flush := 4
		if five {
			flush = 2
		}
		for j := 0; j < 8; j++ {
			sc := pairBytesDW(wp, gs, q4k8Scales+8*j, false)
			var fifth reg.VecVirtual
			if five {
				fifth = pairLoad(wp, gs, q4k8Unit+32*j)
				if j%2 == 0 {
					pairPrefetch(wp, gs, unit, q4k8Unit+32*j)
				}
			}
			var sl, sh []reg.VecVirtual
			for v := 0; v < 4; v++ {
				if v%2 == 0 {
					pairPrefetch(wp, gs, unit, q4k8Quants+128*j+32*v)
					if j < 3 && v == 0 {
						pairPrefetch(wp, gs, unit, 64*j)
					}
				}
				q := pairLoad(wp, gs, q4k8Quants+128*j+32*v)
				lo, hi := ZMM(), ZMM()
				VPANDD_BCST(mask0F, q, lo)
				VPSRLW(U8(4), q, hi)
				VPANDD_BCST(mask0F, hi, hi)
				if five {
					for h, qv := range []reg.VecVirtual{lo, hi} {
						k := 2*v + h
						t := ZMM()
						switch {
						case k < 4:
							VPSLLW(U8(4-k), fifth, t)
						case k > 4:
							VPSRLW(U8(k-4), fifth, t)
						default:
							VMOVDQA64(fifth, t)
						}
						VPTERNLOGD_BCST(U8(orBit), bit4, t, qv)
					}
				}
				if v%flush == 0 {
					sl, sh = make([]reg.VecVirtual, nx), make([]reg.VecVirtual, nx)
					for i := 0; i < nx; i++ {
						sl[i], sh[i] = zeroed(), zeroed()
					}
				}
				for i := 0; i < nx; i++ {
					VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v}, lo, sl[i])
					VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4}, hi, sh[i])
				}
				if v%flush == flush-1 {
					for i := 0; i < nx; i++ {
						VPDPWSSD(sc, sl[i], sumi[i])
						VPDPWSSD(sc, sh[i], sumi[i])
					}
				}
			}
		}
		// The mins' term: the activation's sub-block sums (int32,
		// narrowed to int16) in pairs (bsum_2p, bsum_2p+1), kept on the
		// stack to be broadcast, VPDPWSSD by the rows' mins (m_2p,
		// m_2p+1).
		local := AllocLocal(16 * nx)
		for i := 0; i < nx; i++ {
			ps := YMM()
			VMOVDQU64(Mem{Base: xr[i], Disp: q8kSubSums}, ps)
			VPMOVDW(ps, local.Offset(16*i))
		}
		mi := make([]reg.VecVirtual, nx)
		for i := range mi {
			mi[i] = zeroed()
		}
		for p := 0; p < 4; p++ {
			m := pairBytesW(wp, gs, q4k8Mins+16*p, false)
			for i := 0; i < nx; i++ {
				VPDPWSSD_BCST(local.Offset(16*i+4*p), m, mi[i])
			}
		}
		dD := pairHalves(wp, gs, 0)
		dM := pairHalves(wp, gs, 16)
		for i := 0; i < nx; i++ {
			d, f, a := ZMM(), ZMM(), ZMM()
			VMOVUPS(acc[i], a)
			VMULPS_BCST(Mem{Base: xr[i]}, dD, d)
			VCVTDQ2PS(sumi[i], f)
			VFMADD231PS(f, d, a)
			VMULPS_BCST(Mem{Base: xr[i]}, dM, d)
			VCVTDQ2PS(mi[i], f)
			VFNMADD231PS(f, d, a)
			VMOVUPS(a, acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(unit), wp)
	})
}

// q408VNNI generates q408Tile{nx}VNNI: the AVX2 tile's sums (q408Tile)
// on pairs of groups. A block's 32 products add up in one int32 register,
// the offset's -8*bsum is one VPDPWSSD of the broadcast run sum by -8.
func q408VNNI(nx int) {
	name := fmt.Sprintf("q408Tile%dVNNI", nx)
	cst := vnniConsts()
	mask0F, minus8 := cst.Offset(0), cst.Offset(12)
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q4_0 weight rows (q408 layout) times %d Q8_K activation rows.", name, nx)
	pairLoop(name, doc, nx, q408Unit, func(wp, gs reg.Register, xr []reg.Register, acc []Mem) {
		m8 := ZMM()
		VPBROADCASTD(minus8, m8)
		fb := make([]reg.VecVirtual, nx)
		for j := 0; j < 8; j++ {
			s := make([]reg.VecVirtual, nx)
			for i := range s {
				s[i] = zeroed()
			}
			for v := 0; v < 4; v++ {
				if v%2 == 0 {
					pairPrefetch(wp, gs, q408Unit, q408Quants+128*j+32*v)
					if j < 2 && v == 0 {
						pairPrefetch(wp, gs, q408Unit, 64*j)
					}
				}
				q := pairLoad(wp, gs, q408Quants+128*j+32*v)
				lo, hi := ZMM(), ZMM()
				VPANDD_BCST(mask0F, q, lo)
				VPSRLW(U8(4), q, hi)
				VPANDD_BCST(mask0F, hi, hi)
				for i := 0; i < nx; i++ {
					VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v}, lo, s[i])
					VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4}, hi, s[i])
				}
			}
			d := pairHalves(wp, gs, 16*j)
			for i := 0; i < nx; i++ {
				VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSubSums + 4*j}, m8, s[i])
				VCVTDQ2PS(s[i], s[i])
				if j == 0 {
					fb[i] = ZMM()
					VMULPS(d, s[i], fb[i])
				} else {
					VFMADD231PS(d, s[i], fb[i])
				}
			}
		}
		for i := 0; i < nx; i++ {
			a := ZMM()
			VMOVUPS(acc[i], a)
			VFMADD231PS_BCST(Mem{Base: xr[i]}, fb[i], a)
			VMOVUPS(a, acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(q408Unit), wp)
	})
}

// q6k8VNNI generates q6k8Tile{nx}VNNI: the AVX2 tile's sums (q6k8Tile)
// on pairs of groups. A run's 16 products add up in one int32 register
// (at most 16*63*128), scaled by VPMULLD; the values' offset of 32 is
// added as VPDPWSSD of the broadcast run-sum pairs by -32 times the
// scale pairs (|32*128| fits in int16).
func q6k8VNNI(nx int) {
	name := fmt.Sprintf("q6k8Tile%dVNNI", nx)
	cst := vnniConsts()
	mask0F, mask30 := cst.Offset(0), cst.Offset(8)
	// (a & c) | b: the low four bits from a, the top two (b) ORed in.
	merge := ternImm(func(a, b, c bool) bool { return a && c || b })
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q6_K weight rows (q6k8 layout) times %d Q8_K activation rows.", name, nx)
	pairLoop(name, doc, nx, q6k8Unit, func(wp, gs reg.Register, xr []reg.Register, acc []Mem) {
		sumi := make([]reg.VecVirtual, nx)
		for i := range sumi {
			sumi[i] = zeroed()
		}
		var sp reg.VecVirtual
		for g := 0; g < 16; g++ {
			if g%2 == 0 {
				// The pair of runs' scales: dword l = (sc_g, sc_g+1) of row l.
				sp = pairBytesW(wp, gs, q6k8Scales+16*(g/2), true)
				neg := ZMM()
				VPSLLW(U8(5), sp, neg)
				z := zeroed()
				VPSUBW(neg, z, neg)
				for i := 0; i < nx; i++ {
					VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSums + 4*(g/2)}, neg, sumi[i])
				}
			}
			sc := ZMM()
			if g%2 == 0 {
				VPSLLD(U8(16), sp, sc)
				VPSRAD(U8(16), sc, sc)
			} else {
				VPSRAD(U8(16), sp, sc)
			}
			base := q6k8Quants + 96*g
			pairPrefetch(wp, gs, q6k8Unit, base)
			pairPrefetch(wp, gs, q6k8Unit, base+64)
			if g < 3 {
				pairPrefetch(wp, gs, q6k8Unit, 64*g)
			}
			h := pairLoad(wp, gs, base+64)
			s := make([]reg.VecVirtual, nx)
			for i := range s {
				s[i] = zeroed()
			}
			for half := 0; half < 2; half++ {
				a := pairLoad(wp, gs, base+32*half)
				for e := 0; e < 2; e++ {
					t := 2*half + e
					// The top two bits of group t of h, to bits 4-5.
					top := ZMM()
					switch t {
					case 0:
						VPSLLW(U8(4), h, top)
					case 1:
						VPSLLW(U8(2), h, top)
					case 2:
						VMOVDQA64(h, top)
					case 3:
						VPSRLW(U8(2), h, top)
					}
					VPANDD_BCST(mask30, top, top)
					q := ZMM()
					if e == 0 {
						VMOVDQA64(a, q)
					} else {
						VPSRLW(U8(4), a, q)
					}
					VPTERNLOGD_BCST(U8(merge), mask0F, top, q)
					for i := 0; i < nx; i++ {
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 16*g + 8*half + 4*e}, q, s[i])
					}
				}
			}
			for i := 0; i < nx; i++ {
				VPMULLD(sc, s[i], s[i])
				VPADDD(s[i], sumi[i], sumi[i])
			}
		}
		dD := pairHalves(wp, gs, 0)
		for i := 0; i < nx; i++ {
			d, f, a := ZMM(), ZMM(), ZMM()
			VMOVUPS(acc[i], a)
			VMULPS_BCST(Mem{Base: xr[i]}, dD, d)
			VCVTDQ2PS(sumi[i], f)
			VFMADD231PS(f, d, a)
			VMOVUPS(a, acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(q6k8Unit), wp)
	})
}

func genKVNNI() {
	for nx := 1; nx <= kvnniNXMax; nx++ {
		k45VNNI(nx, false)
	}
	for nx := 1; nx <= kvnniNXMax; nx++ {
		k45VNNI(nx, true)
	}
	for nx := 1; nx <= kvnniNXMax; nx++ {
		q6k8VNNI(nx)
	}
	for nx := 1; nx <= kvnniNXMax; nx++ {
		q408VNNI(nx)
	}
}
