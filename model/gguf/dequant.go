package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize converts len(out) elements of type t, stored in data, to
// float32. data must hold exactly those elements: len(out)/BlockSize blocks
// of TypeSize bytes. DequantizeTypes lists the supported types; others
// (the IQ types other than IQ4_NL and IQ4_XS, whose lattice tables this
// package does not carry, and Q8_1, Q8_K, TQ1_0, ...) return an error
// naming the type. It does not allocate.
func Dequantize(t Type, data []byte, out []float32) error {
	deq := dequantizer(t)
	if deq == nil {
		if t.TypeSize() == 0 {
			return fmt.Errorf("gguf: dequantize: unknown tensor type %d", uint32(t))
		}
		return fmt.Errorf("gguf: dequantize: %s is not supported (supported: %s)", t, DequantizeTypes)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(out)%bs != 0 {
		return fmt.Errorf("gguf: dequantize %s: %d elements is not a multiple of the block size %d", t, len(out), bs)
	}
	if want := len(out) / bs * ts; len(data) != want {
		return fmt.Errorf("gguf: dequantize %s: %d bytes of data for %d elements, want %d", t, len(data), len(out), want)
	}
	if bs == 1 { // the plain types decode any run at once
		deq(data, out)
		return nil
	}
	for i := range len(out) / bs {
		deq(data[i*ts:(i+1)*ts], out[i*bs:(i+1)*bs])
	}
	return nil
}

// CanDequantize reports whether Dequantize decodes type t (one of
// DequantizeTypes).
func CanDequantize(t Type) bool { return dequantizer(t) != nil }

// dequantizer returns the function that decodes one block of type t, or nil.
func dequantizer(t Type) func(b []byte, out []float32) {
	switch t {
	case F32:
		return deqF32
	case F16:
		return deqF16
	case BF16:
		return deqBF16
	case Q8_0:
		return deqQ8_0
	case Q4_0:
		return deqQ4_0
	case Q4_1:
		return deqQ4_1
	case Q5_0:
		return deqQ5_0
	case Q5_1:
		return deqQ5_1
	case Q2_K:
		return deqQ2K
	case Q3_K:
		return deqQ3K
	case Q4_K:
		return deqQ4K
	case Q5_K:
		return deqQ5K
	case Q6_K:
		return deqQ6K
	case IQ4_NL:
		return deqIQ4NL
	case IQ4_XS:
		return deqIQ4XS
	}
	return nil
}

// DequantizeTypes lists the types Dequantize decodes, for error messages.
const DequantizeTypes = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS"

func half(b []byte) float32 { return halfToFloat(binary.LittleEndian.Uint16(b)) }

func deqF32(b []byte, out []float32) {
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func deqF16(b []byte, out []float32) {
	for i := range out {
		out[i] = half(b[2*i:])
	}
}

func deqBF16(b []byte, out []float32) {
	for i := range out {
		out[i] = bf16ToFloat(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// Q8_0: f16 scale d, 32 int8 quants; x = d*q.
func deqQ8_0(b []byte, out []float32) {
	d := half(b)
	for j, q := range b[2:34] {
		out[j] = d * float32(int8(q))
	}
}

// Q4_0: f16 scale d, 16 bytes of nibbles; element j is the low nibble of
// byte j and element j+16 the high nibble; x = d*(q-8).
func deqQ4_0(b []byte, out []float32) {
	d := half(b)
	for j, q := range b[2:18] {
		out[j] = d * float32(int(q&15)-8)
		out[j+16] = d * float32(int(q>>4)-8)
	}
}

// Q4_1: f16 scale d and minimum m, nibbles as Q4_0; x = d*q + m.
func deqQ4_1(b []byte, out []float32) {
	d, m := half(b), half(b[2:])
	for j, q := range b[4:20] {
		out[j] = d*float32(q&15) + m
		out[j+16] = d*float32(q>>4) + m
	}
}

// Q5_0: f16 scale d, 32 high bits (uint32), nibbles as Q4_0; x = d*(q-16).
func deqQ5_0(b []byte, out []float32) {
	d, qh := half(b), binary.LittleEndian.Uint32(b[2:])
	for j, q := range b[6:22] {
		hi0 := byte(qh>>j) & 1 << 4
		hi1 := byte(qh>>(j+16)) & 1 << 4
		out[j] = d * float32(int(q&15|hi0)-16)
		out[j+16] = d * float32(int(q>>4|hi1)-16)
	}
}

// Q5_1: f16 scale d and minimum m, high bits and nibbles as Q5_0; x = d*q + m.
func deqQ5_1(b []byte, out []float32) {
	d, m, qh := half(b), half(b[2:]), binary.LittleEndian.Uint32(b[4:])
	for j, q := range b[8:24] {
		hi0 := byte(qh>>j) & 1 << 4
		hi1 := byte(qh>>(j+16)) & 1 << 4
		out[j] = d*float32(q&15|hi0) + m
		out[j+16] = d*float32(q>>4|hi1) + m
	}
}

// Q4_K: f16 d and dmin, 12 bytes packing eight 6-bit (scale, min) pairs, 128
// bytes of nibbles. Each 32-byte run of nibbles holds two sub-blocks of 32
// elements: low nibbles first, then high nibbles. x = d*sc*q - dmin*m.
func deqQ4K(b []byte, out []float32) { deqK45(b[:16], nil, b[16:144], out) }

// deqK45 decodes a Q4_K block, or a Q5_K one with its fifth bits qh: the
// header h (d, dmin, the packed scales), then sub-block j's element l is
// the nibble plus 16 times bit j of qh[l].
func deqK45(h, qh, qs []byte, out []float32) {
	d, dmin := half(h), half(h[2:])
	sc := h[4:16]
	for j := range 4 {
		s0, m0 := scaleMinK4(2*j, sc)
		s1, m1 := scaleMinK4(2*j+1, sc)
		d0, d1 := d*float32(s0), d*float32(s1)
		n0, n1 := dmin*float32(m0), dmin*float32(m1)
		o := out[64*j : 64*j+64]
		for l, q := range qs[32*j : 32*j+32] {
			lo, hi := q&15, q>>4
			if qh != nil {
				lo |= qh[l] >> (2 * j) & 1 << 4
				hi |= qh[l] >> (2*j + 1) & 1 << 4
			}
			o[l] = d0*float32(lo) - n0
			o[l+32] = d1*float32(hi) - n1
		}
	}
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j: sub-blocks 0-3
// use the low six bits of bytes j and j+4; sub-blocks 4-7 take their low
// four bits from byte j+4 and their top two from the spare bits of bytes
// j-4 and j.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | q[j-4]>>6<<4, q[j+4]>>4 | q[j]>>6<<4
}

// Q5_K: Q4_K's d, dmin and packed scales, then 32 bytes of fifth bits (qh)
// and 128 bytes of nibbles (qs). Sub-block j's element l (of 32) takes the
// nibble as Q4_K does and bit j of qh[l] as 16: x = d*sc*q - dmin*m.
func deqQ5K(b []byte, out []float32) { deqK45(b[:16], b[16:48], b[48:176], out) }

// Q6_K: 128 bytes of low nibbles (ql), 64 bytes of high 2-bit pairs (qh), 16
// int8 scales, f16 d. Each half of 128 elements uses 64 bytes of ql and 32
// of qh; x = d*scale*(q-32) with one scale per 16 elements.
func deqQ6K(b []byte, out []float32) {
	d := half(b[208:])
	for h := range 2 {
		ql, qh := b[64*h:64*h+64], b[128+32*h:128+32*h+32]
		sc := b[192+8*h : 192+8*h+8]
		o := out[128*h : 128*h+128]
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&15|(qh[l]&3)<<4) - 32
			q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			o[l] = d * float32(int8(sc[is])) * float32(q1)
			o[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			o[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			o[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}

// Q2_K: 16 bytes of scales (sub-block i's 4-bit scale in the low nibble of
// byte i, its 4-bit min in the high one), 64 bytes of 2-bit quants, f16 d
// and dmin. Sixteen sub-blocks of 16 elements. Half h (128 elements) reads
// its 32 quant bytes four times, two bits at a time from the bottom: pass p
// (bits 2p, 2p+1) gives sub-block 8h+2p from bytes 0-15 and sub-block
// 8h+2p+1 from bytes 16-31. x = d*scale*q - dmin*min.
func deqQ2K(b []byte, out []float32) {
	sc := b[:16]
	d, dmin := half(b[80:]), half(b[82:])
	for h := range 2 {
		qs := b[16+32*h : 16+32*h+32]
		for p := range 4 {
			for k := range 2 {
				s := sc[8*h+2*p+k]
				dl, ml := d*float32(s&15), dmin*float32(s>>4)
				o := out[128*h+32*p+16*k : 128*h+32*p+16*k+16]
				for l, q := range qs[16*k : 16*k+16] {
					o[l] = dl*float32(q>>(2*p)&3) - ml
				}
			}
		}
	}
}

// Q3_K: 32 bytes of high bits (hmask), 64 bytes of 2-bit quants laid out as
// Q2_K's, 12 bytes packing sixteen 6-bit scales, f16 d. The element whose
// two low bits come from pass p over byte l (of 32) of half h takes bit
// 4h+p of hmask[l]: q is the two bits minus 4 when it is clear, the two
// bits alone when it is set (so -4..3). x = d*(scale-32)*q.
func deqQ3K(b []byte, out []float32) {
	hm, sc := b[:32], b[96:108]
	d := half(b[108:])
	for h := range 2 {
		qs := b[32+32*h : 32+32*h+32]
		for p := range 4 {
			bit := byte(1) << (4*h + p)
			for k := range 2 {
				dl := d * float32(scaleK3(8*h+2*p+k, sc)-32)
				o := out[128*h+32*p+16*k : 128*h+32*p+16*k+16]
				for l := range 16 {
					i := 16*k + l
					q := int(qs[i]>>(2*p)&3) - 4
					if hm[i]&bit != 0 {
						q += 4
					}
					o[l] = dl * float32(q)
				}
			}
		}
	}
}

// scaleK3 unpacks Q3_K's 6-bit scale i (0-15) from its 12 bytes: the low
// four bits are the low nibble of byte i for i < 8 and the high nibble of
// byte i-8 otherwise; the top two bits are bits 2*(i/4), 2*(i/4)+1 of byte
// 8 + i%4.
func scaleK3(i int, sc []byte) int {
	lo := sc[i%8] >> (4 * (i / 8)) & 15
	hi := sc[8+i%4] >> (2 * (i / 4)) & 3
	return int(lo | hi<<4)
}

// iq4nl is ggml's table of the 16 non-linear 4-bit levels (kvalues_iq4nl)
// shared by IQ4_NL and IQ4_XS.
var iq4nl = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// IQ4_NL: f16 d, 16 bytes of 4-bit indices into iq4nl laid out as Q4_0's
// nibbles (element j the low nibble of byte j, element j+16 the high one).
// x = d*iq4nl[q].
func deqIQ4NL(b []byte, out []float32) { deqIQ4(half(b), b[2:18], out) }

func deqIQ4(d float32, qs []byte, out []float32) {
	for j, q := range qs {
		out[j] = d * iq4nl[q&15]
		out[j+16] = d * iq4nl[q>>4]
	}
}

// IQ4_XS: f16 d, a uint16 of high scale bits (scales_h), 4 bytes of low
// scale nibbles (scales_l), 128 bytes of indices. Eight sub-blocks of 32
// elements, each laid out as an IQ4_NL block over 16 bytes of qs; sub-block
// i's 6-bit scale is nibble i%2 of scales_l[i/2] plus bits 2i, 2i+1 of
// scales_h as its top two bits. x = d*(scale-32)*iq4nl[q].
func deqIQ4XS(b []byte, out []float32) {
	d, sh := half(b), binary.LittleEndian.Uint16(b[2:])
	for i := range 8 {
		ls := int(b[4+i/2]>>(4*(i%2))&15) | int(sh>>(2*i)&3)<<4
		deqIQ4(d*float32(ls-32), b[8+16*i:24+16*i], out[32*i:32*i+32])
	}
}
