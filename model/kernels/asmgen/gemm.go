package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// gemmNR is the width of a GEMM tile in columns of B and C: two YMM
// vectors.
const gemmNR = 16

// genGemm generates gemmTile{mr}x16AVX2 for mr = 1..6: the register
// tiles of the training GEMM (the outer-product form: each step
// broadcasts mr values of A and multiplies them with one 16-wide row of
// B, 2*mr FMAs for 2 loads of B and mr broadcasts).
func genGemm() {
	for mr := 1; mr <= 6; mr++ {
		gemmTile(mr)
	}
}

// gemmTile generates gemmTile{mr}x16AVX2: for i < mr, j < 16,
// c[i*ldc+j] = (acc != 0 ? c[i*ldc+j] : 0) + sum_{p<k} a[i*as+p*ak] * b[p*ldb+j].
// A is read through two strides, so that the same tile serves A and its
// transpose; B and C are row-major.
func gemmTile(mr int) {
	name := fmt.Sprintf("gemmTile%dx16AVX2", mr)
	TEXT(name, NOSPLIT, "func(a *float32, as, ak int, b *float32, ldb int, c *float32, ldc int, k int, acc int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a %dx16 tile of C = A B (acc == 0) or C += A B over k steps.", name, mr))

	ar := rowPtrs(Load(Param("a"), GP64()), loadStride("as", 2), mr)
	ak := loadStride("ak", 2)
	bp := Load(Param("b"), GP64())
	ldb := loadStride("ldb", 2)
	n := Load(Param("k"), GP64())

	accs := make([][2]reg.VecVirtual, mr)
	for i := range accs {
		for h := 0; h < 2; h++ {
			accs[i][h] = YMM()
			VXORPS(accs[i][h], accs[i][h], accs[i][h])
		}
	}
	off := GP64()
	XORQ(off, off)
	countLoop("k", n, func() {
		b0, b1 := YMM(), YMM()
		VMOVUPS(Mem{Base: bp}, b0)
		VMOVUPS(Mem{Base: bp, Disp: 32}, b1)
		for i := 0; i < mr; i++ {
			t := YMM()
			VBROADCASTSS(Mem{Base: ar[i], Index: off, Scale: 1}, t)
			VFMADD231PS(b0, t, accs[i][0])
			VFMADD231PS(b1, t, accs[i][1])
		}
		ADDQ(ak, off)
		ADDQ(ldb, bp)
	})

	cp := Load(Param("c"), GP64())
	ldc := loadStride("ldc", 2)
	flag := Load(Param("acc"), GP64())
	TESTQ(flag, flag)
	JZ(LabelRef("store"))
	q := GP64()
	MOVQ(cp, q)
	for i := 0; i < mr; i++ {
		VADDPS(Mem{Base: q}, accs[i][0], accs[i][0])
		VADDPS(Mem{Base: q, Disp: 32}, accs[i][1], accs[i][1])
		if i+1 < mr {
			ADDQ(ldc, q)
		}
	}
	Label("store")
	for i := 0; i < mr; i++ {
		VMOVUPS(accs[i][0], Mem{Base: cp})
		VMOVUPS(accs[i][1], Mem{Base: cp, Disp: 32})
		if i+1 < mr {
			ADDQ(ldc, cp)
		}
	}
	VZEROUPPER()
	RET()
}
