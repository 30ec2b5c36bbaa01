package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The 16-row layouts (see k16.go in the kernels package): a unit holds a
// super-block of sixteen weight rows, each 64-byte piece one ZMM register
// (lane l row l), so a VNNI tile loads its weights with no inserting;
// the activations' sums it needs lie in the Q8_K block.
const (
	q4k16Unit   = 2 * q4k8Unit
	q4k16DMin   = 32
	q4k16Scales = 64
	q4k16Mins   = 192
	q4k16Quants = 320
)

// k16NXMax is the most activation rows of a 16-row layout's tile: up to
// eight in one pass over a super-block (two or three ZMM registers of
// sums each), more in two passes (phases) over it, the first keeping the
// unpacked weight vectors in a 4 KiB buffer on the stack that the second
// reads back (the unpacking is then paid once for all the rows: a
// 16-branch step takes one tile, not two).
const k16NXMax = 16

// wsrc gives a tile's body weight vector k of a super-block: computed
// by make (one pass, or the first of two, which also stores it in the
// buffer), or read back from the buffer (the second).
type wsrc func(k int, make func() reg.VecVirtual) reg.VecVirtual

// k16Loop emits a VNNI tile for a 16-row layout of unit bytes a pair of
// groups and super-block: func(w *byte, x *byte, ldx int, nb int, out
// *float32, ldo int, npairs int), for each of npairs pairs, for each of
// nb blocks, block on the activation rows (xr) of each phase, adding into
// their float sums acc (lane l for the pair's row l), with w the weight
// vectors' source; then the sums stored, sixteen floats for each
// activation row.
func k16Loop(name, doc string, nx, unit int, block func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc)) {
	phases := []int{nx}
	flags := NOSPLIT
	if nx > 8 {
		phases = []int{(nx + 1) / 2, nx / 2}
		flags = 0 // the buffer is too large for a NOSPLIT frame
	}
	TEXT(name, flags, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, npairs int)")
	Pragma("noescape")
	Doc(doc)
	accMem := AllocLocal(64 * nx)
	acc := make([]Mem, nx)
	for i := range acc {
		acc[i] = accMem.Offset(64 * i)
	}
	var buf Mem
	if len(phases) > 1 {
		buf = AllocLocal(64 * 64)
	}
	wp := Load(Param("w"), GP64())
	outp := Load(Param("out"), GP64())
	left := Load(Param("npairs"), GP64())

	Label("pair")
	TESTQ(left, left)
	JZ(LabelRef("done"))
	z := zeroed()
	for i := range acc {
		VMOVUPS(z, acc[i])
	}
	ldx := loadStride("ldx", 0)
	xr := rowPtrs(Load(Param("x"), GP64()), ldx, phases[0])
	var skip reg.GPVirtual // the second phase's rows: phases[0] rows on
	if len(phases) > 1 {
		skip = GP64()
		IMUL3Q(U8(phases[0]), ldx, skip)
	}
	nb := Load(Param("nb"), GP64())
	countLoop("blk", nb, func() {
		if len(phases) == 1 {
			block(wp, xr, acc, func(k int, make func() reg.VecVirtual) reg.VecVirtual { return make() })
		} else {
			block(wp, xr, acc[:phases[0]], func(k int, make func() reg.VecVirtual) reg.VecVirtual {
				v := make()
				VMOVDQU64(v, buf.Offset(64*k))
				return v
			})
			for _, p := range xr[:phases[1]] {
				ADDQ(skip, p)
			}
			block(wp, xr[:phases[1]], acc[phases[0]:], func(k int, make func() reg.VecVirtual) reg.VecVirtual {
				v := ZMM()
				VMOVDQU64(buf.Offset(64*k), v)
				return v
			})
			for _, p := range xr[:phases[1]] {
				SUBQ(skip, p)
			}
		}
		for _, p := range xr {
			ADDQ(U32(q8kBlock), p)
		}
		ADDQ(U32(unit), wp)
	})
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
	DECQ(left)
	JMP(LabelRef("pair"))
	Label("done")
	VZEROUPPER()
	RET()
}

// gfShr4 is the GF2P8AFFINEQB matrix of a byte's shift right by four
// (output bit i is input bit i+4: row 7-i of the matrix, byte 7-i of the
// qword, selects bit i+4).
func gfShr4() Mem {
	return constTable("kgfshr4", func() []uint32 { return []uint32{0, 0x10204080} })
}

// q4k16VNNI generates q4k16Tile{nx}VNNI (or, with gf, q4k16Tile{nx}GFNI,
// whose high nibbles come from one GF2P8AFFINEQB instead of a shift and
// a mask): the q4k8 tiles' integer sums (k8Tile45) on the q4k16 layout.
func q4k16VNNI(nx int, gf bool) {
	suffix := "VNNI"
	if gf {
		suffix = "GFNI"
	}
	name := fmt.Sprintf("q4k16Tile%d%s", nx, suffix)
	cst := vnniConsts()
	mask0F := cst.Offset(0)
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q4_K weight rows (q4k16 layout) times %d Q8_K activation rows.", name, nx)
	lowWord := constTable("klowword", func() []uint32 { return []uint32{0x0000FFFF} })
	k16Loop(name, doc, nx, q4k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		nx := len(xr)
		// sumi starts at Σ_j sc_j*8*bsum_j: scale pairs by the
		// activations' pairs of 8*bsum.
		sumi := make([]reg.VecVirtual, nx)
		sp := make([]reg.VecVirtual, 4)
		for p := range sp {
			sp[p] = ZMM()
			VPMOVZXBW(Mem{Base: wp, Disp: q4k16Scales + 32*p}, sp[p])
			for i := 0; i < nx; i++ {
				if p == 0 {
					sumi[i] = zeroed()
				}
				VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSub16x8 + 4*p}, sp[p], sumi[i])
			}
		}
		// Sub-blocks two at a time (2*nx sums in flight: a sub-block's
		// eight VPDPBUSD a row are a chain, and eight chains of a
		// one-pass tile leave the VNNI ports idle between them).
		for jp := 0; jp < 4; jp++ {
			var sc [2]reg.VecVirtual
			var s [2][]reg.VecVirtual
			for h := 0; h < 2; h++ {
				// The scale of sub-block j = 2jp+h in the low word of
				// each lane.
				sc[h] = ZMM()
				if h == 0 {
					VPANDD_BCST(lowWord, sp[jp], sc[h])
				} else {
					VPSRLD(U8(16), sp[jp], sc[h])
				}
				s[h] = make([]reg.VecVirtual, nx)
			}
			for v := 0; v < 4; v++ {
				for h := 0; h < 2; h++ {
					j := 2*jp + h
					off := q4k16Quants + 256*j + 64*v
					var q reg.VecVirtual
					load := func() reg.VecVirtual {
						if q == nil {
							PREFETCHT0(Mem{Base: wp, Disp: q4k16Unit + off})
							if j < 5 && v == 0 {
								PREFETCHT0(Mem{Base: wp, Disp: q4k16Unit + 64*j})
							}
							q = ZMM()
							VMOVDQU64(Mem{Base: wp, Disp: off}, q)
						}
						return q
					}
					lo := w(2*(4*j+v), func() reg.VecVirtual {
						lo := ZMM()
						VPANDD_BCST(mask0F, load(), lo)
						return lo
					})
					hi := w(2*(4*j+v)+1, func() reg.VecVirtual {
						hi := ZMM()
						if gf {
							VGF2P8AFFINEQB_BCST(U8(0), gfShr4(), load(), hi)
						} else {
							VPSRLW(U8(4), load(), hi)
							VPANDD_BCST(mask0F, hi, hi)
						}
						return hi
					})
					for i := 0; i < nx; i++ {
						if v == 0 {
							s[h][i] = ZMM()
							VPBROADCASTD(Mem{Base: xr[i], Disp: q8kNeg8 + 4*j}, s[h][i])
						}
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v}, lo, s[h][i])
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4}, hi, s[h][i])
					}
				}
			}
			for h := 0; h < 2; h++ {
				for i := 0; i < nx; i++ {
					VPDPWSSD(sc[h], s[h][i], sumi[i])
				}
			}
		}
		// The mins' term: the mins' pairs by the activations' pairs of
		// bsum.
		mi := make([]reg.VecVirtual, nx)
		for p := 0; p < 4; p++ {
			m := ZMM()
			VPMOVZXBW(Mem{Base: wp, Disp: q4k16Mins + 32*p}, m)
			for i := 0; i < nx; i++ {
				if p == 0 {
					mi[i] = zeroed()
				}
				VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSub16 + 4*p}, m, mi[i])
			}
		}
		dD, dM := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: wp}, dD)
		VCVTPH2PS(Mem{Base: wp, Disp: q4k16DMin}, dM)
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
		}
	})
}

func genK16() {
	for _, gf := range []bool{false, true} {
		for nx := 1; nx <= k16NXMax; nx++ {
			q4k16VNNI(nx, gf)
		}
	}
	for nx := 1; nx <= k16NXMax; nx++ {
		q6k16VNNI(nx)
	}
	for _, gf := range []bool{false, true} {
		for nx := 1; nx <= k16NXMax; nx++ {
			q4016VNNI(nx, gf)
		}
	}
	for _, gf := range []bool{false, true} {
		for nx := 1; nx <= k16NXMax; nx++ {
			q5k16VNNI(nx, gf)
		}
	}
}

const (
	q6k16Unit   = 2 * q6k8Unit
	q6k16Scales = 32
	q6k16Quants = 288
)

// gfTop2 returns the GF2P8AFFINEQB matrices that move a byte's top two
// bits to bits 2t and 2t+1 (t = 0, 1, 2), all others cleared: output bit
// 2t is input bit 6 (matrix byte 7-2t holds 0x40), bit 2t+1 input bit 7.
func gfTop2() Mem {
	return constTable("kgftop2", func() []uint32 {
		// Qwords, low dword first.
		return []uint32{0, 0x40800000, 0, 0x00004080, 0x40800000, 0}
	})
}

// q6k16VNNI generates q6k16Tile{nx}GFNI: the q6k8 tiles' integer sums
// (q6k8Tile) on the q6k16 layout, each run's halves of eight products
// started from -32 times the activations' sum and added in by one
// VPDPWSSD each.
func q6k16VNNI(nx int) {
	name := fmt.Sprintf("q6k16Tile%dGFNI", nx)
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q6_K weight rows (q6k16 layout) times %d Q8_K activation rows.", name, nx)
	low6 := constTable("klow6", func() []uint32 { return []uint32{0x3F3F3F3F} })
	lowWord := constTable("klowword", func() []uint32 { return []uint32{0x0000FFFF} })
	or3 := ternImm(func(a, b, c bool) bool { return a || b || c })
	k16Loop(name, doc, nx, q6k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		nx := len(xr)
		sumi := make([]reg.VecVirtual, nx)
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
			sc := ZMM()
			if g%2 == 0 {
				VPANDD_BCST(lowWord, sp, sc)
			} else {
				VPSRLD(U8(16), sp, sc)
			}
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
				s := make([]reg.VecVirtual, nx)
				for i := 0; i < nx; i++ {
					s[i] = ZMM()
					VPBROADCASTD(Mem{Base: xr[i], Disp: q8kNeg32 + 4*(2*g+h)}, s[i])
					for e := 0; e < 2; e++ {
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 16*g + 8*h + 4*e}, o[2*h+e], s[i])
					}
					VPDPWSSD(sc, s[i], sumi[i])
				}
			}
		}
		dD := ZMM()
		VCVTPH2PS(Mem{Base: wp}, dD)
		for i := 0; i < nx; i++ {
			d, f, a := ZMM(), ZMM(), ZMM()
			VMOVUPS(acc[i], a)
			VMULPS_BCST(Mem{Base: xr[i]}, dD, d)
			VCVTDQ2PS(sumi[i], f)
			VFMADD231PS(f, d, a)
			VMOVUPS(a, acc[i])
		}
	})
}

const (
	q4016Unit   = 2 * q408Unit
	q4016Quants = 256
)

// q4016VNNI generates q4016Tile{nx}VNNI (or GFNI): the q408 tiles' sums
// (q408Tile) on the q4016 layout, each block's sums started from -8 times
// the activations' sums, two blocks at a time.
func q4016VNNI(nx int, gf bool) {
	suffix := "VNNI"
	if gf {
		suffix = "GFNI"
	}
	name := fmt.Sprintf("q4016Tile%d%s", nx, suffix)
	mask0F := vnniConsts().Offset(0)
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q4_0 weight rows (q4016 layout) times %d Q8_K activation rows.", name, nx)
	k16Loop(name, doc, nx, q4016Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		nx := len(xr)
		fb := make([]reg.VecVirtual, nx)
		for jp := 0; jp < 4; jp++ {
			var s [2][]reg.VecVirtual
			for h := range s {
				s[h] = make([]reg.VecVirtual, nx)
			}
			for v := 0; v < 4; v++ {
				for h := 0; h < 2; h++ {
					j := 2*jp + h
					off := q4016Quants + 256*j + 64*v
					var q reg.VecVirtual
					load := func() reg.VecVirtual {
						if q == nil {
							PREFETCHT0(Mem{Base: wp, Disp: q4016Unit + off})
							if j < 4 && v == 0 {
								PREFETCHT0(Mem{Base: wp, Disp: q4016Unit + 64*j})
							}
							q = ZMM()
							VMOVDQU64(Mem{Base: wp, Disp: off}, q)
						}
						return q
					}
					lo := w(2*(4*j+v), func() reg.VecVirtual {
						lo := ZMM()
						VPANDD_BCST(mask0F, load(), lo)
						return lo
					})
					hi := w(2*(4*j+v)+1, func() reg.VecVirtual {
						hi := ZMM()
						if gf {
							VGF2P8AFFINEQB_BCST(U8(0), gfShr4(), load(), hi)
						} else {
							VPSRLW(U8(4), load(), hi)
							VPANDD_BCST(mask0F, hi, hi)
						}
						return hi
					})
					for i := 0; i < nx; i++ {
						if v == 0 {
							s[h][i] = ZMM()
							VPBROADCASTD(Mem{Base: xr[i], Disp: q8kNeg8 + 4*j}, s[h][i])
						}
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v}, lo, s[h][i])
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4}, hi, s[h][i])
					}
				}
			}
			for h := 0; h < 2; h++ {
				j := 2*jp + h
				d := ZMM()
				VCVTPH2PS(Mem{Base: wp, Disp: 32 * j}, d)
				for i := 0; i < nx; i++ {
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
		for i := 0; i < nx; i++ {
			a := ZMM()
			VMOVUPS(acc[i], a)
			VFMADD231PS_BCST(Mem{Base: xr[i]}, fb[i], a)
			VMOVUPS(a, acc[i])
		}
	})
}

const q5k16Unit = q4k16Unit + 512

// q5k16VNNI generates q5k16Tile{nx}VNNI (or GFNI): the q5k8 tiles' sums
// (k8Tile45) on the q5k16 layout, a half sub-block's 16 products of a row
// summed from -16 times the activations' run sum and added in by one
// VPDPWSSD.
func q5k16VNNI(nx int, gf bool) {
	suffix := "VNNI"
	if gf {
		suffix = "GFNI"
	}
	name := fmt.Sprintf("q5k16Tile%d%s", nx, suffix)
	cst := vnniConsts()
	mask0F, bit4 := cst.Offset(0), cst.Offset(4)
	orBit := ternImm(func(a, b, c bool) bool { return a || b && c })
	doc := fmt.Sprintf("%s computes npairs pairs of groups of eight Q5_K weight rows (q5k16 layout) times %d Q8_K activation rows.", name, nx)
	lowWord := constTable("klowword", func() []uint32 { return []uint32{0x0000FFFF} })
	k16Loop(name, doc, nx, q5k16Unit, func(wp reg.Register, xr []reg.Register, acc []Mem, w wsrc) {
		nx := len(xr)
		// sumi starts at Σ_j 16*sc_j*bsum_j: the scale pairs times 16
		// by the activations' pairs of bsum.
		sumi := make([]reg.VecVirtual, nx)
		sp := make([]reg.VecVirtual, 4)
		for p := range sp {
			sp[p] = ZMM()
			VPMOVZXBW(Mem{Base: wp, Disp: q4k16Scales + 32*p}, sp[p])
			s16 := ZMM()
			VPSLLW(U8(4), sp[p], s16)
			for i := 0; i < nx; i++ {
				if p == 0 {
					sumi[i] = zeroed()
				}
				VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSub16 + 4*p}, s16, sumi[i])
			}
		}
		for j := 0; j < 8; j++ {
			sc := ZMM()
			if j%2 == 0 {
				VPANDD_BCST(lowWord, sp[j/2], sc)
			} else {
				VPSRLD(U8(16), sp[j/2], sc)
			}
			var fifth reg.VecVirtual
			for half := 0; half < 2; half++ {
				s := make([]reg.VecVirtual, nx)
				for i := 0; i < nx; i++ {
					s[i] = ZMM()
					VPBROADCASTD(Mem{Base: xr[i], Disp: q8kNeg16 + 4*(2*j+half)}, s[i])
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
							qv := ZMM()
							switch {
							case h == 0:
								VPANDD_BCST(mask0F, load(), qv)
							case gf:
								VGF2P8AFFINEQB_BCST(U8(0), gfShr4(), load(), qv)
							default:
								VPSRLW(U8(4), load(), qv)
								VPANDD_BCST(mask0F, qv, qv)
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
					for i := 0; i < nx; i++ {
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v}, vec[0], s[i])
						VPDPBUSD_BCST(Mem{Base: xr[i], Disp: q8kQuants + 32*j + 8*v + 4}, vec[1], s[i])
					}
				}
				for i := 0; i < nx; i++ {
					VPDPWSSD(sc, s[i], sumi[i])
				}
			}
		}
		mi := make([]reg.VecVirtual, nx)
		for p := 0; p < 4; p++ {
			m := ZMM()
			VPMOVZXBW(Mem{Base: wp, Disp: q4k16Mins + 32*p}, m)
			for i := 0; i < nx; i++ {
				if p == 0 {
					mi[i] = zeroed()
				}
				VPDPWSSD_BCST(Mem{Base: xr[i], Disp: q8kSub16 + 4*p}, m, mi[i])
			}
		}
		dD, dM := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: wp}, dD)
		VCVTPH2PS(Mem{Base: wp, Disp: q4k16DMin}, dM)
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
		}
	})
}
