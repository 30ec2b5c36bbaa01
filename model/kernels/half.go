package kernels

import "math"

// HalfToFloat converts an IEEE 754 binary16 value to float32 (exactly;
// NaN payloads are kept, shifted into the high mantissa bits).
//
// It is kept small enough that asFloat, which the pure-Go attention
// kernels call per element, is inlined with it (see generic.go).
func HalfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	em := uint32(h & 0x7fff) // exponent and mantissa
	if em < 0x0400 {
		// Zero or subnormal: em * 2^-24, exact in float32.
		return math.Float32frombits(sign | math.Float32bits(float32(em)*0x1p-24))
	}
	// Normal: rebias the exponent by 127-15. Inf or NaN: by twice that,
	// which takes the exponent 31 to 255 and keeps the mantissa.
	bias := uint32(127-15) << 23
	if em >= 0x7c00 {
		bias *= 2
	}
	return math.Float32frombits(sign | (em<<13 + bias))
}

// FloatToHalf converts float32 to binary16, rounding to nearest even:
// magnitudes from 65520 up become infinities, below 2^-25 (half the
// smallest subnormal half) zeros. A NaN becomes the quiet NaN 0x7e00 with
// its sign.
func FloatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff // |f|
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00
	case a >= 0x477ff000: // 65520 and up, inf
		return sign | 0x7c00
	case a >= 0x38800000: // a normal half, from 2^-14
		// Rebias the exponent, then round the 13 dropped bits: adding
		// 0xfff plus the kept lowest bit carries exactly when the dropped
		// part is above half, or half with an odd kept part. A carry out
		// of the mantissa correctly bumps the exponent.
		a -= (127 - 15) << 23
		return sign | uint16((a+0xfff+(a>>13)&1)>>13)
	case a > 0x33000000: // a subnormal half (or 2^-14), above 2^-25
		// |f|*2^24 is exact; adding 2^23 rounds it to an integer, nearest
		// even, in the float32 mantissa's low bits.
		r := math.Float32frombits(a)*0x1p24 + 0x1p23
		return sign | uint16(math.Float32bits(r)-0x4b000000)
	}
	return sign // zero, or at most 2^-25: rounds to zero
}

// BF16ToFloat converts a bfloat16 value to float32.
func BF16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
