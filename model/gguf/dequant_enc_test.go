package gguf

import (
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// The encoders below are deliberately plain (no search for the best
// scales): they write valid blocks of each type from the format's
// definition, so that Dequantize can be checked to give back a signal
// close to the one encoded. Exactness against ggml is
// TestDequantizeGGMLReference's job.

// f16 rounds x to a half, returning the stored bits and their value.
func f16(x float32) (uint16, float32) {
	h := []uint16{0}
	kernels.ToHalf(h, []float32{x})
	return h[0], kernels.HalfToFloat(h[0])
}

func put16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }

func clampRound(x float32, lo, hi int) int {
	return max(lo, min(hi, int(math.Round(float64(x)))))
}

// maxAbs returns the element of x with the largest magnitude.
func maxAbs(x []float32) float32 {
	var m float32
	for _, v := range x {
		if abs32(v) > abs32(m) {
			m = v
		}
	}
	return m
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

// k2Index returns, for element e of a Q2_K/Q3_K super-block, its
// sub-block, quant byte (of 64) and bit shift.
func k2Index(e int) (sub, byteIdx, shift int) {
	h, r := e/128, e%128
	p, r := r/32, r%32
	return 8*h + 2*p + r/16, 32*h + r, 2 * p
}

func encodeQ2K(x []float32) []byte {
	b := make([]byte, 84)
	var scale, minv [16]float32
	var maxScale, maxMin float32
	for s := range 16 {
		lo, hi := float32(0), float32(0)
		for _, v := range x[16*s : 16*s+16] {
			lo, hi = min(lo, v), max(hi, v)
		}
		scale[s], minv[s] = (hi-lo)/3, -lo
		maxScale, maxMin = max(maxScale, scale[s]), max(maxMin, minv[s])
	}
	dh, d := f16(maxScale / 15)
	mh, dmin := f16(maxMin / 15)
	put16(b[80:], dh)
	put16(b[82:], mh)
	var sc, m [16]int
	for s := range 16 {
		if d > 0 {
			sc[s] = clampRound(scale[s]/d, 0, 15)
		}
		if dmin > 0 {
			m[s] = clampRound(minv[s]/dmin, 0, 15)
		}
		b[s] = byte(sc[s] | m[s]<<4)
	}
	for e, v := range x[:256] {
		s, i, shift := k2Index(e)
		q := 0
		if step := d * float32(sc[s]); step > 0 {
			q = clampRound((v+dmin*float32(m[s]))/step, 0, 3)
		}
		b[16+i] |= byte(q) << shift
	}
	return b
}

func encodeQ3K(x []float32) []byte {
	b := make([]byte, 110)
	var scale [16]float32
	var amax float32
	for s := range 16 {
		scale[s] = -maxAbs(x[16*s:16*s+16]) / 4 // the extreme maps to q = -4
		amax = max(amax, abs32(scale[s]))
	}
	dh, d := f16(amax / 31)
	put16(b[108:], dh)
	var sc [16]int
	for s := range 16 {
		if d > 0 {
			sc[s] = clampRound(scale[s]/d, -32, 31)
		}
		v := byte(sc[s] + 32)
		b[96+s%8] |= v & 15 << (4 * (s / 8))
		b[96+8+s%4] |= v >> 4 << (2 * (s / 4))
	}
	for e, v := range x[:256] {
		s, i, shift := k2Index(e)
		q := 0
		if step := d * float32(sc[s]); step != 0 {
			q = clampRound(v/step, -4, 3)
		}
		u := q + 4 // 0..7: low two bits in qs, the third in hmask
		b[32+i] |= byte(u&3) << shift
		if u >= 4 {
			b[i%32] |= 1 << (4*(i/32) + shift/2)
		}
	}
	return b
}

// nearestIQ4 returns the index of the table level nearest to v.
func nearestIQ4(v float32) byte {
	best := 0
	for i, t := range iq4Table {
		if abs32(v-t) < abs32(v-iq4Table[best]) {
			best = i
		}
	}
	return byte(best)
}

// encodeIQ4 writes 16 bytes of indices for 32 values at scale d.
func encodeIQ4(x []float32, d float32, qs []byte) {
	for j := range 16 {
		var lo, hi byte
		if d != 0 {
			lo, hi = nearestIQ4(x[j]/d), nearestIQ4(x[j+16]/d)
		}
		qs[j] = lo | hi<<4
	}
}

func encodeIQ4NL(x []float32) []byte {
	b := make([]byte, 18)
	dh, d := f16(maxAbs(x[:32]) / -127) // the extreme maps to level -127
	put16(b, dh)
	encodeIQ4(x, d, b[2:])
	return b
}

func encodeIQ4XS(x []float32) []byte {
	b := make([]byte, 136)
	var scale [8]float32
	var amax float32
	for i := range 8 {
		scale[i] = maxAbs(x[32*i:32*i+32]) / -127
		amax = max(amax, abs32(scale[i]))
	}
	dh, d := f16(amax / 31)
	put16(b, dh)
	var sh uint16
	for i := range 8 {
		ls := 0
		if d > 0 {
			ls = clampRound(scale[i]/d, -32, 31)
		}
		u := ls + 32
		b[4+i/2] |= byte(u&15) << (4 * (i % 2))
		sh |= uint16(u>>4) << (2 * i)
		encodeIQ4(x[32*i:32*i+32], d*float32(ls), b[8+16*i:24+16*i])
	}
	put16(b[2:], sh)
	return b
}

// TestDequantizeRoundTrip encodes signals with the encoders above and
// wants Dequantize to give them back to within each type's precision
// (relative RMS error), a round trip that fails on any misplaced bit of
// layout that the encoder and decoder do not share by construction.
func TestDequantizeRoundTrip(t *testing.T) {
	for _, c := range []struct {
		typ    Type
		encode func([]float32) []byte
		maxRel float64 // RMS error over RMS signal
	}{
		{Q2_K, encodeQ2K, 0.4},
		{Q3_K, encodeQ3K, 0.2},
		{IQ4_NL, encodeIQ4NL, 0.1},
		{IQ4_XS, encodeIQ4XS, 0.1},
	} {
		bs := c.typ.BlockSize()
		for _, sig := range []struct {
			name string
			f    func(i int) float32
		}{
			{"sine", func(i int) float32 { return float32(math.Sin(0.37*float64(i))) * float32(1+i%7) }},
			{"offset", func(i int) float32 { return 3 + float32(math.Cos(1.3*float64(i))) }},
			{"spiky", func(i int) float32 {
				if i%41 == 0 {
					return -20
				}
				return float32(math.Sin(float64(i*i))) / 4
			}},
		} {
			n := 4 * 256
			x := make([]float32, n)
			for i := range x {
				x[i] = sig.f(i)
			}
			var data []byte
			for i := 0; i < n; i += bs {
				data = append(data, c.encode(x[i:i+bs])...)
			}
			got := deq(t, c.typ, data, n)
			var se, ss float64
			for i := range x {
				e := float64(got[i] - x[i])
				se, ss = se+e*e, ss+float64(x[i])*float64(x[i])
			}
			rel := math.Sqrt(se / ss)
			t.Logf("%s %s: relative RMS error %.4f", c.typ, sig.name, rel)
			if rel > c.maxRel || math.IsNaN(rel) {
				t.Errorf("%s %s: relative RMS error %.4f, want at most %.2f", c.typ, sig.name, rel, c.maxRel)
			}
		}
	}
}
