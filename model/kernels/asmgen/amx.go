package main

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The AMX tiles: on CPUs with AMX-INT8 (Sapphire Rapids and later) a
// TDPBSSD multiplies a 16x64 tile of int8 by a 64x16 one into a 16x16
// tile of int32 sums in one instruction, 16384 multiply-adds where a
// VPDPBUSD does 64. Go's assembler has no AMX mnemonics: the
// instructions are written as their bytes (amxOp), their memory operands
// always [R8 + R9*1], and the registers they read declared to avo, so its
// allocator keeps its own values out of R8 and R9 while they are live.
//
// The tile registers' shapes (one configuration for every AMX tile, set
// by LDTILECFG at a tile's start and released by TILERELEASE at its end,
// so no tile state outlives a call), every tile 16 rows of 64 bytes:
// tmm0 and tmm1 the int32 sums, tmm2 and tmm7 the activations (16 rows of
// 64 int8, one chunk each in turn), tmm3 and tmm4 the weights' two byte
// planes (16 weight rows of four bytes each, as VNNI lays out the
// right-hand matrix); tmm5 and tmm6 are not used.

// amxTiles is the number of tile registers the configuration shapes.
const amxTiles = 8

// amxConfig returns the 64-byte tile configuration (palette 1).
func amxConfig() Mem {
	return constTable("kamxcfg", func() []uint32 {
		var b [64]byte
		b[0] = 1 // palette
		for t := 0; t < amxTiles; t++ {
			b[16+2*t] = 64 // bytes a row
			b[48+t] = 16   // rows
		}
		w := make([]uint32, 16)
		for i := range w {
			w[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		}
		return w
	})
}

// amxOp emits one AMX instruction's bytes: a three-byte VEX prefix (map
// 0F38, W0, L0) with the prefix pp, the R8/R9 extension bits when the
// instruction addresses memory, vvvv, then opcode and modrm (and, for
// [R8 + R9*1], the SIB byte). reads are the registers it reads.
func amxOp(pp, vvvv, opcode, modrm byte, sib bool, reads ...reg.Register) {
	b1 := byte(0xE2) // R, X, B not extended; map 0F38
	if sib {
		b1 = 0x82 // X and B extended: index R9, base R8
	}
	bytes := []byte{0xC4, b1, (^vvvv&0xF)<<3 | pp, opcode, modrm}
	if sib {
		bytes = append(bytes, 0x08) // scale 1, index R9, base R8
	}
	var in []Op
	for _, r := range reads {
		in = append(in, r)
	}
	for _, b := range bytes {
		Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(b)}, Inputs: in})
	}
}

// The VEX pp field's prefixes.
const (
	ppNone = 0
	ppF3   = 2
	ppF2   = 3
)

// ldtilecfg loads the tile configuration at [R8].
func ldtilecfg() {
	LEAQ(amxConfig(), reg.R8)
	// C4 C2 78 49 00: mod 00, reg 0, rm R8 (B extended).
	Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(0xC4)}, Inputs: []Op{reg.R8}})
	for _, b := range []byte{0xC2, 0x78, 0x49, 0x00} {
		Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(b)}, Inputs: []Op{reg.R8}})
	}
}

// tilerelease returns the tiles to their initial state.
func tilerelease() { amxOp(ppNone, 0, 0x49, 0xC0, false) }

// tilezero zeroes tile t.
func tilezero(t byte) { amxOp(ppF2, 0, 0x49, 0xC0|t<<3, false) }

// tileloadd loads tile t from base, its rows stride bytes apart.
func tileloadd(t byte, base Mem, stride Op) {
	LEAQ(base, reg.R8)
	MOVQ(stride, reg.R9)
	amxOp(ppF2, 0, 0x4B, t<<3|4, true, reg.R8, reg.R9)
}

// tilestored stores tile t at base, its rows stride bytes apart.
func tilestored(t byte, base Mem, stride Op) {
	LEAQ(base, reg.R8)
	MOVQ(stride, reg.R9)
	amxOp(ppF3, 0, 0x4B, t<<3|4, true, reg.R8, reg.R9)
}

// tdpbssd adds to tile c the products of tile a's signed bytes by tile
// b's signed ones; tdpbsud, by b's unsigned ones.
func tdpbssd(c, a, b byte) { amxOp(ppF2, b, 0x5E, 0xC0|c<<3|a, false) }
func tdpbsud(c, a, b byte) { amxOp(ppF3, b, 0x5E, 0xC0|c<<3|a, false) }

// q6k16AMX generates q6k16Tile16AMX: q6k16Tile16GFNI's integer sums with
// the products done by AMX. A Q6_K weight is d*sc*(q-32) with sc an int8
// run scale and q a 6-bit value; per run the tile computes P = sc*(q-32)
// for sixteen rows in int16 (VPMADDUBSW of q's bytes by (sc, 0) and by
// (0, sc), less 32*sc), within ±4096, and splits it into its low byte
// (unsigned) and its high byte (signed), P = 256*hi + lo, two planes of
// the right-hand matrix. Four runs make one 64-deep product: tmm0 += the
// activations (tmm2) times lo (TDPBSUD), tmm1 += them times hi
// (TDPBSSD); a super-block's sum is tmm0 + 256*tmm1, exactly the VNNI
// tiles' int32 (|sum| < 2^27), and ends as theirs (fullFinish's order).
// The planes go through a 64-byte aligned buffer on the stack, two
// chunks of four runs in turn so that one is written while the other is
// read.
func q6k16AMX() {
	const nx = 16
	name := "q6k16Tile16AMX"
	TEXT(name, 0, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, npairs int)")
	Pragma("noescape")
	Doc(name + " computes npairs pairs of groups of eight Q6_K weight rows (q6k16 layout) times 16 Q8_K activation rows with AMX (the CPU's AMX-INT8, the tiles' state permitted by the OS).")
	// The area, 64-byte aligned: two chunks' planes (lo 1 KiB, hi 1 KiB
	// each), the sums' tiles (2 KiB), the float sums (1 KiB).
	const (
		planeLo = 0
		planeHi = 1024
		chunk   = 2048
		sums    = 2 * chunk // a super-block's sums: tmm0's, then tmm1's
		accOff  = sums + 2048
		area    = accOff + 64*nx
	)
	local := AllocLocal(area + 64)
	ap := GP64()
	LEAQ(local.Offset(63), ap)
	ANDQ(I32(-64), ap)
	at := func(disp int) Mem { return Mem{Base: ap, Disp: disp} }

	wp := Load(Param("w"), GP64())
	outp := Load(Param("out"), GP64())
	left := Load(Param("npairs"), GP64())
	ldtilecfg()

	low6 := constTable("klow6", func() []uint32 { return []uint32{0x3F3F3F3F} })
	or3 := ternImm(func(a, b, c bool) bool { return a || b || c })
	// VPSHUFB patterns of a run's (sc, 0, sc, 0) and (0, sc, 0, sc) per
	// row dword from the dword (sc_2p, sc_2p+1, 0, 0): run h of the pair.
	shuf := func(h int, odd bool) Mem {
		n := "kamxse"
		if odd {
			n = "kamxso"
		}
		n += string(rune('0' + h))
		return constTable(n, func() []uint32 {
			w := make([]uint32, 16)
			for i := range w {
				var b [4]byte
				for j := 0; j < 4; j++ {
					b[j] = 0x80 // zero
					if (j%2 == 1) == odd {
						b[j] = byte(4*(i%4) + h)
					}
				}
				w[i] = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
			}
			return w
		})
	}
	// VPERMI2B indices gathering the low (high) bytes of the words of the
	// even bytes' products (table 1) and the odd bytes' (table 2) back
	// into the weights' byte order.
	perm := func(high bool) Mem {
		n := "kamxlo"
		if high {
			n = "kamxhi"
		}
		return constTable(n, func() []uint32 {
			w := make([]uint32, 16)
			for i := range w {
				var b [4]byte
				for j := 0; j < 4; j++ {
					p := 4*i + j
					b[j] = byte(2 * (p / 2))
					if p%2 == 1 {
						b[j] += 64
					}
					if high {
						b[j]++
					}
				}
				w[i] = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
			}
			return w
		})
	}
	c32 := ZMM() // bytes (32, 0): VPMADDUBSW by (sc, 0) gives 32*sc
	VPBROADCASTD(constTable("kamxc32", func() []uint32 { return []uint32{0x00200020} }), c32)
	idxLo, idxHi := ZMM(), ZMM()
	VMOVDQU64(perm(false), idxLo)
	VMOVDQU64(perm(true), idxHi)

	Label("pair")
	TESTQ(left, left)
	JZ(LabelRef("done"))
	z := zeroed()
	for i := 0; i < nx; i++ {
		VMOVUPS(z, at(accOff+64*i))
	}
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	nb := Load(Param("nb"), GP64())
	// runs emits a super-block's sixteen runs, the unit's scales at sp
	// and its quants at qp: each run's planes stored, each fourth run's
	// chunk multiplied into tmm0 and tmm1.
	runs := func(sp, qp reg.Register) {
		var s16 reg.VecVirtual
		for g := 0; g < 16; g++ {
			if g%2 == 0 {
				s16 = ZMM()
				VPMOVZXWD(Mem{Base: sp, Disp: 32 * (g / 2)}, s16)
			}
			be, bo, o := ZMM(), ZMM(), ZMM()
			VPSHUFB(shuf(g%2, false), s16, be)
			VPSHUFB(shuf(g%2, true), s16, bo)
			VPMADDUBSW(be, c32, o)
			base := 192 * g
			var V, t [3]reg.VecVirtual
			for k := 0; k < 3; k++ {
				PREFETCHT0(Mem{Base: qp, Disp: q6k16Unit + base + 64*k})
			}
			for k := 0; k < 3; k++ {
				V[k] = ZMM()
				VMOVDQU64(Mem{Base: qp, Disp: base + 64*k}, V[k])
			}
			var v [4]reg.VecVirtual
			for k := 0; k < 3; k++ {
				v[k] = ZMM()
				VPANDD_BCST(low6, V[k], v[k])
			}
			for k := 0; k < 3; k++ {
				t[k] = ZMM()
				VGF2P8AFFINEQB_BCST(U8(0), gfTop2().Offset(8*k), V[k], t[k])
			}
			VPTERNLOGD(U8(or3), t[2], t[1], t[0])
			v[3] = t[0]
			c, kk := g/4, 4*(g%4)
			for k := 0; k < 4; k++ {
				pa, pb := ZMM(), ZMM()
				VPMADDUBSW(be, v[k], pa)
				VPMADDUBSW(bo, v[k], pb)
				VPSUBW(o, pa, pa)
				VPSUBW(o, pb, pb)
				lo := ZMM()
				VMOVDQA64(idxLo, lo)
				VPERMI2B(pb, pa, lo)
				VPERMT2B(pb, idxHi, pa) // pa's last use: it takes the high bytes
				VMOVDQA64(lo, at((c%2)*chunk+planeLo+64*(kk+k)))
				VMOVDQA64(pa, at((c%2)*chunk+planeHi+64*(kk+k)))
			}
			if g%4 == 3 {
				a := byte(2) // the activations' tile: tmm2, tmm7 in turn
				if c%2 == 1 {
					a = 7
				}
				tileloadd(a, Mem{Base: xp, Disp: q8kQuants + 64*c}, ldx)
				tileloadd(3, at((c%2)*chunk+planeLo), U32(64))
				tileloadd(4, at((c%2)*chunk+planeHi), U32(64))
				tdpbsud(0, a, 3)
				tdpbssd(1, a, 4)
			}
		}
	}
	// block computes the super-block at wp: its sums stored at sums.
	block := func(sums Mem) {
		tilezero(0)
		tilezero(1)
		for l := 0; l < 5; l++ {
			PREFETCHT0(Mem{Base: wp, Disp: q6k16Unit + 64*l})
		}
		sp, qp := GP64(), GP64()
		LEAQ(Mem{Base: wp, Disp: q6k16Scales}, sp)
		LEAQ(Mem{Base: wp, Disp: q6k16Quants}, qp)
		runs(sp, qp)
		tilestored(0, sums, U32(64))
		tilestored(1, sums.Offset(1024), U32(64))
	}
	// finish adds in the super-block before the one at wp (its unit and
	// activations a block back), its sums at sums: acc += d*x.d*sum, in
	// fullFinish's order.
	finish := func(sums Mem) {
		dD := ZMM()
		VCVTPH2PS(Mem{Base: wp, Disp: -q6k16Unit}, dD)
		xr := GP64()
		MOVQ(xp, xr)
		for i := 0; i < nx; i++ {
			s, d, f, a := ZMM(), ZMM(), ZMM(), ZMM()
			VPSLLD(U8(8), sums.Offset(1024+64*i), s)
			VPADDD(sums.Offset(64*i), s, s)
			VMULPS_BCST(Mem{Base: xr, Disp: -q8kBlock}, dD, d)
			VCVTDQ2PS(s, f)
			VMOVUPS(at(accOff+64*i), a)
			VFMADD231PS(f, d, a)
			VMOVUPS(a, at(accOff+64*i))
			if i+1 < nx {
				ADDQ(ldx, xr)
			}
		}
	}
	// Each super-block's sums are read back as soon as they are stored
	// (finishing them after the next super-block's products instead was
	// slower).
	countLoop("amxblk", nb, func() {
		block(at(sums))
		ADDQ(U32(q8kBlock), xp)
		ADDQ(U32(q6k16Unit), wp)
		finish(at(sums))
	})
	op := GP64()
	MOVQ(outp, op)
	ldo := loadStride("ldo", 2)
	for i := 0; i < nx; i++ {
		v := ZMM()
		VMOVUPS(at(accOff+64*i), v)
		VMOVUPS(v, Mem{Base: op})
		if i+1 < nx {
			ADDQ(ldo, op)
		}
	}
	ADDQ(U8(64), outp)
	DECQ(left)
	JMP(LabelRef("pair"))
	Label("done")
	tilerelease()
	VZEROUPPER()
	RET()
}
