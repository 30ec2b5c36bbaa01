package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Q4_K super-block (144 bytes): float16 d, float16 dmin, 12 bytes of
// packed 6-bit scales and mins, 128 bytes of nibbles. Q8_K activation
// block (324 bytes, the kernels package's layout): float32 d, 256 int8
// quants, 16 int16 sums of runs of 16, 8 int32 sums of runs of 32. See
// q4k.go in the kernels package.
const (
	q4kBlock   = 144
	q8kBlock   = 580
	q8kQuants  = 4
	q8kSums    = 260
	q8kSubSums = 292 // 8 int32: the sums of the quants' runs of 32
	q8kNeg8    = 324 // 8 int32: -8 times the runs of 32's sums
	q8kSub16   = 356 // 8 int16: the runs of 32's sums
	q8kSub16x8 = 372 // 8 int16: 8 times the runs of 32's sums
	q8kNeg32   = 388 // 32 int32: -32 times the runs of 8's sums
	q8kNeg16   = 516 // 16 int32: -16 times the runs of 16's sums
	q4kNXMax   = 4   // activation rows per tile
)

// constTables holds the read-only tables constTable has emitted.
var constTables = map[string]Mem{}

// constTable returns the read-only table name, emitting it with the
// 32-bit words that words returns the first time it is asked for.
func constTable(name string, words func() []uint32) Mem {
	if m, ok := constTables[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	for i, w := range words() {
		DATA(4*i, U32(w))
	}
	constTables[name] = m
	return m
}

// splat is n copies of w.
func splat(w uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = w
	}
	return out
}

// q4kConstTable: 32 bytes of 0x0F, then 8 VPSHUFB controls of 32 bytes
// that broadcast int16 word j of each 128-bit lane.
func q4kConstTable() Mem {
	return constTable("q4kconsts", func() []uint32 {
		t := splat(0x0F0F0F0F, 8)
		for j := 0; j < 8; j++ {
			w := uint32(2*j) | uint32(2*j+1)<<8
			t = append(t, splat(w|w<<16, 8)...)
		}
		return t
	})
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

// Q4_K in groups of eight rows (the kernels package's q4k8 layout, see
// q4k.go there): per group and super-block a unit of q4k8Unit bytes, the
// eight rows' float16 d, their float16 dmin, the sub-blocks' scales a
// byte a row (sub-block j at 32+8j), the mins paired by sub-block (pair p
// at 96+16p, row r's two at 2r), then the nibbles: for sub-block j and
// quarter v, 32 bytes at 160+128j+32v whose bytes 4r..4r+3 hold weights
// 8v..8v+3 of row r in their low nibbles and 8v+4..8v+7 in their high.
const (
	q4k8Unit   = 1184
	q4k8Scales = 32
	q4k8Mins   = 96
	q4k8Quants = 160
	q5k8Unit   = q4k8Unit + 256
)

// q4k8TileAVX2 generates q4k8Tile{nx}AVX2(w *byte, x *byte, ldx int, nb
// int, out *float32, ldo int, ngroups int): for each of ngroups groups of
// eight Q4_K weight rows in the q4k8 layout (nb super-blocks each), their
// dot products with nx Q8_K activation rows, out[j*ldo+r] for activation
// row j and the group's row r (eight floats a group and row j).
//
// A vector's lane r is weight row r: four activation quants broadcast to
// every lane meet four weights of each of the eight rows in one
// VPMADDUBSW, whose int16 pairs add up over a sub-block's eight steps
// without overflow (8 * 2*15*127 < 2^15); then one VPMADDWD by the
// rows' scales per sub-block, not per 32 weights and row as in
// q4kTile. No lane sums at the end: the eight rows' results are the
// eight lanes.
//
// The next unit is prefetched as this one is read (a line every 64
// bytes): a Llama-3.2-1B-shape Q4_K_M decode step took 19% less time
// with it (median of 8 interleaved rounds; two and four units ahead
// gained less).
func q4k8TileAVX2(nx int) { k8Tile45(nx, false) }

// q5k8TileAVX2 generates q5k8Tile{nx}AVX2, q4k8Tile for Q5_K in the q5k8
// layout: q4k8's unit, then per sub-block j 32 bytes of fifth bits at
// q4k8Unit+32j (bits 2v and 2v+1 of byte 4r+i: those of row r's weights
// 8v+i and 8v+4+i), each ORed into its nibble as 16 before the multiply.
// Values reach 31, so the int16 pairs add up over four steps, not eight
// (4 * 2*31*127 < 2^15): two VPMADDWD by the scales per sub-block.
func q5k8TileAVX2(nx int) { k8Tile45(nx, true) }

// q5k8BitTable: 32 bytes of 1<<k for k = 0..7.
func q5k8BitTable() Mem {
	return constTable("q5k8bits", func() []uint32 {
		var t []uint32
		for k := 0; k < 8; k++ {
			b := uint32(1) << k
			t = append(t, splat(b|b<<8|b<<16|b<<24, 8)...)
		}
		return t
	})
}

func k8Tile45(nx int, five bool) {
	name, typ, unit := fmt.Sprintf("q4k8Tile%dAVX2", nx), "Q4_K", q4k8Unit
	var bits Mem
	if five {
		name, typ, unit = fmt.Sprintf("q5k8Tile%dAVX2", nx), "Q5_K", q5k8Unit
		bits = q5k8BitTable()
	}
	const pf = 1
	cst := q4kConstTable()
	k8Tile(name, fmt.Sprintf("%s computes ngroups groups of eight %s weight rows (%s layout) times %d Q8_K activation rows.", name, typ, strings.ToLower(typ[:2])+"k8", nx), nx, func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual) {
		sumi := make([]reg.VecVirtual, nx)
		for j := 0; j < 8; j++ {
			s16 := make([]reg.VecVirtual, nx)
			for v := 0; v < 4; v++ {
				if v%2 == 0 {
					PREFETCHT0(Mem{Base: wp, Disp: pf*unit + q4k8Quants + 128*j + 32*v})
					if j < 3 && v == 0 {
						PREFETCHT0(Mem{Base: wp, Disp: pf*unit + 64*j})
					}
					if five && v == 0 && j%2 == 0 {
						PREFETCHT0(Mem{Base: wp, Disp: pf*unit + q4k8Unit + 32*j})
					}
				}
				lo, hi := YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: q4k8Quants + 128*j + 32*v}, hi)
				VPAND(cst, hi, lo)
				VPSRLW(U8(4), hi, hi)
				VPAND(cst, hi, hi)
				if five {
					// Fifth bits 2v (lo) and 2v+1 (hi), moved to bit 4.
					for h, q := range []reg.VecVirtual{lo, hi} {
						k := 2*v + h
						t := YMM()
						VMOVDQU(Mem{Base: wp, Disp: q4k8Unit + 32*j}, t)
						VPAND(bits.Offset(32*k), t, t)
						switch {
						case k < 4:
							VPSLLW(U8(4-k), t, t)
						case k > 4:
							VPSRLW(U8(k-4), t, t)
						}
						VPOR(t, q, q)
					}
				}
				for h, q := range []reg.VecVirtual{lo, hi} {
					for i := 0; i < nx; i++ {
						t := YMM()
						VPBROADCASTD(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4*h}, t)
						VPMADDUBSW(t, q, t)
						if (v == 0 || five && v == 2) && h == 0 {
							s16[i] = t
						} else {
							VPADDW(t, s16[i], s16[i])
						}
					}
				}
				if v == 3 || five && v == 1 {
					// The rows' scales as int16 pairs (sc, sc), one pair a
					// lane, times the sums so far.
					sc, t := YMM(), YMM()
					VPMOVZXBD(Mem{Base: wp, Disp: q4k8Scales + 8*j}, sc)
					VPSLLD(U8(16), sc, t)
					VPOR(t, sc, sc)
					for i := 0; i < nx; i++ {
						if j == 0 && v == 1 || j == 0 && !five {
							sumi[i] = YMM()
							VPMADDWD(sc, s16[i], sumi[i])
						} else {
							VPMADDWD(sc, s16[i], s16[i])
							VPADDD(s16[i], sumi[i], sumi[i])
						}
					}
				}
			}
		}
		for i := 0; i < nx; i++ {
			// The mins' term: the activation's sub-block sums in pairs
			// (bsum_2p, bsum_2p+1) broadcast, VPMADDWD by the rows' mins.
			ps := XMM()
			VMOVDQU(Mem{Base: xr[i], Disp: q8kSums}, ps)
			VPHADDW(Mem{Base: xr[i], Disp: q8kSums + 16}, ps, ps)
			bs := YMM()
			VINSERTI128(U8(1), ps, ps.AsY(), bs)
			var mi reg.VecVirtual
			for p := 0; p < 4; p++ {
				b, m := YMM(), YMM()
				VPSHUFD(U8(0x55*p), bs, b)
				VPMOVZXBW(Mem{Base: wp, Disp: q4k8Mins + 16*p}, m)
				VPMADDWD(b, m, m)
				if p == 0 {
					mi = m
				} else {
					VPADDD(m, mi, mi)
				}
			}
			dy, d, f := YMM(), YMM(), YMM()
			VBROADCASTSS(Mem{Base: xr[i]}, dy)
			VCVTPH2PS(Mem{Base: wp}, d)
			VMULPS(dy, d, d)
			VCVTDQ2PS(sumi[i], f)
			VFMADD231PS(f, d, acc[i])
			VCVTPH2PS(Mem{Base: wp, Disp: 16}, d)
			VMULPS(dy, d, d)
			VCVTDQ2PS(mi, f)
			VFNMADD231PS(f, d, acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(unit), wp)
	})
}

// Q6_K in groups of eight rows (the kernels package's q6k8 layout, see
// q6k.go there): per group and super-block a unit of q6k8Unit bytes, the
// eight rows' float16 d, the int8 scales by pairs of runs (pair p at
// 16+16p: row r's two at 2r), then per run g of 16 weights 96 bytes at
// 144+96g: A and B (bytes 4r..4r+3: the low four bits of row r's weights
// 4t+i, t = 0 and 1 in A's low and high nibbles, 2 and 3 in B's) and H
// (bits 2t, 2t+1 of byte 4r+i: the top two bits of weight 4t+i).
const (
	q6k8Unit   = 1680
	q6k8Scales = 16
	q6k8Quants = 144
)

// q6k8DupTable: two VPSHUFB controls that copy word 0 (then word 1) of
// each dword over both its words.
func q6k8DupTable() Mem {
	return constTable("q6k8dup", func() []uint32 {
		var t []uint32
		for e := 0; e < 2; e++ {
			for k := 0; k < 8; k++ {
				b := uint32(4*(k%4) + 2*e)
				w := b | (b+1)<<8
				t = append(t, w|w<<16)
			}
		}
		return t
	})
}

// q6k8TileAVX2 generates q6k8Tile{nx}AVX2, q4k8Tile's counterpart for
// Q6_K in the q6k8 layout: per run of 16 the values of eight rows put
// together from A or B and H, VPMADDUBSW (values 0..63) against four
// quants broadcast, two such int16 results added (2 * 2*63*127 < 2^15),
// VPMADDWD by the rows' scales; the values' offset of 32 taken off once
// per block as 32 * Σ_g sc_g * bsum_g (VPMADDWD of the scale pairs by
// the broadcast pairs of run sums).
//
// The next unit is prefetched as in q4k8Tile.
func q6k8TileAVX2(nx int) {
	name := fmt.Sprintf("q6k8Tile%dAVX2", nx)
	const pf = 1
	cst := q6kConstTable()
	dup := q6k8DupTable()
	// topBits puts the top two bits of group t (from h) in bits 4-5.
	topBits := func(h reg.VecVirtual, t int) reg.VecVirtual {
		d := YMM()
		switch t {
		case 0:
			VPSLLW(U8(4), h, d)
			VPAND(cst.Offset(96), d, d)
		case 1:
			VPSLLW(U8(2), h, d)
			VPAND(cst.Offset(96), d, d)
		case 2:
			VPAND(cst.Offset(96), h, d)
		case 3:
			VPSRLW(U8(2), h, d)
			VPAND(cst.Offset(96), d, d)
		}
		return d
	}
	k8Tile(name, fmt.Sprintf("%s computes ngroups groups of eight Q6_K weight rows (q6k8 layout) times %d Q8_K activation rows.", name, nx), nx, func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual) {
		sumi := make([]reg.VecVirtual, nx)
		for g := 0; g < 16; g++ {
			sc := YMM()
			VPMOVSXBW(Mem{Base: wp, Disp: q6k8Scales + 16*(g/2)}, sc)
			VPSHUFB(dup.Offset(32*(g%2)), sc, sc)
			base := q6k8Quants + 96*g
			{
				// 26.25 lines a unit: the quants' 96 bytes a run in two
				// lines, the header's 144 in three more.
				PREFETCHT0(Mem{Base: wp, Disp: pf*q6k8Unit + base})
				PREFETCHT0(Mem{Base: wp, Disp: pf*q6k8Unit + base + 64})
				if g < 3 {
					PREFETCHT0(Mem{Base: wp, Disp: pf*q6k8Unit + 64*g})
				}
			}
			h := YMM()
			VMOVDQU(Mem{Base: wp, Disp: base + 64}, h)
			for half := 0; half < 2; half++ {
				a := YMM()
				VMOVDQU(Mem{Base: wp, Disp: base + 32*half}, a)
				q0, q1 := YMM(), YMM()
				VPAND(cst, a, q0)
				VPOR(topBits(h, 2*half), q0, q0)
				VPSRLW(U8(4), a, q1)
				VPAND(cst, q1, q1)
				VPOR(topBits(h, 2*half+1), q1, q1)
				for i := 0; i < nx; i++ {
					x0, x1 := YMM(), YMM()
					VPBROADCASTD(Mem{Base: xr[i], Disp: q8kQuants + 16*g + 8*half}, x0)
					VPMADDUBSW(x0, q0, x0)
					VPBROADCASTD(Mem{Base: xr[i], Disp: q8kQuants + 16*g + 8*half + 4}, x1)
					VPMADDUBSW(x1, q1, x1)
					VPADDW(x1, x0, x0)
					VPMADDWD(sc, x0, x0)
					if g == 0 && half == 0 {
						sumi[i] = x0
					} else {
						VPADDD(x0, sumi[i], sumi[i])
					}
				}
			}
		}
		for i := 0; i < nx; i++ {
			var off reg.VecVirtual
			for p := 0; p < 8; p++ {
				sp, b := YMM(), YMM()
				VPMOVSXBW(Mem{Base: wp, Disp: q6k8Scales + 16*p}, sp)
				VPBROADCASTD(Mem{Base: xr[i], Disp: q8kSums + 4*p}, b)
				VPMADDWD(b, sp, sp)
				if p == 0 {
					off = sp
				} else {
					VPADDD(sp, off, off)
				}
			}
			VPSLLD(U8(5), off, off)
			VPSUBD(off, sumi[i], sumi[i])
			dy, d, f := YMM(), YMM(), YMM()
			VBROADCASTSS(Mem{Base: xr[i]}, dy)
			VCVTPH2PS(Mem{Base: wp}, d)
			VMULPS(dy, d, d)
			VCVTDQ2PS(sumi[i], f)
			VFMADD231PS(f, d, acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(q6k8Unit), wp)
	})
}

// Q4_0 in groups of eight rows (the kernels package's q408 layout, see
// q40.go there): per group and run of 256 columns (eight Q4_0 blocks) a
// unit of q408Unit bytes, the eight blocks' float16 d for the eight rows
// (block j at 16j, row r at 2r), then the nibbles as q4k8 lays them out
// (block j, quarter v at 128+128j+32v).
const (
	q408Unit   = 1152
	q408Quants = 128
)

// q408TileAVX2 generates q408Tile{nx}AVX2, q4k8Tile's counterpart for
// Q4_0 weights against Q8_K activations: per block of 32 the int16 pairs
// over eight steps as in q4k8Tile, VPMADDWD by ones into int32, the
// weights' offset of 8 taken off as 8 times the activation run's sum
// (Q8_K's sums of 32), then to float times the eight rows' block scales;
// the activation block's scale once per 256 columns.
func q408TileAVX2(nx int) {
	name := fmt.Sprintf("q408Tile%dAVX2", nx)
	const pf = 1
	cst := q4kConstTable()
	ones := q408OnesTable()
	k8Tile(name, fmt.Sprintf("%s computes ngroups groups of eight Q4_0 weight rows (q408 layout) times %d Q8_K activation rows.", name, nx), nx, func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual) {
		fb := make([]reg.VecVirtual, nx) // this unit's sums, float
		for j := 0; j < 8; j++ {
			s16 := make([]reg.VecVirtual, nx)
			for v := 0; v < 4; v++ {
				if v%2 == 0 {
					PREFETCHT0(Mem{Base: wp, Disp: pf*q408Unit + q408Quants + 128*j + 32*v})
					if j < 2 && v == 0 {
						PREFETCHT0(Mem{Base: wp, Disp: pf*q408Unit + 64*j})
					}
				}
				lo, hi := YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: q408Quants + 128*j + 32*v}, hi)
				VPAND(cst, hi, lo)
				VPSRLW(U8(4), hi, hi)
				VPAND(cst, hi, hi)
				for h, q := range []reg.VecVirtual{lo, hi} {
					for i := 0; i < nx; i++ {
						t := YMM()
						VPBROADCASTD(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4*h}, t)
						VPMADDUBSW(t, q, t)
						if v == 0 && h == 0 {
							s16[i] = t
						} else {
							VPADDW(t, s16[i], s16[i])
						}
					}
				}
			}
			for i := 0; i < nx; i++ {
				// Σ q*y - 8 Σ y, to float, times the rows' scales.
				VPMADDWD(ones, s16[i], s16[i])
				t := YMM()
				VPBROADCASTD(Mem{Base: xr[i], Disp: q8kSubSums + 4*j}, t)
				VPSLLD(U8(3), t, t)
				VPSUBD(t, s16[i], s16[i])
				VCVTDQ2PS(s16[i], s16[i])
				d := YMM()
				VCVTPH2PS(Mem{Base: wp, Disp: 16 * j}, d)
				if j == 0 {
					fb[i] = YMM()
					VMULPS(d, s16[i], fb[i])
				} else {
					VFMADD231PS(d, s16[i], fb[i])
				}
			}
		}
		for i := 0; i < nx; i++ {
			dy := YMM()
			VBROADCASTSS(Mem{Base: xr[i]}, dy)
			VFMADD231PS(dy, fb[i], acc[i])
			ADDQ(U32(q8kBlock), xr[i])
		}
		ADDQ(U32(q408Unit), wp)
	})
}

// q408OnesTable: 16 int16 ones.
func q408OnesTable() Mem {
	return constTable("q408ones", func() []uint32 { return splat(0x00010001, 8) })
}

// k8Tile generates a tile function for an eight-row layout: for each of
// ngroups groups, nb blocks of block (which advances wp past a unit and
// the activation pointers xr past a Q8_K block, adding into the nx sums
// acc, lane r for the group's row r), then the sums stored, eight floats
// for each activation row.
func k8Tile(name, doc string, nx int, block func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual)) {
	tileLoop(name, doc, "ngroups", nx, 32, block, func(acc reg.VecVirtual, dst Mem) { VMOVUPS(acc, dst) })
}

// kTile generates a K-quant tile function: for each of nrows weight rows,
// nb blocks of block (which advances wp and the activation pointers xr
// past one super-block, adding into the nx sums acc), then the sums'
// lanes added up into out.
func kTile(name, typ string, nx int, block func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual)) {
	doc := fmt.Sprintf("%s computes nrows %s weight rows times %d Q8_K activation rows.", name, typ, nx)
	tileLoop(name, doc, "nrows", nx, 4, block, func(acc reg.VecVirtual, dst Mem) { VMOVSS(hsum(isaAVX2, acc), dst) })
}

// tileLoop emits the loops of kTile and k8Tile: per unit of weights
// (counted by the parameter count: a row, or a group of eight), nx sums
// zeroed, nb blocks of block, each sum stored by store at out (activation
// rows ldo floats apart), out then advanced by step bytes.
func tileLoop(name, doc, count string, nx int, step uint8, block func(wp reg.Register, xr []reg.Register, acc []reg.VecVirtual), store func(acc reg.VecVirtual, dst Mem)) {
	TEXT(name, NOSPLIT, fmt.Sprintf("func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, %s int)", count))
	Pragma("noescape")
	Doc(doc)
	wp := Load(Param("w"), GP64()) // the weights, unit after unit
	outp := Load(Param("out"), GP64())
	left := Load(Param(count), GP64())

	Label("unit")
	TESTQ(left, left)
	JZ(LabelRef("done"))
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nx)
	acc := make([]reg.VecVirtual, nx)
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	nb := Load(Param("nb"), GP64())
	countLoop("blk", nb, func() { block(wp, xr, acc) })
	op := GP64()
	MOVQ(outp, op)
	ldo := loadStride("ldo", 2)
	for i := 0; i < nx; i++ {
		store(acc[i], Mem{Base: op})
		if i+1 < nx {
			ADDQ(ldo, op)
		}
	}
	ADDQ(U8(step), outp)
	DECQ(left)
	JMP(LabelRef("unit"))
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
	for nx := 1; nx <= q4kNXMax; nx++ {
		q4k8TileAVX2(nx)
	}
	for nx := 1; nx <= q4kNXMax; nx++ {
		q6k8TileAVX2(nx)
	}
	for nx := 1; nx <= q4kNXMax; nx++ {
		q5k8TileAVX2(nx)
	}
	for nx := 1; nx <= q4kNXMax; nx++ {
		q408TileAVX2(nx)
	}
	genKVNNI()
	genK16()
}

// Q6_K super-block (210 bytes): 128 bytes of low nibbles (ql), 64 of high
// bit pairs (qh), 16 int8 scales, float16 d. Weight e = 128h + 32k + l
// (h < 2, k < 4, l < 32) is d * sc[e/16] * (q - 32), q's low four bits
// from ql[64h + 32(k&1) + l] (the high nibble for k >= 2) and its top two
// from qh[32h + l] bits 2k, 2k+1.
const q6kBlock = 210

// q6kConstTable: 32 bytes each of 0x0F, 0x03, 0x0C, 0x30, then the
// VPSHUFB control that fills the low lane with word 0 and the high lane
// with word 1.
func q6kConstTable() Mem {
	return constTable("q6kconsts", func() []uint32 {
		var t []uint32
		for _, b := range []uint32{0x0F0F0F0F, 0x03030303, 0x0C0C0C0C, 0x30303030} {
			t = append(t, splat(b, 8)...)
		}
		t = append(t, splat(0x01000100, 4)...)
		return append(t, splat(0x03020302, 4)...)
	})
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
