package gguf

import (
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// Every binary16 value converts to the float32 of its definition
// ((-1)^s 2^(e-15) 1.m, subnormals 2^-14 0.m, infinities, NaNs with their
// payload in the high mantissa bits), and to the same bits as the
// kernels' conversion.
func TestHalfToFloatEveryValue(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		sign, e, m := float64(1), int(h>>10&0x1f), float64(h&0x3ff)
		if h&0x8000 != 0 {
			sign = -1
		}
		got := halfToFloat(h)
		switch {
		case e == 0x1f && m == 0:
			if !math.IsInf(float64(got), int(sign)) {
				t.Fatalf("%#04x: %g, want infinity", h, got)
			}
		case e == 0x1f:
			b := math.Float32bits(got)
			if got == got || b&0x7fffff != uint32(h&0x3ff)<<13 || b>>31 != uint32(h>>15) {
				t.Fatalf("%#04x: %#08x, want a NaN with its payload", h, b)
			}
		case e == 0:
			if want := sign * math.Ldexp(m, -24); float64(got) != want || math.Signbit(float64(got)) != (sign < 0) {
				t.Fatalf("%#04x: %g, want %g", h, got, want)
			}
		default:
			if want := sign * math.Ldexp(1024+m, e-25); float64(got) != want {
				t.Fatalf("%#04x: %g, want %g", h, got, want)
			}
		}
		if k := kernels.HalfToFloat(h); math.Float32bits(k) != math.Float32bits(got) {
			t.Fatalf("%#04x: %#08x here, %#08x in the kernels", h, math.Float32bits(got), math.Float32bits(k))
		}
		if b := bf16ToFloat(h); math.Float32bits(b) != uint32(h)<<16 {
			t.Fatalf("bf16 %#04x: %#08x", h, math.Float32bits(b))
		}
	}
}
