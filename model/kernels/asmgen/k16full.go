package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The 16-row layouts' full tiles: for a 16-branch step's 16 activation
// rows (and 32 or 48 rows, two or three such tiles) each type's tile is
// also generated fully unrolled (q4k16Tile16GFNI and the like: the
// super-block's steps and rows written out, the integer sums in
// registers), as the tiles of every row count were before they took the
// count (k16.go).
// At 16 rows a full tile takes 0.90-0.95 times the looped tile's CPU
// time where the weights are in the caches (the loops' counters, the
// sums' loads and stores): worth the 60-95 KB of assembly each takes,
// 525 KB for the seven (the tiles without GFNI too: they gain as much).
//
// A full tile takes its rows in two passes (phases) over a super-block,
// eight rows each (two or three ZMM registers of sums a row), the first
// keeping the unpacked weight vectors in a 4 KiB buffer on the stack
// that the second reads back (the unpacking is paid once for all the
// rows).

// k16Full is the row count of the full tiles.
const k16Full = 16

// wsrc gives a full tile's body weight vector k of a super-block:
// computed by make (the first phase, which also stores it in the
// buffer), or read back from the buffer (the second).
type wsrc func(k int, make func() reg.VecVirtual) reg.VecVirtual

// k16FullName returns a full tile's name and doc.
func k16FullName(prefix, typ string, gf bool) (name, doc string) {
	suffix := "VNNI"
	if gf {
		suffix = "GFNI"
	}
	name = fmt.Sprintf("%s16Tile%d%s", prefix, k16Full, suffix)
	doc = fmt.Sprintf("%s computes npairs pairs of groups of eight %s weight rows (%s16 layout) times %d Q8_K activation rows.", name, typ, prefix, k16Full)
	return name, doc
}

// k16FullLoop emits a full tile for a 16-row layout of unit bytes a pair
// of groups and super-block: func(w *byte, x *byte, ldx int, nb int, out
// *float32, ldo int, npairs int), for each of npairs pairs, for each of
// nb blocks, block on the activation rows (xr) of each phase, adding into
// their float sums acc (lane l for the pair's row l), with w the weight
// vectors' source; then the sums stored, sixteen floats for each
// activation row.
func k16FullLoop(name, doc string, unit int, block func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc)) {
	const nx = k16Full
	phases := []int{(nx + 1) / 2, nx / 2}
	// The buffer is too large for a NOSPLIT frame.
	t := newPairTile(name, doc, 0, nx)
	buf := AllocLocal(64 * 64)
	t.loop(func() {
		ldx := loadStride("ldx", 0)
		xr := rowPtrs(Load(Param("x"), GP64()), ldx, phases[0])
		skip := GP64() // the second phase's rows: phases[0] rows on
		IMUL3Q(U8(phases[0]), ldx, skip)
		nb := Load(Param("nb"), GP64())
		countLoop("blk", nb, func() {
			block(t.wp, xr, t.acc[:phases[0]], func(k int, make func() reg.VecVirtual) reg.VecVirtual {
				v := make()
				VMOVDQU64(v, buf.Offset(64*k))
				return v
			})
			for _, p := range xr[:phases[1]] {
				ADDQ(skip, p)
			}
			block(t.wp, xr[:phases[1]], t.acc[phases[0]:], func(k int, make func() reg.VecVirtual) reg.VecVirtual {
				v := ZMM()
				VMOVDQU64(buf.Offset(64*k), v)
				return v
			})
			for _, p := range xr[:phases[1]] {
				SUBQ(skip, p)
			}
			for _, p := range xr {
				ADDQ(U32(q8kBlock), p)
			}
			ADDQ(U32(unit), t.wp)
		})
	}, nil)
}

// genK16Full generates the full tiles: GFNI's (Q4_K, Q6_K, Q4_0, Q5_K),
// and with vnni also Q4_K's, Q4_0's and Q5_K's without GFNI.
func genK16Full(vnni bool) {
	gfs := []bool{true}
	if vnni {
		gfs = []bool{false, true}
	}
	for _, gf := range gfs {
		q4k16Full(gf)
	}
	q6k16Full()
	for _, gf := range gfs {
		q4016Full(gf)
	}
	for _, gf := range gfs {
		q5k16Full(gf)
	}
}

// fullNibbles returns the weight vectors of quarter v of sub-block j of
// a 4-bit 16-row layout's super-block (q4k16, q4016: quants the offset of
// the quants, unit the unit's bytes), its low nibbles and its high ones,
// from w (the first phase loads the 64 bytes, prefetching the same bytes
// of the next unit, and the next unit's line j, for j < lines, with
// quarter 0).
func fullNibbles(wp reg.Register, w wsrc, unit, quants, lines, j, v int, gf bool) (lo, hi reg.VecVirtual) {
	off := quants + 256*j + 64*v
	var q reg.VecVirtual
	load := func() reg.VecVirtual {
		if q == nil {
			PREFETCHT0(Mem{Base: wp, Disp: unit + off})
			if j < lines && v == 0 {
				PREFETCHT0(Mem{Base: wp, Disp: unit + 64*j})
			}
			q = ZMM()
			VMOVDQU64(Mem{Base: wp, Disp: off}, q)
		}
		return q
	}
	lo = w(2*(4*j+v), func() reg.VecVirtual {
		lo := ZMM()
		VPANDD_BCST(vnniConsts().Offset(0), load(), lo)
		return lo
	})
	hi = w(2*(4*j+v)+1, func() reg.VecVirtual { return highNibbles(load(), gf) })
	return lo, hi
}

// fullNibbleSums emits the products of two sub-blocks' (h = 0, 1: j =
// 2jp+h) nibbles with the activation rows xr, each row's sums started
// from -8 times its activations' sums, a quarter at a time.
func fullNibbleSums(wp reg.Register, xr []reg.Register, w wsrc, unit, quants, lines, jp int, gf bool) (s [2][]reg.VecVirtual) {
	for h := range s {
		s[h] = make([]reg.VecVirtual, len(xr))
	}
	for v := 0; v < 4; v++ {
		for h := 0; h < 2; h++ {
			j := 2*jp + h
			lo, hi := fullNibbles(wp, w, unit, quants, lines, j, v, gf)
			for i, x := range xr {
				if v == 0 {
					s[h][i] = ZMM()
					VPBROADCASTD(Mem{Base: x, Disp: q8kNeg8 + 4*j}, s[h][i])
				}
				VPDPBUSD_BCST(Mem{Base: x, Disp: q8kQuants + 32*j + 8*v}, lo, s[h][i])
				VPDPBUSD_BCST(Mem{Base: x, Disp: q8kQuants + 32*j + 8*v + 4}, hi, s[h][i])
			}
		}
	}
	return s
}

// fullScaledSums returns a q4k16 or q5k16 full tile's integer sums, a
// register a row of xr, started at Σ_p the scale pairs p (shifted left by
// shift) times the activations' int16 pairs at disp; and the scale pairs.
func fullScaledSums(wp reg.Register, xr []reg.Register, disp int, shift uint64) (sumi, sp []reg.VecVirtual) {
	sumi, sp = make([]reg.VecVirtual, len(xr)), make([]reg.VecVirtual, 4)
	for p := range sp {
		sp[p] = ZMM()
		VPMOVZXBW(Mem{Base: wp, Disp: q4k16Scales + 32*p}, sp[p])
		s := sp[p]
		if shift != 0 {
			s = ZMM()
			VPSLLW(U8(shift), sp[p], s)
		}
		for i, x := range xr {
			if p == 0 {
				sumi[i] = zeroed()
			}
			VPDPWSSD_BCST(Mem{Base: x, Disp: disp + 4*p}, s, sumi[i])
		}
	}
	return sumi, sp
}

// fullMinsFinish ends a q4k16 or q5k16 full tile's super-block: the
// mins' term (the mins' pairs by the activations' pairs of bsum), then
// acc += d*x.d*sumi - dmin*x.d*mins.
func fullMinsFinish(wp reg.Register, xr []reg.Register, acc []Mem, sumi []reg.VecVirtual) {
	mi := make([]reg.VecVirtual, len(xr))
	for p := 0; p < 4; p++ {
		m := ZMM()
		VPMOVZXBW(Mem{Base: wp, Disp: q4k16Mins + 32*p}, m)
		for i, x := range xr {
			if p == 0 {
				mi[i] = zeroed()
			}
			VPDPWSSD_BCST(Mem{Base: x, Disp: q8kSub16 + 4*p}, m, mi[i])
		}
	}
	fullFinish(wp, xr, acc, sumi, mi)
}

// fullFinish ends a full tile's super-block: acc += d*x.d*sumi, and with
// mi (Q4_K, Q5_K) - dmin*x.d*mi.
func fullFinish(wp reg.Register, xr []reg.Register, acc []Mem, sumi, mi []reg.VecVirtual) {
	dD := ZMM()
	var dM reg.VecVirtual
	if mi != nil {
		dM = ZMM()
	}
	VCVTPH2PS(Mem{Base: wp}, dD)
	if mi != nil {
		VCVTPH2PS(Mem{Base: wp, Disp: q4k16DMin}, dM)
	}
	for i, x := range xr {
		d, f, a := ZMM(), ZMM(), ZMM()
		VMOVUPS(acc[i], a)
		VMULPS_BCST(Mem{Base: x}, dD, d)
		VCVTDQ2PS(sumi[i], f)
		VFMADD231PS(f, d, a)
		if mi != nil {
			VMULPS_BCST(Mem{Base: x}, dM, d)
			VCVTDQ2PS(mi[i], f)
			VFNMADD231PS(f, d, a)
		}
		VMOVUPS(a, acc[i])
	}
}

// q4k16Full generates q4k16Tile16VNNI (or GFNI): q4k16VNNI's sums in a
// full tile, the sub-blocks two at a time (2*nx sums in flight: a
// sub-block's eight VPDPBUSD a row are a chain, and eight chains leave
// the VNNI ports idle between them).
func q4k16Full(gf bool) {
	name, doc := k16FullName("q4k", "Q4_K", gf)
	k16FullLoop(name, doc, q4k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		sumi, sp := fullScaledSums(wp, xr, q8kSub16x8, 0)
		for jp := 0; jp < 4; jp++ {
			sc := [2]reg.VecVirtual{scalePair(sp[jp], 0), scalePair(sp[jp], 1)}
			s := fullNibbleSums(wp, xr, w, q4k16Unit, q4k16Quants, 5, jp, gf)
			for h := 0; h < 2; h++ {
				for i := range xr {
					VPDPWSSD(sc[h], s[h][i], sumi[i])
				}
			}
		}
		fullMinsFinish(wp, xr, acc, sumi)
	})
}

// q6k16Full generates q6k16Tile16GFNI: q6k16VNNI's sums in a full tile,
// a run at a time.
func q6k16Full() {
	name, doc := k16FullName("q6k", "Q6_K", true)
	low6 := constTable("klow6", func() []uint32 { return []uint32{0x3F3F3F3F} })
	or3 := ternImm(func(a, b, c bool) bool { return a || b || c })
	k16FullLoop(name, doc, q6k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		sumi := make([]reg.VecVirtual, len(xr))
		for i := range sumi {
			sumi[i] = zeroed()
		}
		var sp reg.VecVirtual
		for g := 0; g < 16; g++ {
			if g%2 == 0 {
				// dword l = (sc_g, sc_g+1) of row l, sign-extended words.
				sp = ZMM()
				VPMOVSXBW(Mem{Base: wp, Disp: q6k16Scales + 32*(g/2)}, sp)
			}
			sc := scalePair(sp, g%2)
			base := q6k16Quants + 192*g
			var v, t [3]reg.VecVirtual
			loaded := false
			load := func() {
				if loaded {
					return
				}
				loaded = true
				for k := 0; k < 3; k++ {
					PREFETCHT0(Mem{Base: wp, Disp: q6k16Unit + base + 64*k})
				}
				if g < 5 {
					PREFETCHT0(Mem{Base: wp, Disp: q6k16Unit + 64*g})
				}
				for k := 0; k < 3; k++ {
					v[k] = ZMM()
					VMOVDQU64(Mem{Base: wp, Disp: base + 64*k}, v[k])
				}
			}
			var o [4]reg.VecVirtual
			for k := 0; k < 3; k++ {
				o[k] = w(4*g+k, func() reg.VecVirtual {
					load()
					ok := ZMM()
					VPANDD_BCST(low6, v[k], ok)
					return ok
				})
			}
			o[3] = w(4*g+3, func() reg.VecVirtual {
				load()
				for k := 0; k < 3; k++ {
					t[k] = ZMM()
					VGF2P8AFFINEQB_BCST(U8(0), gfTop2().Offset(8*k), v[k], t[k])
				}
				VPTERNLOGD(U8(or3), t[2], t[1], t[0])
				return t[0]
			})
			for h := 0; h < 2; h++ {
				for i, x := range xr {
					s := ZMM()
					VPBROADCASTD(Mem{Base: x, Disp: q8kNeg32 + 4*(2*g+h)}, s)
					for e := 0; e < 2; e++ {
						VPDPBUSD_BCST(Mem{Base: x, Disp: q8kQuants + 16*g + 8*h + 4*e}, o[2*h+e], s)
					}
					VPDPWSSD(sc, s, sumi[i])
				}
			}
		}
		fullFinish(wp, xr, acc, sumi, nil)
	})
}

// q4016Full generates q4016Tile16VNNI (or GFNI): q4016VNNI's sums in a
// full tile, two blocks at a time.
func q4016Full(gf bool) {
	name, doc := k16FullName("q40", "Q4_0", gf)
	k16FullLoop(name, doc, q4016Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		fb := make([]reg.VecVirtual, len(xr))
		for jp := 0; jp < 4; jp++ {
			s := fullNibbleSums(wp, xr, w, q4016Unit, q4016Quants, 4, jp, gf)
			for h := 0; h < 2; h++ {
				j := 2*jp + h
				d := ZMM()
				VCVTPH2PS(Mem{Base: wp, Disp: 32 * j}, d)
				for i := range xr {
					VCVTDQ2PS(s[h][i], s[h][i])
					if j == 0 {
						fb[i] = ZMM()
						VMULPS(d, s[h][i], fb[i])
					} else {
						VFMADD231PS(d, s[h][i], fb[i])
					}
				}
			}
		}
		for i, x := range xr {
			a := ZMM()
			VMOVUPS(acc[i], a)
			VFMADD231PS_BCST(Mem{Base: x}, fb[i], a)
			VMOVUPS(a, acc[i])
		}
	})
}

// q5k16Full generates q5k16Tile16VNNI (or GFNI): q5k16VNNI's sums in a
// full tile, a half sub-block at a time.
func q5k16Full(gf bool) {
	name, doc := k16FullName("q5k", "Q5_K", gf)
	cst := vnniConsts()
	mask0F, bit4 := cst.Offset(0), cst.Offset(4)
	orBit := ternImm(func(a, b, c bool) bool { return a || b && c })
	k16FullLoop(name, doc, q5k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		sumi, sp := fullScaledSums(wp, xr, q8kSub16, 4)
		for j := 0; j < 8; j++ {
			sc := scalePair(sp[j/2], j%2)
			var fifth reg.VecVirtual
			for half := 0; half < 2; half++ {
				s := make([]reg.VecVirtual, len(xr))
				for i, x := range xr {
					s[i] = ZMM()
					VPBROADCASTD(Mem{Base: x, Disp: q8kNeg16 + 4*(2*j+half)}, s[i])
				}
				for v := 2 * half; v < 2*half+2; v++ {
					off := q4k16Quants + 256*j + 64*v
					var q reg.VecVirtual
					load := func() reg.VecVirtual {
						if q == nil {
							PREFETCHT0(Mem{Base: wp, Disp: q5k16Unit + off})
							if v == 0 {
								PREFETCHT0(Mem{Base: wp, Disp: q5k16Unit + q4k16Unit + 64*j})
								if j < 5 {
									PREFETCHT0(Mem{Base: wp, Disp: q5k16Unit + 64*j})
								}
							}
							q = ZMM()
							VMOVDQU64(Mem{Base: wp, Disp: off}, q)
						}
						return q
					}
					getFifth := func() reg.VecVirtual {
						if fifth == nil {
							fifth = ZMM()
							VMOVDQU64(Mem{Base: wp, Disp: q4k16Unit + 64*j}, fifth)
						}
						return fifth
					}
					var vec [2]reg.VecVirtual
					for h := 0; h < 2; h++ {
						k := 2*v + h
						vec[h] = w(2*(4*j+v)+h, func() reg.VecVirtual {
							var qv reg.VecVirtual
							if h == 0 {
								qv = ZMM()
								VPANDD_BCST(mask0F, load(), qv)
							} else {
								qv = highNibbles(load(), gf)
							}
							// The fifth bit k, moved to bit 4, ORed in.
							t := ZMM()
							switch {
							case k < 4:
								VPSLLW(U8(4-k), getFifth(), t)
							case k > 4:
								VPSRLW(U8(k-4), getFifth(), t)
							default:
								t = getFifth()
							}
							VPTERNLOGD_BCST(U8(orBit), bit4, t, qv)
							return qv
						})
					}
					for i, x := range xr {
						VPDPBUSD_BCST(Mem{Base: x, Disp: q8kQuants + 32*j + 8*v}, vec[0], s[i])
						VPDPBUSD_BCST(Mem{Base: x, Disp: q8kQuants + 32*j + 8*v + 4}, vec[1], s[i])
					}
				}
				for i := range xr {
					VPDPWSSD(sc, s[i], sumi[i])
				}
			}
		}
		fullMinsFinish(wp, xr, acc, sumi)
	})
}
