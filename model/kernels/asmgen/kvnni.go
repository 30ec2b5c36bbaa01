package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The eight-row layouts on AVX-512 VNNI (q6k8 only: see genKVNNI): a tile
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
// kvnniNXMax is the most activation rows of a VNNI tile: eight rows keep
// two ZMM registers each (the block sum and a run's; the float results
// are on the stack). 16 rows take two tiles instead of three of six
// rows: the weights are unpacked once per tile.
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
	// The float sums live on the stack (a load and a store a super-block
	// each): the registers hold three integer sums for each of up to
	// eight activation rows.
	t := newPairTile(name, doc, NOSPLIT, nx)
	gs := Load(Param("nb"), GP64())
	IMUL3Q(U32(unit), gs, gs) // a group's bytes
	t.loop(func() {
		xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nx)
		nb := Load(Param("nb"), GP64())
		countLoop("blk", nb, func() { block(t.wp, gs, xr, t.acc) })
	}, func() {
		ADDQ(gs, t.wp) // past the second group
	})
}

// pairTile is a tile over pairs of groups of eight weight rows (the
// eight-row layouts' VNNI tiles, the 16-row layouts' full ones) as it is
// generated: func(w *byte, x *byte, ldx int, nb int, out *float32, ldo
// int, npairs int), the nx activation rows' float sums on the stack.
type pairTile struct {
	acc            []Mem        // the rows' float sums, 64 bytes each
	wp, outp, left reg.Register // the weights, the output, the pairs left
}

// newPairTile starts a pair tile's function (flags its TEXT flags): its
// sums' area and its pointers.
func newPairTile(name, doc string, flags attr.Attribute, nx int) *pairTile {
	TEXT(name, flags, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, npairs int)")
	Pragma("noescape")
	Doc(doc)
	accMem := AllocLocal(64 * nx)
	t := &pairTile{acc: make([]Mem, nx)}
	for i := range t.acc {
		t.acc[i] = accMem.Offset(64 * i)
	}
	t.wp = Load(Param("w"), GP64())
	t.outp = Load(Param("out"), GP64())
	t.left = Load(Param("npairs"), GP64())
	return t
}

// loop emits the tile's loop over the pairs: each pair's sums zeroed,
// body (the pair's blocks), the sums stored (sixteen floats for each
// activation row), then next (the weights' pointer to the next pair, or
// nil); then the function's end.
func (t *pairTile) loop(body, next func()) {
	Label("pair")
	TESTQ(t.left, t.left)
	JZ(LabelRef("done"))
	z := zeroed()
	for i := range t.acc {
		VMOVUPS(z, t.acc[i])
	}
	body()
	op := GP64()
	MOVQ(t.outp, op)
	ldo := loadStride("ldo", 2)
	for i := range t.acc {
		v := ZMM()
		VMOVUPS(t.acc[i], v)
		VMOVUPS(v, Mem{Base: op})
		if i+1 < len(t.acc) {
			ADDQ(ldo, op)
		}
	}
	ADDQ(U8(64), t.outp)
	if next != nil {
		next()
	}
	DECQ(t.left)
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

// genKVNNI generates the eight-row layouts' VNNI tiles: Q6_K's only,
// for the VNNI machines without GFNI (where Q6_K keeps the q6k8 layout;
// the other K types take the 16-row layouts wherever VNNI tiles run, so
// their eight-row VNNI tiles would never run).
func genKVNNI() {
	for nx := 1; nx <= kvnniNXMax; nx++ {
		q6k8VNNI(nx)
	}
}
