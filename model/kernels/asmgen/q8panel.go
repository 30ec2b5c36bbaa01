package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Q8_0 panel layout (see q8.go in the kernels package for the full story).
//
// Weights: rows in panels of 16; per panel, nb quant blocks of 512 bytes
// (block b of 32 columns: 8 vectors of 64 bytes, vector k's 32-bit lane l
// holding bytes 4k..4k+3 of row l's block, biased to uint8, q+128), then
// the scales: per block 32 bytes, the 16 rows' float16 scales (as GGUF
// stores them), padded to a whole line. At block b a panel's scales are
// at so = 512*nb - 480*b bytes past its quants.
//
// Activations: per row and block 40 bytes: the 32 int8 quants, the
// float32 scale and the int32 correction, -128 times the sum of the
// quants. A sum that starts from the correction cancels the weights' bias:
// sum (q_w+128)*q_x - 128*sum q_x = sum q_w*q_x.
const (
	panelBlockBytes = 512
	scaleBlockBytes = 32
	xBlockBytes     = 40
	xScaleOffset    = 32
	xCorrOffset     = 36
)

// scaleStep is how far a block moves the scales' offset from the quants.
const scaleStep = panelBlockBytes - scaleBlockBytes

// Panel tile shapes: at most q8PanelNR activation rows for one or two
// panels, q8PanelNR4 for four.
const (
	q8PanelNR  = 6
	q8PanelNR4 = 3
)

// q8StreamAhead is how far ahead in each of its panels' quants (and
// q8StreamAhead/16 in their scales) a tile without the caller's
// prefetching (a lone tile: 1-6 activation rows, as in decoding and narrow
// steps) prefetches: 4 blocks. Such a tile streams the weights
// faster than the core's out-of-order window alone keeps loads in flight
// for. On one core, a 768x2048 product with 2 or 3 rows takes about 10%
// less time from DRAM (2 and 8 blocks ahead did worse; 16 worse than
// none) and the same from L3; a stories110M Q8_0 step of 4 branches took
// 3.7-4.6 ms instead of 5.7-5.9, of 6 branches 4.6-5.8 instead of 7.5-7.8
// (interleaved runs on two cores).
const q8StreamAhead = 4 * panelBlockBytes

const q8PanelSig = "func(w *uint8, ldw int, x *byte, ldx int, nb int, out *float32, ldo int, pf int, pfs int, nt int)"

// q8PanelTileVNNI generates q8PanelTile{mp}x{nr}VNNI (AVX-512 VNNI): for
// the 16*mp weight rows of mp panels (ldw bytes apart) and nt*nr
// activation rows (ldx bytes apart), out[j*ldo+r] = the Q8_0 dot product
// of weight row r and activation row j over nb blocks, as nt tiles of nr
// activation rows.
//
// Lane l of a sum is row l of a panel, so a tile needs no horizontal sums:
// per block and 4-byte step it loads each panel's weight vector once,
// broadcasts each activation row's 4 quants once and does mp*nr VPDPBUSDs;
// then per pair (panel, activation row) three instructions convert the
// block's int32 sums, scale them by the weight scales times the
// activation scale and add them into float accumulators. The next block's
// sums start from a broadcast of the activation rows' corrections (a load,
// no arithmetic). 2*mp*nr accumulators: at most 2x6 and 4x3.
//
// Prefetch: with pfs != 0 the kernel prefetches mp lines per step, nine
// steps a block (one per line it reads), at w+pf, w+pf+pfs, ... (w at
// entry), so that the caller can spread the lines of the panels it will
// need next over the tiles of these. Two-panel tiles walk that range as
// two streams, from its start and its middle, both pfs a step: with one
// stream a core drew only about 10 GB/s from DRAM, as if too few lines
// were in flight (768x2048 with 16 rows on one core, weights from
// DRAM: 142-147 -> 172-178 GMAC/s; 2048x768: 153-156 -> 167-171; a
// stories110M Q8_0 16-branch step's products 4-5% faster; four streams
// did no better). With pfs == 0 a second copy of the
// loops prefetches, in tiles of two or four panels, each panel's own
// stream q8StreamAhead bytes ahead instead, and in one-panel tiles
// nothing.
func q8PanelTileVNNI(mp, nr int) {
	name := fmt.Sprintf("q8PanelTile%dx%dVNNI", mp, nr)
	dist := 0
	if mp >= 2 {
		dist = q8StreamAhead
	}
	TEXT(name, NOSPLIT, q8PanelSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes %d panels of 16 Q8_0 weight rows times nt*%d quantized activation rows.", name, mp, nr))
	if 2*mp*nr+mp+2 > 32 {
		panic(name + ": too many registers")
	}

	pa, pfs := GP64(), Load(Param("pfs"), GP64())
	Load(Param("pf"), pa)
	ADDQ(Load(Param("w"), GP64()), pa)
	var q reg.Register
	if mp == 2 {
		// The second stream's offset, half of the call's range:
		// q = pfs * 9 * nb * nt.
		q = GP64()
		Load(Param("nb"), q)
		IMULQ(pfs, q)
		IMULQ(Load(Param("nt"), GP64()), q)
		IMUL3Q(U8(9), q, q)
	}
	Label("tile")
	wr := rowPtrs(Load(Param("w"), GP64()), loadStride("ldw", 0), mp)
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nr)
	so := Load(Param("nb"), GP64())
	SHLQ(U8(9), so) // the scales, 512*nb bytes past the quants
	acc := make([][]reg.VecVirtual, mp)
	isum := make([][]reg.VecVirtual, mp)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nr)
		isum[i] = make([]reg.VecVirtual, nr)
		for j := range acc[i] {
			acc[i][j] = ZMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
			isum[i][j] = ZMM()
		}
	}
	wv := make([]reg.VecVirtual, mp)
	for i := range wv {
		wv[i] = ZMM()
	}
	xb, sc := ZMM(), ZMM()

	prefetch := func() {
		if mp == 2 {
			PREFETCHT0(Mem{Base: pa})
			PREFETCHT0(Mem{Base: pa, Index: q, Scale: 1})
			ADDQ(pfs, pa)
			return
		}
		for i := 0; i < mp; i++ {
			PREFETCHT0(Mem{Base: pa})
			ADDQ(pfs, pa)
		}
	}
	n := GP64()
	loop := func(pf bool, pre string) {
		Load(Param("nb"), n)
		countLoop(pre+"blk", n, func() {
			for j := 0; j < nr; j++ {
				for i := 0; i < mp; i++ {
					VPBROADCASTD(Mem{Base: xr[j], Disp: xCorrOffset}, isum[i][j])
				}
			}
			for k := 0; k < 8; k++ {
				if pf {
					prefetch()
				}
				for i := 0; i < mp && dist > 0 && !pf; i++ {
					PREFETCHT0(Mem{Base: wr[i], Disp: dist + 64*k})
				}
				for i := 0; i < mp; i++ {
					VMOVDQU64(Mem{Base: wr[i], Disp: 64 * k}, wv[i])
				}
				for j := 0; j < nr; j++ {
					VPBROADCASTD(Mem{Base: xr[j], Disp: 4 * k}, xb)
					for i := 0; i < mp; i++ {
						VPDPBUSD(xb, wv[i], isum[i][j])
					}
				}
			}
			if pf {
				prefetch()
			}
			for i := 0; i < mp && dist > 0 && !pf; i++ {
				PREFETCHT0(Mem{Base: wr[i], Index: so, Scale: 1, Disp: dist / 16})
			}
			for i := 0; i < mp; i++ {
				VCVTPH2PS(Mem{Base: wr[i], Index: so, Scale: 1}, wv[i])
			}
			for j := 0; j < nr; j++ {
				for i := 0; i < mp; i++ {
					VCVTDQ2PS(isum[i][j], isum[i][j])
					VMULPS_BCST(Mem{Base: xr[j], Disp: xScaleOffset}, wv[i], sc)
					VFMADD231PS(sc, isum[i][j], acc[i][j])
				}
			}
			for _, p := range wr {
				ADDQ(U32(panelBlockBytes), p)
			}
			SUBQ(U32(scaleStep), so)
			for _, p := range xr {
				ADDQ(U32(xBlockBytes), p)
			}
		})
	}
	TESTQ(pfs, pfs)
	JZ(LabelRef("nopf"))
	loop(true, "pf")
	JMP(LabelRef("store"))
	Label("nopf")
	loop(false, "")
	Label("store")
	outp := Load(Param("out"), GP64())
	ldo := loadStride("ldo", 2)
	for j := 0; j < nr; j++ {
		for i := 0; i < mp; i++ {
			VMOVUPS(acc[i][j], Mem{Base: outp, Disp: 64 * i})
		}
		if j+1 < nr {
			ADDQ(ldo, outp)
		}
	}
	nextTile(nr)
}

func genQ8() {
	for _, mp := range []int{1, 2, 4} {
		nrMax := q8PanelNR
		if mp == 4 {
			nrMax = q8PanelNR4
		}
		for nr := 1; nr <= nrMax; nr++ {
			q8PanelTileVNNI(mp, nr)
		}
	}
	for nr := 1; nr <= q8NRAVX2; nr++ {
		q8PanelTileAVX2(nr)
	}
	quantQ8VNNI()
	quantQ8AVX2()
	quantQ8KAVX2()
}

// q8NRAVX2 is the most activation rows of an AVX2 tile.
const q8NRAVX2 = 3

var avx2Consts Mem
var avx2ConstsDone bool

// q8PanelTileAVX2 generates q8PanelTile1x{nr}AVX2, q8PanelTile for AVX2
// on one panel, as two halves of 8 rows (the low and high 32 bytes of each
// 64). Without VPDPBUSD it uses the sign trick, |w| unsigned times
// sign(w)*x signed with VPMADDUBSW and VPMADDWD, on the unbiased weights
// (the biased ones would overflow VPMADDUBSW's int16 sums), so the sums
// start from zero. ldw, pf and pfs are ignored.
func q8PanelTileAVX2(nr int) {
	name := fmt.Sprintf("q8PanelTile1x%dAVX2", nr)
	TEXT(name, NOSPLIT, q8PanelSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a panel of 16 Q8_0 weight rows times nt*%d quantized activation rows.", name, nr))
	if !avx2ConstsDone {
		// 32 bytes of 0x80, then 16 int16 ones.
		avx2Consts = GLOBL("q8avx2consts", RODATA|NOPTR)
		for i := 0; i < 8; i++ {
			DATA(4*i, U32(0x80808080))
		}
		for i := 0; i < 8; i++ {
			DATA(32+4*i, U32(0x00010001))
		}
		avx2ConstsDone = true
	}
	cst := GP64()
	LEAQ(avx2Consts, cst)
	Label("tile")
	w := Load(Param("w"), GP64())
	xr := rowPtrs(Load(Param("x"), GP64()), loadStride("ldx", 0), nr)
	so := Load(Param("nb"), GP64())
	SHLQ(U8(9), so)
	var acc, isum [2][]reg.VecVirtual // by half
	for h := range acc {
		acc[h], isum[h] = make([]reg.VecVirtual, nr), make([]reg.VecVirtual, nr)
		for j := 0; j < nr; j++ {
			acc[h][j], isum[h][j] = YMM(), YMM()
			VXORPS(acc[h][j], acc[h][j], acc[h][j])
		}
	}
	ws, aw, t := YMM(), YMM(), YMM()
	n := Load(Param("nb"), GP64())
	countLoop("blk", n, func() {
		for h := range isum {
			for j := range isum[h] {
				VPXOR(isum[h][j], isum[h][j], isum[h][j])
			}
		}
		for k := 0; k < 8; k++ {
			for h := 0; h < 2; h++ {
				VMOVDQU(Mem{Base: w, Disp: 64*k + 32*h}, ws)
				VPXOR(Mem{Base: cst}, ws, ws) // remove the +128 bias
				VPABSB(ws, aw)
				for j := 0; j < nr; j++ {
					VPBROADCASTD(Mem{Base: xr[j], Disp: 4 * k}, t)
					VPSIGNB(ws, t, t)
					VPMADDUBSW(t, aw, t)
					VPMADDWD(Mem{Base: cst, Disp: 32}, t, t)
					VPADDD(t, isum[h][j], isum[h][j])
				}
			}
		}
		for h := 0; h < 2; h++ {
			VCVTPH2PS(Mem{Base: w, Index: so, Scale: 1, Disp: 16 * h}, ws) // 8 scales
			for j := 0; j < nr; j++ {
				VCVTDQ2PS(isum[h][j], isum[h][j])
				VBROADCASTSS(Mem{Base: xr[j], Disp: xScaleOffset}, t)
				VMULPS(ws, t, t)
				VFMADD231PS(t, isum[h][j], acc[h][j])
			}
		}
		ADDQ(U32(panelBlockBytes), w)
		SUBQ(U32(scaleStep), so)
		for _, p := range xr {
			ADDQ(U32(xBlockBytes), p)
		}
	})
	outp := Load(Param("out"), GP64())
	ldo := loadStride("ldo", 2)
	for j := 0; j < nr; j++ {
		VMOVUPS(acc[0][j], Mem{Base: outp})
		VMOVUPS(acc[1][j], Mem{Base: outp, Disp: 32})
		if j+1 < nr {
			ADDQ(ldo, outp)
		}
	}
	nextTile(nr)
}

// quantQ8VNNI generates quantQ8VNNI(x *float32, nb int, dst *byte): it
// quantizes a row of nb blocks of 32 floats into the activation layout:
// scale d = max|x|/127, quants round-half-even(x * (1/d)) and the
// correction -128 * sum of the quants. Four blocks at a time
// (quantQ8Four), then one.
func quantQ8VNNI() {
	name := "quantQ8VNNI"
	TEXT(name, NOSPLIT, "func(x *float32, nb int, dst *byte)")
	Pragma("noescape")
	Doc(name + " quantizes a row of float32 blocks into the Q8 activation layout.")
	x := Load(Param("x"), GP64())
	dst := Load(Param("dst"), GP64())
	absMask := broadcastConst(isaAVX512, 0x7fffffff)
	zero := ZMM()
	VPXORD(zero, zero, zero)
	g := GP32()
	c127 := XMM()
	MOVL(U32(0x42fe0000), g) // 127.0
	VMOVD(g, c127)
	one := XMM()
	MOVL(U32(0x3f800000), g) // 1.0
	VMOVD(g, one)

	n := Load(Param("nb"), GP64())
	quantQ8Four(x, dst, n, absMask, zero, c127, one)
	countLoop("blk", n, func() {
		v0, v1 := ZMM(), ZMM()
		VMOVUPS(Mem{Base: x}, v0)
		VMOVUPS(Mem{Base: x, Disp: 64}, v1)
		m, a1 := ZMM(), ZMM()
		VANDPS(absMask, v0, m)
		VANDPS(absMask, v1, a1)
		VMAXPS(a1, m, m)
		hy, hx := maxToLane0(m)
		d := XMM()
		VDIVSS(c127, m.AsX(), d) // d = amax/127
		k := K()
		VCMPSS(U8(4), zero.AsX(), d, k) // d != 0 (or NaN)
		id := XMM()
		VDIVSS_Z(d, one, k, id) // id = 1/d, or 0
		idv := ZMM()
		VBROADCASTSS(id, idv)
		VMULPS(idv, v0, v0)
		VMULPS(idv, v1, v1)
		VCVTPS2DQ(v0, v0) // round half to even (MXCSR default)
		VCVTPS2DQ(v1, v1)
		VPMOVDB(v0, Mem{Base: dst})
		VPMOVDB(v1, Mem{Base: dst, Disp: 16})
		VMOVSS(d, Mem{Base: dst, Disp: xScaleOffset})
		// The correction: -128 times the sum of the 32 quants.
		VPADDD(v1, v0, v0)
		VEXTRACTI64X4(U8(1), v0, hy)
		VPADDD(hy, v0.AsY(), v0.AsY())
		VEXTRACTI32X4(U8(1), v0.AsY(), hx)
		VPADDD(hx, v0.AsX(), v0.AsX())
		VPSHUFD(U8(0x4E), v0.AsX(), hx)
		VPADDD(hx, v0.AsX(), v0.AsX())
		VPSHUFD(U8(0xB1), v0.AsX(), hx)
		VPADDD(hx, v0.AsX(), v0.AsX())
		VPSLLD(U8(7), v0.AsX(), v0.AsX())
		VPSUBD(v0.AsX(), zero.AsX(), v0.AsX())
		VMOVD(v0.AsX(), Mem{Base: dst, Disp: xCorrOffset})
		ADDQ(U32(128), x)
		ADDQ(U32(xBlockBytes), dst)
	})
	VZEROUPPER()
	RET()
}

// quantQ8Four emits quantQ8VNNI's loop over four blocks at a time, while
// n (blocks left) is at least 4; it moves x, dst and n on. The one-block
// loop spends most of its time in horizontal reductions (a maximum and a
// sum, four shuffles each) and in two scalar divisions a block; here the
// four blocks' reductions share their shuffles (VSHUFF32X4 across two
// blocks' halves, then within 128-bit lanes: two shuffles a block for
// each reduction) and one VDIVPS divides for all four. The results are
// bit for bit the same: a maximum and an integer sum do not depend on
// the order, and each block's scale and its inverse come from the same
// single-precision divisions. BenchmarkQuantizeQ8/1x768: 204 -> 139 ns.
func quantQ8Four(x, dst, n reg.Register, absMask, zero, c127, one reg.VecVirtual) {
	idx := GLOBL("quantlane0", RODATA|NOPTR) // VPERMD: lane 0 of each 128-bit lane
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(uint32(4*(i%4))))
	}
	tmp := AllocLocal(32) // the four scales, then the four corrections
	c127v, onev := XMM(), XMM()
	VBROADCASTSS(c127, c127v)
	VBROADCASTSS(one, onev)

	// reduce4 leaves in each 128-bit lane i of the result the reduction
	// (op) of all 16 lanes of v[i], in all four of its elements.
	reduce4 := func(v [4]reg.VecVirtual, op func(a, b, dst reg.VecVirtual), integer bool) reg.VecVirtual {
		pair := func(a, b reg.VecVirtual) reg.VecVirtual {
			lo, hi := ZMM(), ZMM()
			VSHUFF32X4(U8(0x44), b, a, lo) // a.l0 a.l1 b.l0 b.l1
			VSHUFF32X4(U8(0xEE), b, a, hi) // a.l2 a.l3 b.l2 b.l3
			op(lo, hi, lo)
			return lo
		}
		ab, cd := pair(v[0], v[1]), pair(v[2], v[3])
		lo, hi := ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), cd, ab, lo) // ab.l0 ab.l2 cd.l0 cd.l2
		VSHUFF32X4(U8(0xDD), cd, ab, hi) // ab.l1 ab.l3 cd.l1 cd.l3
		op(lo, hi, lo)
		t := ZMM()
		if integer {
			VPSHUFD(U8(0x4E), lo, t)
		} else {
			VPERMILPS(U8(0x4E), lo, t)
		}
		op(lo, t, lo)
		if integer {
			VPSHUFD(U8(0xB1), lo, t)
		} else {
			VPERMILPS(U8(0xB1), lo, t)
		}
		op(lo, t, lo)
		return lo
	}

	lane0 := ZMM()
	VMOVDQU32(idx, lane0)
	Label("four")
	CMPQ(n, U8(4))
	JB(LabelRef("fourdone"))
	var v [4][2]reg.VecVirtual
	var m [4]reg.VecVirtual
	for b := range 4 {
		v[b] = [2]reg.VecVirtual{ZMM(), ZMM()}
		VMOVUPS(Mem{Base: x, Disp: 128 * b}, v[b][0])
		VMOVUPS(Mem{Base: x, Disp: 128*b + 64}, v[b][1])
		m[b] = ZMM()
		a1 := ZMM()
		VANDPS(absMask, v[b][0], m[b])
		VANDPS(absMask, v[b][1], a1)
		VMAXPS(a1, m[b], m[b])
	}
	mx := reduce4(m, func(a, b, d reg.VecVirtual) { VMAXPS(b, a, d) }, false)
	d := XMM()
	VPERMD(mx, lane0, mx)      // the four maxima in lanes 0-3
	VDIVPS(c127v, mx.AsX(), d) // d = amax/127
	k := K()
	VCMPPS(U8(4), zero.AsX(), d, k) // d != 0 (or NaN)
	id := XMM()
	VDIVPS_Z(d, onev, k, id) // 1/d, or 0
	VMOVUPS(d, tmp)
	VMOVUPS(id, tmp.Offset(16))
	g := GP32()
	for b := range 4 { // the scales
		MOVL(tmp.Offset(4*b), g)
		MOVL(g, Mem{Base: dst, Disp: xBlockBytes*b + xScaleOffset})
	}
	var s [4]reg.VecVirtual
	for b := range 4 {
		idv := ZMM()
		VBROADCASTSS(tmp.Offset(16+4*b), idv)
		VMULPS(idv, v[b][0], v[b][0])
		VMULPS(idv, v[b][1], v[b][1])
		VCVTPS2DQ(v[b][0], v[b][0]) // round half to even (MXCSR default)
		VCVTPS2DQ(v[b][1], v[b][1])
		VPMOVDB(v[b][0], Mem{Base: dst, Disp: xBlockBytes * b})
		VPMOVDB(v[b][1], Mem{Base: dst, Disp: xBlockBytes*b + 16})
		s[b] = v[b][0]
		VPADDD(v[b][1], s[b], s[b])
	}
	sum := reduce4(s, func(a, b, d reg.VecVirtual) { VPADDD(b, a, d) }, true)
	VPERMD(sum, lane0, sum)
	VPSLLD(U8(7), sum.AsX(), sum.AsX()) // -128 times the sums
	VPSUBD(sum.AsX(), zero.AsX(), sum.AsX())
	VMOVDQU(sum.AsX(), tmp) // over the scales, stored already
	for b := range 4 {
		MOVL(tmp.Offset(4*b), g)
		MOVL(g, Mem{Base: dst, Disp: xBlockBytes*b + xCorrOffset})
	}
	ADDQ(U32(4*128), x)
	ADDQ(U32(4*xBlockBytes), dst)
	SUBQ(U8(4), n)
	JMP(LabelRef("four"))
	Label("fourdone")
}

// nextTile ends a tile kernel that does nt tiles of nr activation rows:
// while tiles remain it moves x and out on by nr rows (kept in their
// argument slots, as the loops need every register) and jumps back to
// the label tile.
func nextTile(nr int) {
	t := Load(Param("nt"), GP64())
	DECQ(t)
	JZ(LabelRef("done"))
	Store(t, Param("nt"))
	x, step := Load(Param("x"), GP64()), Load(Param("ldx"), GP64())
	IMUL3Q(U8(nr), step, step)
	ADDQ(step, x)
	Store(x, Param("x"))
	o := Load(Param("out"), GP64())
	Load(Param("ldo"), step)
	IMUL3Q(U8(4*nr), step, step)
	ADDQ(step, o)
	Store(o, Param("out"))
	JMP(LabelRef("tile"))
	Label("done")
	VZEROUPPER()
	RET()
}

// quantQ8AVX2 generates quantQ8AVX2(x *float32, nb int, dst *byte) bool,
// quantQ8VNNI's AVX2 counterpart, a block of 32 at a time: the same
// scale, quants (VCVTPS2DQ rounds half to even) and correction, bit for
// bit what quantizeQ8RowGo writes for finite input. It reports whether
// every value, and every block's 1/d, was finite; where one was not (a
// NaN or an infinity, or a block whose largest value is subnormal, on
// which the vector conversion and the Go one part ways) the caller
// quantizes the row again in Go.
func quantQ8AVX2() {
	name := "quantQ8AVX2"
	TEXT(name, NOSPLIT, "func(x *float32, nb int, dst *byte) bool")
	Pragma("noescape")
	Doc(name + " quantizes a row of float32 blocks into the Q8 activation layout, and reports whether it was finite.")
	x, dst, q := quantPrologue()
	absMask, inf, perm, c127, one, bad := q.absMask, q.inf, q.perm, q.c127, q.one, q.bad
	n := Load(Param("nb"), GP64())
	countLoop("blk", n, func() {
		v := make([]reg.VecVirtual, 4)
		var m reg.VecVirtual
		for k := range v {
			v[k] = YMM()
			VMOVUPS(Mem{Base: x, Disp: 32 * k}, v[k])
			a := YMM()
			VANDPS(absMask, v[k], a)
			c := YMM()
			VCMPPS(U8(5), inf, a, c) // !(|x| < Inf): Inf or NaN
			VORPS(c, bad, bad)
			if k == 0 {
				m = a
			} else {
				VMAXPS(a, m, m)
			}
		}
		d, idv := q8BlockScale(m, c127, one, inf, bad)
		t, z := XMM(), XMM()
		VXORPS(z, z, z)
		for k := range v {
			VMULPS(idv, v[k], v[k])
			VCVTPS2DQ(v[k], v[k])
		}
		// The correction: -128 times the sum of the quants.
		s := YMM()
		VPADDD(v[1], v[0], s)
		VPADDD(v[2], s, s)
		VPADDD(v[3], s, s)
		VPACKSSDW(v[1], v[0], v[0])
		VPACKSSDW(v[3], v[2], v[2])
		VPACKSSWB(v[2], v[0], v[0])
		pv := YMM()
		VMOVDQU(perm, pv)
		VPERMD(v[0], pv, v[0])
		VMOVDQU(v[0], Mem{Base: dst})
		VMOVSS(d, Mem{Base: dst, Disp: xScaleOffset})
		sx := XMM()
		VEXTRACTI128(U8(1), s, sx)
		VPADDD(sx, s.AsX(), sx)
		VPSHUFD(U8(0x4E), sx, t)
		VPADDD(t, sx, sx)
		VPSHUFD(U8(0xB1), sx, t)
		VPADDD(t, sx, sx)
		VPSLLD(U8(7), sx, sx)
		VPSUBD(sx, z, sx)
		VMOVD(sx, Mem{Base: dst, Disp: xCorrOffset})
		ADDQ(U32(128), x)
		ADDQ(U32(xBlockBytes), dst)
	})
	quantEpilogue(bad)
}

// quantQ8KAVX2 generates quantQ8KAVX2(x *float32, nb int, dst *byte) bool:
// quantizeQ8KRow's work for nb blocks of 256 (the Q8_K layout: float32 d,
// 256 quants, 16 int16 sums of runs of 16, 8 int32 sums of runs of 32,
// and those sums' forms for the VNNI tiles, and the runs of 8's),
// bit for bit, with quantQ8AVX2's report of non-finite input (or a
// subnormal block maximum), where the caller redoes the row in Go.
func quantQ8KAVX2() {
	name := "quantQ8KAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, nb int, dst *byte) bool")
	Pragma("noescape")
	Doc(name + " quantizes a row of float32 blocks of 256 into the Q8_K layout, and reports whether it was finite.")
	x, dst, q := quantPrologue()
	absMask, inf, perm, c127, one, bad := q.absMask, q.inf, q.perm, q.c127, q.one, q.bad
	n := Load(Param("nb"), GP64())
	countLoop("blk", n, func() {
		var m reg.VecVirtual
		for k := 0; k < 32; k++ {
			a := YMM()
			VANDPS(Mem{Base: x, Disp: 32 * k}, absMask, a)
			c := YMM()
			VCMPPS(U8(5), inf, a, c) // Inf or NaN
			VORPS(c, bad, bad)
			if k == 0 {
				m = a
			} else {
				VMAXPS(a, m, m)
			}
		}
		d, idv := q8BlockScale(m, c127, one, inf, bad)
		VMOVSS(d, Mem{Base: dst})
		pv := YMM()
		VMOVDQU(perm, pv)
		zero := XMM()
		VPXOR(zero, zero, zero)
		// Groups of 32 in pairs: quants, and the pair's four run sums.
		for k := 0; k < 8; k += 2 {
			var runs [2]reg.VecVirtual
			for e := 0; e < 2; e++ {
				v := make([]reg.VecVirtual, 4)
				for i := range v {
					v[i] = YMM()
					VMULPS(Mem{Base: x, Disp: 128*(k+e) + 32*i}, idv, v[i])
					VCVTPS2DQ(v[i], v[i])
				}
				// The runs of 8 (one a vector) summed, times -32.
				t1, t2 := YMM(), YMM()
				VPHADDD(v[1], v[0], t1)
				VPHADDD(v[3], v[2], t2)
				VPHADDD(t2, t1, t1)
				r8 := XMM()
				VEXTRACTI128(U8(1), t1, r8)
				VPADDD(r8, t1.AsX(), r8)
				VPSLLD(U8(5), r8, r8)
				VPSUBD(r8, zero, r8)
				VMOVDQU(r8, Mem{Base: dst, Disp: q8kNeg32 + 16*(k+e)})
				a, b := YMM(), YMM()
				VPADDD(v[1], v[0], a) // run 2(k+e)
				VPADDD(v[3], v[2], b) // run 2(k+e)+1
				VPHADDD(b, a, a)
				runs[e] = a
				VPACKSSDW(v[1], v[0], v[0])
				VPACKSSDW(v[3], v[2], v[2])
				VPACKSSWB(v[2], v[0], v[0])
				VPERMD(v[0], pv, v[0])
				VMOVDQU(v[0], Mem{Base: dst, Disp: q8kQuants + 32*(k+e)})
			}
			VPHADDD(runs[1], runs[0], runs[0])
			r := XMM()
			VEXTRACTI128(U8(1), runs[0], r)
			VPADDD(r, runs[0].AsX(), r) // runs 2k .. 2k+3, int32
			n16 := XMM()
			VPSLLD(U8(4), r, n16)
			VPSUBD(n16, zero, n16)
			VMOVDQU(n16, Mem{Base: dst, Disp: q8kNeg16 + 8*k})
			s32 := XMM()
			VPHADDD(r, r, s32) // runs of 32: k, k+1
			VMOVQ(s32, Mem{Base: dst, Disp: q8kSubSums + 4*k})
			n8, w := XMM(), XMM()
			VPSLLD(U8(3), s32, n8)
			VPSUBD(n8, zero, n8)
			VMOVQ(n8, Mem{Base: dst, Disp: q8kNeg8 + 4*k})
			VPACKSSDW(s32, s32, w)
			VMOVD(w, Mem{Base: dst, Disp: q8kSub16 + 2*k})
			VPSLLW(U8(3), w, w)
			VMOVD(w, Mem{Base: dst, Disp: q8kSub16x8 + 2*k})
			VPACKSSDW(r, r, r)
			VMOVQ(r, Mem{Base: dst, Disp: q8kSums + 4*k})
		}
		ADDQ(U32(1024), x)
		ADDQ(U32(q8kBlock), dst)
	})
	quantEpilogue(bad)
}

// q8BlockScale emits an activation block's scale from the vector m of
// its lanes' largest magnitudes: d = max/127 (scalar) and idv = 1/d, or 0
// where d is 0, in every lane; where 1/d overflows (a subnormal maximum)
// it sets bad's lanes, as the callers do for non-finite input.
func q8BlockScale(m, c127, one, inf, bad reg.VecVirtual) (d, idv reg.VecVirtual) {
	h, t := XMM(), XMM()
	VEXTRACTF128(U8(1), m, h)
	VMAXPS(h, m.AsX(), h)
	VSHUFPS(U8(0x4E), h, h, t)
	VMAXPS(t, h, h)
	VSHUFPS(U8(0xB1), h, h, t)
	VMAXPS(t, h, h)
	d = XMM()
	VDIVSS(c127, h, d) // d = amax/127
	z, nz := XMM(), XMM()
	VXORPS(z, z, z)
	VCMPSS(U8(4), z, d, nz) // d != 0
	id := XMM()
	VDIVSS(d, one, id)
	VANDPS(nz, id, id) // 1/d, or 0
	idv = YMM()
	VBROADCASTSS(id, idv)
	// 1/d overflows for a subnormal maximum: the Go code's rounding of
	// the products, infinite or NaN, is not VCVTPS2DQ's either.
	ci := YMM()
	VCMPPS(U8(5), inf, idv, ci)
	VORPS(ci, bad, bad)
	return d, idv
}

// quantConsts are the AVX2 quantizers' constants: |x| mask, +Inf, the
// VPERMD order after the packs, 127 and 1 (scalars), and the vector whose
// lanes flag non-finite input.
type quantConsts struct {
	absMask, inf, c127, one, bad reg.VecVirtual
	perm                         Mem
}

// quantPrologue loads an AVX2 quantizer's pointers x and dst and sets up
// its constants.
func quantPrologue() (x, dst reg.Register, q quantConsts) {
	x = Load(Param("x"), GP64())
	dst = Load(Param("dst"), GP64())
	q.absMask = broadcastConst(isaAVX2, 0x7fffffff)
	q.inf = broadcastConst(isaAVX2, 0x7f800000)
	q.perm = constTable("quantq8perm", func() []uint32 { return []uint32{0, 4, 1, 5, 2, 6, 3, 7} }) // VPERMD after the packs
	g := GP32()
	q.c127, q.one = XMM(), XMM()
	MOVL(U32(0x42fe0000), g) // 127.0
	VMOVD(g, q.c127)
	MOVL(U32(0x3f800000), g) // 1.0
	VMOVD(g, q.one)
	q.bad = YMM()
	VXORPS(q.bad, q.bad, q.bad)
	return x, dst, q
}

// quantEpilogue returns whether no lane of bad was set.
func quantEpilogue(bad reg.VecVirtual) {
	ok := GP32()
	VMOVMSKPS(bad, ok)
	TESTL(ok, ok)
	r := GP8()
	SETEQ(r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
