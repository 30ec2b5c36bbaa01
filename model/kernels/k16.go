package kernels

import (
	"encoding/binary"
	"math"
)

// On CPUs with AVX-512 VNNI, Q4_K matrices are regrouped sixteen rows at
// a time instead of eight (the q4k16 layout), for the VNNI tiles: one
// 64-byte load is four weights of sixteen rows, one ZMM register, with
// no inserting of halves, and the sub-blocks' scales and mins are paired
// for VPDPWSSD. Per pair of groups (rows 16p..16p+15) and super-block a
// unit of q4k16Unit bytes: the sixteen rows' float16 d (2r) and dmin
// (32+2r); the 6-bit scales paired by sub-blocks, a byte each (scale of
// sub-block j = 2p+h, row r at 64+32p+2r+h); the mins likewise at 192;
// then the nibbles, 256 bytes a sub-block: for quarter v of sub-block j
// the 64 bytes at 320+256j+64v, bytes 4r..4r+3 holding row r's weights
// 8v..8v+3 in their low nibbles and 8v+4..8v+7 in their high ones. A
// unit takes the bytes of two q4k8 units (2.8% more than the file), so a
// pair lies where its two groups would; a last group of eight rows (rows
// not a multiple of 16) stays in the q4k8 layout, where it would lie.
//
// The tiles (asmgen/k16.go) sum a sub-block's 32 products of a row in one
// int32 that starts from -8 times the activations' sum (the Q8_K block
// holds it): Σ (q-8)·y, within ±32·8·127, fits in an int16, so one
// VPDPWSSD by the scale adds it in; the sub-blocks' 8·Σ y terms are added
// back by four VPDPWSSD of the scale pairs by 8·Σ y (the Q8_K block
// holds those too) before them. The integer sums are the q4k8 tiles', so
// the products are bit for bit the AVX2 tiles'.
const (
	q4k16Unit   = 2 * q4k8Unit
	q4k16DMin   = 32
	q4k16Scales = 64
	q4k16Mins   = 192
	q4k16Quants = 320
)

// useK16 is whether new K-quant matrices take the 16-row layouts: where
// the VNNI tiles run (tests turn it off to build the eight-row layouts'
// matrices on such machines too).
var useK16 = k16Tiles

// repackQ4K16 writes the q4k16 unit of sixteen rows' super-blocks, the
// first at src[0:144] and the others stride bytes apart.
func repackQ4K16(dst, src []byte, stride int) {
	var u [q4k8Unit]byte
	repackK16(dst, src, stride, u[:], repackQ4K8, putK16Group)
}

// repackK16 writes a 16-row layout's unit dst of sixteen rows'
// super-blocks (the first at src, the others stride bytes apart): for
// each group h of eight rows, pack8 writes their eight-row unit into u
// (cleared first) and put moves its bytes into their places in dst.
func repackK16(dst, src []byte, stride int, u []byte, pack8 func(dst, src []byte, stride int), put func(dst, u []byte, h int)) {
	for h := range 2 {
		clear(u)
		pack8(u, src[8*h*stride:], stride)
		put(dst, u, h)
	}
}

// putK16Group copies the rows of the q4k8 unit u (or the q4k8 part of a
// q5k8 unit) into their places in group h of the q4k16 unit dst.
func putK16Group(dst, u []byte, h int) {
	for r := range 8 {
		l := 8*h + r
		copy(dst[2*l:2*l+2], u[2*r:])
		copy(dst[q4k16DMin+2*l:q4k16DMin+2*l+2], u[16+2*r:])
		for j := range 8 {
			dst[q4k16Scales+32*(j/2)+2*l+j%2] = u[q4k8Scales+8*j+r]
			dst[q4k16Mins+32*(j/2)+2*l+j%2] = u[q4k8Mins+16*(j/2)+2*r+j&1]
			for v := range 4 {
				copy(dst[q4k16Quants+256*j+64*v+4*l:][:4], u[q4k8Quants+128*j+32*v+4*r:])
			}
		}
	}
}

// q4k16Weight returns row r%16's scale, min and quant i of sub-block j
// from its pair's unit u.
func q4k16Weight(u []byte, r, j, i int) (sc, mn byte, q byte) {
	sc = u[q4k16Scales+32*(j/2)+2*r+j%2]
	mn = u[q4k16Mins+32*(j/2)+2*r+j%2]
	return sc, mn, quarterNibble(u[q4k16Quants+256*j:], 64, r, i)
}

// kUnit returns the unit holding super-block b of row r of a matrix in
// an eight-row layout (unit8 bytes a group) or a 16-row one (twice that a
// pair), the row's lane l in it, and whether it is a pair's (else a
// group's: the eight-row layout's, or the last group of a 16-row
// layout's matrix whose rows are not a multiple of 16).
func (m *Mat) kUnit(r, b, unit8 int) (u []byte, l int, pair bool) {
	nb := m.Cols / QKBlockSize
	if m.k16 && r < m.Rows/16*16 {
		return m.kq[(r/16*nb+b)*2*unit8:][:2*unit8], r % 16, true
	}
	return m.kq[(r/8*nb+b)*unit8:][:unit8], r % 8, false
}

// k45Row dequantizes row r of a Q4_K or Q5_K matrix in an eight- or
// 16-row layout into dst: unit8 bytes a group, weight8 and weight16 the
// layouts' accessors.
func (m *Mat) k45Row(dst []float32, r, unit8 int, weight8, weight16 func(u []byte, r, j, i int) (sc, mn, q byte)) {
	for b := 0; b < m.Cols/QKBlockSize; b++ {
		u, l, pair := m.kUnit(r, b, unit8)
		weight, dm := weight8, 16
		if pair {
			weight, dm = weight16, q4k16DMin
		}
		d := HalfToFloat(binary.LittleEndian.Uint16(u[2*l:]))
		dmin := HalfToFloat(binary.LittleEndian.Uint16(u[dm+2*l:]))
		for j := range 8 {
			for i := range 32 {
				sc, mn, q := weight(u, l, j, i)
				dst[b*QKBlockSize+32*j+i] = d*float32(sc)*float32(q) - dmin*float32(mn)
			}
		}
	}
}

// k45DotAt is k45DotGo with the dmin's offset dm in a unit.
func k45DotAt(w []byte, l int, y []byte, nb, unit, dm int, weight func(u []byte, r, j, i int) (sc, mn, q byte)) float32 {
	w = w[: nb*unit : nb*unit]
	var sum float32
	for b := 0; b < nb; b++ {
		u, yb := w[b*unit:], y[b*q8kBlockBytes:]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		d := HalfToFloat(binary.LittleEndian.Uint16(u[2*l:])) * dy
		dmin := HalfToFloat(binary.LittleEndian.Uint16(u[dm+2*l:])) * dy
		var si, mi int32
		for j := range 8 {
			var s int32
			var sc, mn byte
			for i := range 32 {
				var q byte
				sc, mn, q = weight(u, l, j, i)
				s += int32(q) * int32(int8(yb[q8kQuantOff+32*j+i]))
			}
			si += int32(sc) * s
			bs := int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+4*j:]))) + int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+4*j+2:])))
			mi += int32(mn) * bs
		}
		sum += d*float32(si) - dmin*float32(mi)
	}
	return sum
}

// Q6_K matrices take the q6k16 layout where the VNNI tiles have GFNI
// (k16Q6): per pair of groups and super-block a unit of q6k16Unit bytes
// (two q6k8 units' bytes, the file's size): the sixteen rows' float16 d
// (2r); the int8 scales paired by runs (runs 2p and 2p+1 of row r at
// 32+32p+2r); then per run g of 16 weights 192 bytes at 288+192g, three
// 64-byte vectors V0, V1, V2: byte 4r+i of Vt holds in its low six bits
// the 6-bit value of row r's weight 16g+4t+i, and in its top two bits
// bits 2t and 2t+1 of the value of weight 16g+12+i. So three masks give
// three vectors of values and three GF2P8AFFINEQB moves and an OR the
// fourth. The tiles sum each run's halves of eight products in an int32
// that starts from -32 times the activations' sum of the half (the Q8_K
// block holds it): Σ (q-32)·y, within ±8·32·127, fits in an int16, and
// one VPDPWSSD by the run's scale adds it in.
const (
	q6k16Unit   = 2 * q6k8Unit
	q6k16Scales = 32
	q6k16Quants = 288
)

// k16Q6 is whether new Q6_K matrices take the q6k16 layout.
func k16Q6() bool { return useK16 && (hasGFNI || !k16Tiles) }

// repackQ6K16 writes the q6k16 unit of sixteen rows' super-blocks, the
// first at src[0:210] and the others stride bytes apart.
func repackQ6K16(dst, src []byte, stride int) {
	var q [QKBlockSize]byte
	for l := range 16 {
		blk := src[l*stride : l*stride+q6kBlockBytes]
		copy(dst[2*l:2*l+2], blk[208:210])
		q6kValues(blk, &q)
		for g := range 16 {
			dst[q6k16Scales+32*(g/2)+2*l+g%2] = blk[192+g]
			u := dst[q6k16Quants+192*g:]
			v := q[16*g : 16*g+16]
			for t := range 3 {
				for i := range 4 {
					u[64*t+4*l+i] = v[4*t+i] | v[12+i]>>(2*t)&3<<6
				}
			}
		}
	}
}

// q6k16Value returns the 6-bit value (0..63) and the scale of weight e of
// row r of a pair's q6k16 unit u.
func q6k16Value(u []byte, r, e int) (q int, sc int8) {
	g, t, i := e/16, e%16/4, e%4
	w := u[q6k16Quants+192*g:]
	sc = int8(u[q6k16Scales+32*(g/2)+2*r+g%2])
	if t < 3 {
		return int(w[64*t+4*r+i] & 63), sc
	}
	for k := range 3 {
		q |= int(w[64*k+4*r+i]>>6) << (2 * k)
	}
	return q, sc
}

// q6k8Row dequantizes row r of a Q6_K matrix in the q6k8 or q6k16
// layout into dst.
func (m *Mat) q6k8Row(dst []float32, r int) {
	for b := 0; b < m.Cols/QKBlockSize; b++ {
		u, l, pair := m.kUnit(r, b, q6k8Unit)
		value := q6k8Value
		if pair {
			value = q6k16Value
		}
		d := HalfToFloat(binary.LittleEndian.Uint16(u[2*l:]))
		for e := range QKBlockSize {
			q, sc := value(u, l, e)
			dst[b*QKBlockSize+e] = d * float32(sc) * float32(q-32)
		}
	}
}

// q6kDotAt is q6kDotGo for row l of a group or pair in an eight- or
// 16-row layout (unit bytes a unit, value its accessor), w its units.
func q6kDotAt(w []byte, l int, y []byte, nb, unit int, value func(u []byte, r, e int) (int, int8)) float32 {
	w = w[: nb*unit : nb*unit]
	var sum float32
	for b := 0; b < nb; b++ {
		u, yb := w[b*unit:], y[b*q8kBlockBytes:]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		d := HalfToFloat(binary.LittleEndian.Uint16(u[2*l:])) * dy
		var si int32
		for g := range 16 {
			var s int32
			var sc int8
			for e := 16 * g; e < 16*g+16; e++ {
				var q int
				q, sc = value(u, l, e)
				s += int32(q) * int32(int8(yb[q8kQuantOff+e]))
			}
			bs := int32(int16(binary.LittleEndian.Uint16(yb[q8kSumsOff+2*g:])))
			si += int32(sc) * (s - 32*bs)
		}
		sum += d * float32(si)
	}
	return sum
}

// Q4_0 matrices take the q4016 layout where the VNNI tiles run: per pair
// of groups and run of 256 columns a unit of q4016Unit bytes (two q408
// units' bytes, the file's size): the eight blocks' d of the sixteen rows
// (block j at 32j, row r at 2r), then the nibbles as q4k16 has them
// (block j, quarter v at 256+256j+64v). The tiles start each block's
// sums from -8 times the activations' sum (the Q8_K block holds it), as
// the eight-row tiles subtract it, so the sums are theirs.
const (
	q4016Unit   = 2 * q408Unit
	q4016Quants = 256
)

// repackQ4016 writes the q4016 unit of sixteen rows' runs of eight
// blocks, the first at src[0:144] and the others stride bytes apart.
func repackQ4016(dst, src []byte, stride int) {
	var u [q408Unit]byte
	repackK16(dst, src, stride, u[:], repackQ408, func(dst, u []byte, h int) {
		for r := range 8 {
			l := 8*h + r
			for j := range 8 {
				copy(dst[32*j+2*l:32*j+2*l+2], u[16*j+2*r:])
				for v := range 4 {
					copy(dst[q4016Quants+256*j+64*v+4*l:][:4], u[q408Quants+128*j+32*v+4*r:])
				}
			}
		}
	})
}

// q4016Quant returns quant i (0..15) of block j of row r of a pair's
// q4016 unit u.
func q4016Quant(u []byte, r, j, i int) byte {
	return quarterNibble(u[q4016Quants+256*j:], 64, r, i)
}

// q40DotAt is q408DotGo for row l of a group or pair in an eight- or
// 16-row layout (unit bytes a unit, the d of block j at ds*j + 2l, quant
// its accessor).
func q40DotAt(w []byte, l int, y []byte, nb, unit, ds int, quant func(u []byte, r, j, i int) byte) float32 {
	w = w[: nb*unit : nb*unit]
	var sum float32
	for b := 0; b < nb; b++ {
		u, yb := w[b*unit:], y[b*q8kBlockBytes:]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		var f float32
		for j := range 8 {
			var s int32
			for i := range 32 {
				s += int32(quant(u, l, j, i)) * int32(int8(yb[q8kQuantOff+32*j+i]))
			}
			s -= 8 * int32(binary.LittleEndian.Uint32(yb[q8kSubSumsOff+4*j:]))
			f += float32(s) * HalfToFloat(binary.LittleEndian.Uint16(u[ds*j+2*l:]))
		}
		sum += f * dy
	}
	return sum
}

// Q5_K matrices take the q5k16 layout where the VNNI tiles run: the
// q4k16 unit (the nibbles' low four bits) followed by the fifth bits, 64
// bytes a sub-block at q4k16Unit+64j, bits 2v and 2v+1 of byte 4r+i
// holding those of row r's weights 8v+i and 8v+4+i (the nibbles' own
// places): two q5k8 units' bytes. Its values reach 31, so the tiles sum
// each half sub-block (16 products) from -16 times the activations' run
// sum (the Q8_K block holds it), Σ (q-16)·y within ±16·16·127, and add
// it in by one VPDPWSSD; the 16·Σy terms come back through the scale
// pairs times 16.
const q5k16Unit = q4k16Unit + 512

// repackQ5K16 writes the q5k16 unit of sixteen rows' super-blocks, the
// first at src[0:176] and the others stride bytes apart.
func repackQ5K16(dst, src []byte, stride int) {
	var u [q5k8Unit]byte
	repackK16(dst, src, stride, u[:], repackQ5K8, func(dst, u []byte, h int) {
		putK16Group(dst, u, h)
		for r := range 8 {
			for j := range 8 {
				copy(dst[q4k16Unit+64*j+4*(8*h+r):][:4], u[q4k8Unit+32*j+4*r:])
			}
		}
	})
}

// q5k16Weight is q4k16Weight for the q5k16 layout: quant i of sub-block
// j with its fifth bit.
func q5k16Weight(u []byte, r, j, i int) (sc, mn byte, q byte) {
	sc, mn, q = q4k16Weight(u, r, j, i)
	return sc, mn, q | fifthBit(u[q4k16Unit+64*j:], r, i)
}
