package gguf

import "math"

// halfToFloat converts an IEEE 754 binary16 value, as F16 tensors and the
// block scales of the quantized types store them, to float32: exactly,
// NaN payloads kept in the high mantissa bits.
func halfToFloat(h uint16) float32 {
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

// bf16ToFloat converts a bfloat16 value (the high half of a float32) to
// float32.
func bf16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
