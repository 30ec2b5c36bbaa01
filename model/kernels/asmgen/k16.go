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

// k16NXMax is the most activation rows of a 16-row layout's tile: the
// tiles take the rows in a loop, k16Rows at a time (then one at a time),
// each step's weight vectors unpacked once into registers for all of
// them (a 16-branch step takes one tile, not two), the rows' integer and
// float sums on the stack. Sixteen rows also have full tiles
// (k16full.go), which the dispatch takes for them.
const k16NXMax = 16

// k16Rows is how many activation rows a tile's row loops take at a
// time: a step's 16 weight vectors, two scales and three registers a
// row fit in the 32 ZMM registers.
const k16Rows = 4

// k16Tile is the state of a 16-row layout's tile as it is generated.
type k16Tile struct {
	wp    reg.Register // the unit
	xb    Mem          // the super-block's first activation row
	rowsM Mem          // the rows' area: its address, 64-byte aligned
	// The rows' slots, 64 bytes a row at these offsets in the rows'
	// area (aligned: a ZMM load or store that splits a cache line costs
	// twice): their float sums, their integer (or float) sums of a
	// super-block, and more (Q6_K: the odd runs').
	acc, sums, sums2 Mem
	loops            int // loops emitted, for their labels
}

// k16Step addresses one step of a tile's loop over a super-block (a
// pair of sub-blocks, or of Q6_K's runs): the weights at wstride bytes a
// step (index t), the unit's other fields and the activations at
// multiples of rstride (index r).
type k16Step struct {
	wp, t, r reg.Register
	rstride  int
}

// w returns the step's weight bytes at disp.
func (s k16Step) w(disp int) Mem { return Mem{Base: s.wp, Index: s.t, Scale: 1, Disp: disp} }

// at returns the bytes at disp from base, stride bytes further each step
// (stride one, two, four or eight times the step's rstride).
func (s k16Step) at(base reg.Register, disp, stride int) Mem {
	scale := stride / s.rstride
	if scale*s.rstride != stride || scale&(scale-1) != 0 || scale > 8 {
		panic(fmt.Sprintf("asmgen: stride %d is no scale of %d", stride, s.rstride))
	}
	return Mem{Base: base, Index: s.r, Scale: uint8(scale), Disp: disp}
}

// base returns a new register holding x plus stride bytes a step: the
// base of the activations' operands of VPDPBUSD, which with an index
// would take two µops each (un-laminated), not one.
func (s k16Step) base(x reg.Register, stride int) reg.Register {
	b := GP64()
	LEAQ(s.at(x, 0, stride), b)
	return b
}

// label returns a new label name starting with prefix.
func (k *k16Tile) label(prefix string) string {
	k.loops++
	return fmt.Sprintf("%s%d", prefix, k.loops)
}

// rows emits body over the tile's nx activation rows of the super-block,
// k16Rows at a time while that many are left, then one at a time: body
// gets the rows' pointers and slot, which returns a row's 64 bytes at m
// (acc or sums; i counts the rows of the call).
func (k *k16Tile) rows(body func(xr []reg.Register, slot func(i int, m Mem) Mem)) {
	l := k.label("rows")
	x, ro := GP64(), GP64()
	MOVQ(k.xb, x)
	MOVQ(k.rowsM, ro)
	n := Load(Param("nx"), GP64())
	ldx := Load(Param("ldx"), GP64())
	slot := func(i int, m Mem) Mem { return Mem{Base: ro, Disp: m.Disp + 64*i} }
	for _, u := range []int{k16Rows, 1} {
		top, next := fmt.Sprintf("%sx%d", l, u), l+"x1"
		if u == 1 {
			next = l + "done"
		}
		Label(top)
		CMPQ(n, U8(u))
		JB(LabelRef(next))
		body(rowPtrs(x, ldx, u), slot)
		if u == 1 {
			ADDQ(ldx, x)
		} else {
			LEAQ(Mem{Base: x, Index: ldx, Scale: uint8(u)}, x)
		}
		ADDQ(U32(64*u), ro)
		SUBQ(U8(u), n)
		JMP(LabelRef(top))
	}
	Label(l + "done")
}

// steps emits a loop of n steps: body once, run n times, with its
// weights wstride bytes and its other fields multiples of rstride bytes
// further each time.
func (k *k16Tile) steps(n, wstride, rstride int, body func(st k16Step)) {
	l := k.label("step")
	t, r := GP64(), GP64()
	XORQ(t, t)
	XORQ(r, r)
	Label(l)
	body(k16Step{wp: k.wp, t: t, r: r, rstride: rstride})
	ADDQ(U32(wstride), t)
	ADDQ(U8(rstride), r)
	CMPQ(t, U32(n*wstride))
	JB(LabelRef(l))
}

// emitK16Tile emits a VNNI tile for a 16-row layout of unit bytes a pair
// of groups and super-block: func(w *byte, x *byte, ldx int, nb int, out
// *float32, ldo int, npairs int, nx int), for each of npairs pairs, for
// each of nb super-blocks, block (on the nx activation rows, adding into
// their float sums acc, lane l for the pair's row l); then the sums
// stored, sixteen floats for each activation row.
func emitK16Tile(name, doc string, unit int, block func(k *k16Tile)) {
	TEXT(name, 0, "func(w *byte, x *byte, ldx int, nb int, out *float32, ldo int, npairs int, nx int)")
	Pragma("noescape")
	Doc(doc)
	const area = 64 * k16NXMax
	k := &k16Tile{acc: Mem{Disp: 0}, sums: Mem{Disp: area}, sums2: Mem{Disp: 2 * area}}
	rowsArea := AllocLocal(3*area + 64)
	// The loops' counts and pointers live on the stack: the row loops
	// want the registers.
	state := AllocLocal(40)
	outM, leftM, nbM := state.Offset(0), state.Offset(8), state.Offset(16)
	k.xb, k.rowsM = state.Offset(24), state.Offset(32)
	ra := GP64()
	LEAQ(rowsArea, ra)
	ADDQ(U8(63), ra)
	ANDQ(I8(-64), ra)
	MOVQ(ra, k.rowsM)
	k.wp = Load(Param("w"), GP64())
	MOVQ(Load(Param("out"), GP64()), outM)
	MOVQ(Load(Param("npairs"), GP64()), leftM)

	Label("pair")
	CMPQ(leftM, U8(0))
	JE(LabelRef("done"))
	z, ap := zeroed(), GP64()
	MOVQ(k.rowsM, ap)
	for i := 0; i < k16NXMax; i++ {
		VMOVUPS(z, Mem{Base: ap, Disp: k.acc.Disp + 64*i})
	}
	MOVQ(Load(Param("x"), GP64()), k.xb)
	MOVQ(Load(Param("nb"), GP64()), nbM)
	Label("blk")
	CMPQ(nbM, U8(0))
	JE(LabelRef("blkdone"))
	block(k)
	ADDQ(U32(q8kBlock), k.xb)
	ADDQ(U32(unit), k.wp)
	DECQ(nbM)
	JMP(LabelRef("blk"))
	Label("blkdone")

	op, ro := GP64(), GP64()
	MOVQ(outM, op)
	MOVQ(k.rowsM, ro)
	ldo := loadStride("ldo", 2)
	n := Load(Param("nx"), GP64())
	Label("store")
	t := ZMM()
	VMOVUPS(Mem{Base: ro, Disp: k.acc.Disp}, t)
	VMOVUPS(t, Mem{Base: op})
	ADDQ(ldo, op)
	ADDQ(U8(64), ro)
	DECQ(n)
	JNZ(LabelRef("store"))
	ADDQ(U8(64), outM)
	DECQ(leftM)
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

// highNibbles returns the high nibbles of q's bytes: one GF2P8AFFINEQB
// with gf, else a shift and a mask.
func highNibbles(q reg.VecVirtual, gf bool) reg.VecVirtual {
	hi := ZMM()
	if gf {
		VGF2P8AFFINEQB_BCST(U8(0), gfShr4(), q, hi)
	} else {
		VPSRLW(U8(4), q, hi)
		VPANDD_BCST(vnniConsts().Offset(0), hi, hi)
	}
	return hi
}

// prefetchLines prefetches n lines from disp of wp.
func prefetchLines(wp reg.Register, disp, n int) {
	for l := 0; l < n; l++ {
		PREFETCHT0(Mem{Base: wp, Disp: disp + 64*l})
	}
}

// scalePair returns the scales of the sub-blocks h = 0, 1 of a pair's
// dwords sp (the low and the high word of each lane) as dwords (sc, 0)
// for VPDPWSSD: of an int32 sum that fits in int16 by such a dword it
// adds sc*sum (the sum's high word, its sign, meets the 0).
func scalePair(sp reg.VecVirtual, h int) reg.VecVirtual {
	sc := ZMM()
	if h == 0 {
		VPANDD_BCST(constTable("klowword", func() []uint32 { return []uint32{0x0000FFFF} }), sp, sc)
	} else {
		VPSRLD(U8(16), sp, sc)
	}
	return sc
}

// k16Name returns a 16-row tile's name and doc.
func k16Name(prefix, typ string, gf bool) (name, doc string) {
	suffix := "VNNI"
	if gf {
		suffix = "GFNI"
	}
	name = fmt.Sprintf("%s16Tile%s", prefix, suffix)
	doc = fmt.Sprintf("%s computes npairs pairs of groups of eight %s weight rows (%s16 layout) times nx (1 to 16) Q8_K activation rows.", name, typ, prefix)
	return name, doc
}

// nibbles unpacks a step of a 4-bit 16-row layout (q4k16, q4016: the
// sub-blocks h = 0, 1 of the step, 256 bytes of quants each from quants,
// a low and a high nibble a byte): w[h][v][0] the low nibbles of quarter
// v of sub-block h, w[h][v][1] the high ones; each 64-byte load
// prefetches the same bytes of the next unit.
func nibbles(st k16Step, unit, quants int, gf bool) (w [2][4][2]reg.VecVirtual) {
	mask0F := vnniConsts().Offset(0)
	for h := range w {
		for v := range w[h] {
			off := quants + 256*h + 64*v
			PREFETCHT0(st.w(unit + off))
			q := ZMM()
			VMOVDQU64(st.w(off), q)
			w[h][v][0] = ZMM()
			VPANDD_BCST(mask0F, q, w[h][v][0])
			w[h][v][1] = highNibbles(q, gf)
		}
	}
	return w
}

// nibbleSums emits the products of a step's nibbles w (nibbles) with the
// activation rows xr (rstride 8), and returns each sub-block's sums, a
// register an activation row, started from -8 times the activations'
// sums. Two sub-blocks at a time: 2*len(xr) sums in flight (a
// sub-block's eight VPDPBUSD a row are a chain); for one row the high
// nibbles' products in chains of their own, added in at the end (four
// chains).
func nibbleSums(st k16Step, w [2][4][2]reg.VecVirtual, xr []reg.Register) [2][]reg.VecVirtual {
	var sums, hi [2][]reg.VecVirtual
	for h := range sums {
		sums[h], hi[h] = make([]reg.VecVirtual, len(xr)), make([]reg.VecVirtual, len(xr))
	}
	split := len(xr) == 1
	q := make([]reg.Register, len(xr))
	for i, x := range xr {
		q[i] = st.base(x, 64)
	}
	for v := 0; v < 4; v++ {
		for h := 0; h < 2; h++ {
			for i, x := range xr {
				if v == 0 {
					sums[h][i] = ZMM()
					VPBROADCASTD(st.at(x, q8kNeg8+4*h, 8), sums[h][i])
					hi[h][i] = sums[h][i]
					if split {
						hi[h][i] = zeroed()
					}
				}
				VPDPBUSD_BCST(Mem{Base: q[i], Disp: q8kQuants + 32*h + 8*v}, w[h][v][0], sums[h][i])
				VPDPBUSD_BCST(Mem{Base: q[i], Disp: q8kQuants + 32*h + 8*v + 4}, w[h][v][1], hi[h][i])
			}
		}
	}
	if split {
		for h := range sums {
			VPADDD(hi[h][0], sums[h][0], sums[h][0])
		}
	}
	return sums
}

// addScaled loads each row's integer sum from the tile's sums, adds to
// it the scales sc[h] times the sums s[h][i] (VPDPWSSD) and stores it.
func (k *k16Tile) addScaled(xr []reg.Register, slot func(i int, m Mem) Mem, sc []reg.VecVirtual, s [][]reg.VecVirtual) {
	for i := range xr {
		sumi := ZMM()
		VMOVDQU64(slot(i, k.sums), sumi)
		for h := range sc {
			VPDPWSSD(sc[h], s[h][i], sumi)
		}
		VMOVDQU64(sumi, slot(i, k.sums))
	}
}

// scaledSums starts a q4k16 or q5k16 tile's integer sums: for each
// activation row, Σ_p the pair p of the rows' scales (q4k16Scales,
// shifted left by shift) times the activations' pair p at disp (int16
// pairs).
func (k *k16Tile) scaledSums(disp int, shift uint64) {
	var sp [4]reg.VecVirtual
	for p := range sp {
		sp[p] = ZMM()
		VPMOVZXBW(Mem{Base: k.wp, Disp: q4k16Scales + 32*p}, sp[p])
		if shift != 0 {
			VPSLLW(U8(shift), sp[p], sp[p])
		}
	}
	k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
		for i, x := range xr {
			sumi := zeroed()
			for p := range sp {
				VPDPWSSD_BCST(Mem{Base: x, Disp: disp + 4*p}, sp[p], sumi)
			}
			VMOVDQU64(sumi, slot(i, k.sums))
		}
	})
}

// minsFinish ends a q4k16 or q5k16 super-block: the mins' term (the
// mins' pairs by the activations' pairs of bsum), then acc += d*x.d*sumi
// - dmin*x.d*mins.
func (k *k16Tile) minsFinish() {
	var m [4]reg.VecVirtual
	for p := range m {
		m[p] = ZMM()
		VPMOVZXBW(Mem{Base: k.wp, Disp: q4k16Mins + 32*p}, m[p])
	}
	dD, dM := ZMM(), ZMM()
	VCVTPH2PS(Mem{Base: k.wp}, dD)
	VCVTPH2PS(Mem{Base: k.wp, Disp: q4k16DMin}, dM)
	k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
		for i, x := range xr {
			mi := zeroed()
			for p := range m {
				VPDPWSSD_BCST(Mem{Base: x, Disp: q8kSub16 + 4*p}, m[p], mi)
			}
			d, f, a := ZMM(), ZMM(), ZMM()
			VMOVUPS(slot(i, k.acc), a)
			VMULPS_BCST(Mem{Base: x}, dD, d)
			VCVTDQ2PS(slot(i, k.sums), f)
			VFMADD231PS(f, d, a)
			VMULPS_BCST(Mem{Base: x}, dM, d)
			VCVTDQ2PS(mi, f)
			VFNMADD231PS(f, d, a)
			VMOVUPS(a, slot(i, k.acc))
		}
	})
}

// k45Tile emits a q4k16 or q5k16 tile: per super-block the integer sums
// started from the scale pairs (shifted left by shift) by the
// activations' int16 pairs at sub, then four steps of two sub-blocks,
// step adding into them with the pair's scales sc, then the mins' term
// and the float sums.
func k45Tile(name, doc string, unit, sub int, shift uint64, rstride int, step func(k *k16Tile, st k16Step, sc []reg.VecVirtual)) {
	emitK16Tile(name, doc, unit, func(k *k16Tile) {
		k.scaledSums(sub, shift)
		prefetchLines(k.wp, unit, 5)
		k.steps(4, 512, rstride, func(st k16Step) {
			sp := ZMM()
			VPMOVZXBW(st.at(k.wp, q4k16Scales, 32), sp)
			step(k, st, []reg.VecVirtual{scalePair(sp, 0), scalePair(sp, 1)})
		})
		k.minsFinish()
	})
}

// q4k16VNNI generates q4k16TileVNNI (or, with gf, q4k16TileGFNI, whose
// high nibbles come from one GF2P8AFFINEQB instead of a shift and a
// mask): the q4k8 tiles' integer sums (k8Tile45) on the q4k16 layout.
// The sums start at Σ_j sc_j*8*bsum_j (the scale pairs by the
// activations' pairs of 8*bsum).
func q4k16VNNI(gf bool) {
	name, doc := k16Name("q4k", "Q4_K", gf)
	k45Tile(name, doc, q4k16Unit, q8kSub16x8, 0, 8, func(k *k16Tile, st k16Step, sc []reg.VecVirtual) {
		w := nibbles(st, q4k16Unit, q4k16Quants, gf)
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			s := nibbleSums(st, w, xr)
			k.addScaled(xr, slot, sc, s[:])
		})
	})
}

func genK16() {
	for _, gf := range []bool{false, true} {
		q4k16VNNI(gf)
	}
	q6k16VNNI()
	for _, gf := range []bool{false, true} {
		q4016VNNI(gf)
	}
	for _, gf := range []bool{false, true} {
		q5k16VNNI(gf)
	}
	genK16Full(true)
	q6k16AMX()
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

// q6k16VNNI generates q6k16TileGFNI: the q6k8 tiles' integer sums
// (q6k8Tile) on the q6k16 layout, each run's halves of eight products
// started from -32 times the activations' sum and added in by one
// VPDPWSSD each; in eight steps of two runs.
func q6k16VNNI() {
	name, doc := k16Name("q6k", "Q6_K", true)
	low6 := constTable("klow6", func() []uint32 { return []uint32{0x3F3F3F3F} })
	or3 := ternImm(func(a, b, c bool) bool { return a || b || c })
	emitK16Tile(name, doc, q6k16Unit, func(k *k16Tile) {
		zero := zeroed()
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			for i := range xr {
				VMOVDQU64(zero, slot(i, k.sums))
				VMOVDQU64(zero, slot(i, k.sums2))
			}
		})
		prefetchLines(k.wp, q6k16Unit, 5)
		k.steps(8, 384, 16, func(st k16Step) {
			// dword l = (sc_g, sc_g+1) of row l, sign-extended words.
			sp := ZMM()
			VPMOVSXBW(st.at(k.wp, q6k16Scales, 32), sp)
			sc := []reg.VecVirtual{scalePair(sp, 0), scalePair(sp, 1)}
			// o[g]: run g's three vectors of values and the fourth.
			var o [2][4]reg.VecVirtual
			for g := range o {
				base := q6k16Quants + 192*g
				var v [3]reg.VecVirtual
				for t := range v {
					PREFETCHT0(st.w(q6k16Unit + base + 64*t))
				}
				for t := range v {
					v[t] = ZMM()
					VMOVDQU64(st.w(base+64*t), v[t])
				}
				var top [3]reg.VecVirtual
				for t := range v {
					o[g][t] = ZMM()
					VPANDD_BCST(low6, v[t], o[g][t])
					top[t] = ZMM()
					VGF2P8AFFINEQB_BCST(U8(0), gfTop2().Offset(8*t), v[t], top[t])
				}
				VPTERNLOGD(U8(or3), top[2], top[1], top[0])
				o[g][3] = top[0]
			}
			k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
				q := make([]reg.Register, len(xr))
				for i, x := range xr {
					q[i] = st.base(x, 32)
				}
				// s[g][h][i]: half h of run g of row i.
				var s [2][2][]reg.VecVirtual
				for g := range s {
					for h := range s[g] {
						s[g][h] = make([]reg.VecVirtual, len(xr))
						for i, x := range xr {
							s[g][h][i] = ZMM()
							VPBROADCASTD(st.at(x, q8kNeg32+4*(2*g+h), 16), s[g][h][i])
						}
						for e := 0; e < 2; e++ {
							for i := range xr {
								VPDPBUSD_BCST(Mem{Base: q[i], Disp: q8kQuants + 16*g + 8*h + 4*e}, o[g][2*h+e], s[g][h][i])
							}
						}
					}
				}
				// Run g's sums into sums (g = 0) or sums2 (g = 1): two
				// chains of VPDPWSSD a row, not one twice as long.
				for i := range xr {
					for g, m := range []Mem{k.sums, k.sums2} {
						sumi := ZMM()
						VMOVDQU64(slot(i, m), sumi)
						for h := range s[g] {
							VPDPWSSD(sc[g], s[g][h][i], sumi)
						}
						VMOVDQU64(sumi, slot(i, m))
					}
				}
			})
		})
		dD := ZMM()
		VCVTPH2PS(Mem{Base: k.wp}, dD)
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			for i, x := range xr {
				d, f, a := ZMM(), ZMM(), ZMM()
				VMOVUPS(slot(i, k.acc), a)
				VMULPS_BCST(Mem{Base: x}, dD, d)
				VMOVDQU64(slot(i, k.sums), f)
				VPADDD(slot(i, k.sums2), f, f)
				VCVTDQ2PS(f, f)
				VFMADD231PS(f, d, a)
				VMOVUPS(a, slot(i, k.acc))
			}
		})
	})
}

const (
	q4016Unit   = 2 * q408Unit
	q4016Quants = 256
)

const q5k16Unit = q4k16Unit + 512

// q4016VNNI generates q4016TileVNNI (or GFNI): the q408 tiles' sums
// (q408Tile) on the q4016 layout, each block's sums started from -8 times
// the activations' sums, in four steps of two blocks.
func q4016VNNI(gf bool) {
	name, doc := k16Name("q40", "Q4_0", gf)
	emitK16Tile(name, doc, q4016Unit, func(k *k16Tile) {
		// The rows' float sums start at -0: the first block's FMA is then
		// its product to the bit (a product of zero keeps its sign).
		negz := ZMM()
		VPBROADCASTD(constTable("knegzero", func() []uint32 { return []uint32{0x80000000} }), negz)
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			for i := range xr {
				VMOVDQU64(negz, slot(i, k.sums))
			}
		})
		prefetchLines(k.wp, q4016Unit, 4)
		k.steps(4, 512, 8, func(st k16Step) {
			w := nibbles(st, q4016Unit, q4016Quants, gf)
			var d [2]reg.VecVirtual
			for h := range d {
				d[h] = ZMM()
				VCVTPH2PS(st.at(k.wp, 32*h, 64), d[h])
			}
			k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
				s := nibbleSums(st, w, xr)
				for i := range xr {
					fb := ZMM()
					VMOVUPS(slot(i, k.sums), fb)
					for h := range d {
						VCVTDQ2PS(s[h][i], s[h][i])
						VFMADD231PS(d[h], s[h][i], fb)
					}
					VMOVUPS(fb, slot(i, k.sums))
				}
			})
		})
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			for i, x := range xr {
				a, fb := ZMM(), ZMM()
				VMOVUPS(slot(i, k.acc), a)
				VMOVUPS(slot(i, k.sums), fb)
				VFMADD231PS_BCST(Mem{Base: x}, fb, a)
				VMOVUPS(a, slot(i, k.acc))
			}
		})
	})
}

// q5k16VNNI generates q5k16TileVNNI (or GFNI): the q5k8 tiles' sums
// (k8Tile45) on the q5k16 layout, a half sub-block's 16 products of a row
// summed from -16 times the activations' run sum and added in by one
// VPDPWSSD. The sums start at Σ_j 16*sc_j*bsum_j: the scale pairs times
// 16 by the activations' pairs of bsum.
func q5k16VNNI(gf bool) {
	name, doc := k16Name("q5k", "Q5_K", gf)
	cst := vnniConsts()
	mask0F, bit4 := cst.Offset(0), cst.Offset(4)
	orBit := ternImm(func(a, b, c bool) bool { return a || b && c })
	k45Tile(name, doc, q5k16Unit, q8kSub16, 4, 16, func(k *k16Tile, st k16Step, sc []reg.VecVirtual) {
		// vec[j][v][h]: quarter v of sub-block j, low (h = 0) or high
		// nibbles, each with its fifth bit.
		var vec [2][4][2]reg.VecVirtual
		for j := range vec {
			PREFETCHT0(st.at(k.wp, q5k16Unit+q4k16Unit+64*j, 128))
			fifth := ZMM()
			VMOVDQU64(st.at(k.wp, q4k16Unit+64*j, 128), fifth)
			for v := range vec[j] {
				off := q4k16Quants + 256*j + 64*v
				PREFETCHT0(st.w(q5k16Unit + off))
				q := ZMM()
				VMOVDQU64(st.w(off), q)
				for h := range vec[j][v] {
					var qv reg.VecVirtual
					if h == 0 {
						qv = ZMM()
						VPANDD_BCST(mask0F, q, qv)
					} else {
						qv = highNibbles(q, gf)
					}
					// The fifth bit b, moved to bit 4, ORed in.
					b, t := 2*v+h, ZMM()
					switch {
					case b < 4:
						VPSLLW(U8(4-b), fifth, t)
					case b > 4:
						VPSRLW(U8(b-4), fifth, t)
					default:
						t = fifth
					}
					VPTERNLOGD_BCST(U8(orBit), bit4, t, qv)
					vec[j][v][h] = qv
				}
			}
		}
		k.rows(func(xr []reg.Register, slot func(int, Mem) Mem) {
			sumi, q := make([]reg.VecVirtual, len(xr)), make([]reg.Register, len(xr))
			for i, x := range xr {
				sumi[i] = ZMM()
				VMOVDQU64(slot(i, k.sums), sumi[i])
				q[i] = st.base(x, 64)
			}
			for j := range vec {
				for half := 0; half < 2; half++ {
					s := make([]reg.VecVirtual, len(xr))
					for i, x := range xr {
						s[i] = ZMM()
						VPBROADCASTD(st.at(x, q8kNeg16+4*(2*j+half), 16), s[i])
					}
					for v := 2 * half; v < 2*half+2; v++ {
						for i := range xr {
							VPDPBUSD_BCST(Mem{Base: q[i], Disp: q8kQuants + 32*j + 8*v}, vec[j][v][0], s[i])
							VPDPBUSD_BCST(Mem{Base: q[i], Disp: q8kQuants + 32*j + 8*v + 4}, vec[j][v][1], s[i])
						}
					}
					for i := range xr {
						VPDPWSSD(sc[j], s[i], sumi[i])
					}
				}
			}
			for i := range xr {
				VMOVDQU64(sumi[i], slot(i, k.sums))
			}
		})
	})
}
