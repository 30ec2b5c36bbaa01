package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// transpose16AVX512 generates transpose16{e}AVX512(dst, src *e, cols int):
// dst, cols rows of 16 elements, is the transpose of src, 16 rows of cols
// elements (cols even for binary16): a staged KV block's keys, sealed.
//
// One gather of 16 dwords, one per source row, reads a column of float32
// (or two adjacent columns of halves, the low half being the even one);
// a store, or two truncating ones (VPMOVDW, before and after a 16-bit
// shift), writes it as a row. The indices stay the same: the gather's
// base moves 4 bytes a step.
func transpose16AVX512(e elem) {
	name := e.name("transpose16", "AVX512")
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst, src *%s, cols int)", e.goType))
	Pragma("noescape")
	Doc(name + " sets dst[c*16+r] = src[r*cols+c] for r < 16, c < cols" + e.note("dst and src") + ".")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("cols"), GP64())

	// idx[r] = r * cols * size, the byte offset of row r.
	rowBytes := GP64()
	MOVQ(n, rowBytes)
	SHLQ(U8(e.shift), rowBytes)
	idx, v := ZMM(), ZMM()
	VPBROADCASTD(rowBytes.As32(), idx)
	VPMULLD(transposeIota(), idx, idx)
	if e.size == 2 {
		SHRQ(U8(1), n) // two columns a gather
	}
	k := K()
	Label(name + "col")
	TESTQ(n, n)
	JZ(LabelRef(name + "done"))
	KXNORW(k, k, k)
	VPGATHERDD(Mem{Base: src, Index: idx, Scale: 1}, k, v)
	if e.size == 2 {
		VPMOVDW(v, Mem{Base: dst})
		VPSRLD(U8(16), v, v)
		VPMOVDW(v, Mem{Base: dst, Disp: 32})
	} else {
		VMOVDQU32(v, Mem{Base: dst})
	}
	ADDQ(U8(64), dst)
	ADDQ(U8(4), src)
	DECQ(n)
	JMP(LabelRef(name + "col"))
	Label(name + "done")
	VZEROUPPER()
	RET()
}

var transposeIotaData Mem
var transposeIotaDone bool

// transposeIota is the constant 0, 1, ..., 15 as dwords.
func transposeIota() Mem {
	if !transposeIotaDone {
		transposeIotaData = GLOBL("transposeiota", RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			DATA(4*i, U32(uint32(i)))
		}
		transposeIotaDone = true
	}
	return transposeIotaData
}
