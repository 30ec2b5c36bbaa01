package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func isHalfNaN(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// sameHalf reports whether ToHalf's h matches FloatToHalf's want: equal,
// or NaNs of the same sign.
func sameHalf(h, want uint16) bool {
	return h == want || isHalfNaN(h) && isHalfNaN(want) && h&0x8000 == want&0x8000
}

// sameFloat is sameHalf for FromHalf.
func sameFloat(f, want float32) bool {
	fb, wb := math.Float32bits(f), math.Float32bits(want)
	return fb == wb || f != f && want != want && fb>>31 == wb>>31
}

// randHalves returns n halves of normally distributed values.
func randHalves(r *rand.Rand, n int) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		h[i] = FloatToHalf(float32(r.NormFloat64()))
	}
	return h
}

// widen returns FromHalf of h.
func widen(h []uint16) []float32 {
	f := make([]float32, len(h))
	FromHalf(f, h)
	return f
}

// TestHalfValues checks FloatToHalf and HalfToFloat, and ToHalf and
// FromHalf at every level, on the edge cases: zeros, subnormals, the
// largest finite half, overflow to infinity, ties and values just below
// the subnormal range.
func TestHalfValues(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	next := func(f float32) float32 { return math.Nextafter32(f, float32(math.Inf(1))) }
	prev := func(f float32) float32 { return math.Nextafter32(f, float32(math.Inf(-1))) }
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.333251953125, 0x3555},
		{1 + p(-11), 0x3c00},            // tie: to even
		{next(1 + p(-11)), 0x3c01},      // just above the tie
		{1 + 3*p(-11), 0x3c02},          // tie: to even (up)
		{65504, 0x7bff},                 // largest finite half
		{prev(65520), 0x7bff},           // just below the overflow tie
		{65520, 0x7c00},                 // tie between 65504 and 65536: to even, infinity
		{1e10, 0x7c00},                  // overflow
		{-1e30, 0xfc00},                 // overflow
		{float32(math.Inf(1)), 0x7c00},  // infinities
		{float32(math.Inf(-1)), 0xfc00}, //
		{p(-14), 0x0400},                // smallest normal half
		{p(-14) - p(-25), 0x0400},       // tie between 0x3ff and 0x400: to even
		{prev(p(-14) - p(-25)), 0x03ff}, // largest subnormal
		{p(-24), 0x0001},                // smallest subnormal
		{-p(-24), 0x8001},
		{3 * p(-25), 0x0002}, // tie: to even (up)
		{5 * p(-25), 0x0002}, // tie: to even (down)
		{p(-25), 0x0000},     // half the smallest subnormal: tie, to even 0
		{next(p(-25)), 0x0001},
		{-next(p(-25)), 0x8001},
		{prev(p(-25)), 0x0000}, // just below the subnormal range
		{p(-26), 0x0000},
		{-p(-30), 0x8000},
		{math.Float32frombits(1), 0x0000},          // float32 subnormals
		{math.Float32frombits(0x807fffff), 0x8000}, //
	}
	src := make([]float32, len(cases))
	want := make([]uint16, len(cases))
	for i, c := range cases {
		if got := FloatToHalf(c.f); got != c.h {
			t.Errorf("FloatToHalf(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
		// HalfToFloat is exact: converting back gives the rounded value.
		if back := FloatToHalf(HalfToFloat(c.h)); back != c.h {
			t.Errorf("FloatToHalf(HalfToFloat(%#04x)) = %#04x", c.h, back)
		}
		src[i], want[i] = c.f, c.h
	}
	for _, c := range []struct {
		h uint16
		f float32
	}{
		{0x0001, p(-24)}, {0x03ff, 1023 * p(-24)}, {0x0400, p(-14)}, {0x7bff, 65504},
		{0x3c00, 1}, {0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		if got := HalfToFloat(c.h); got != c.f {
			t.Errorf("HalfToFloat(%#04x) = %g, want %g", c.h, got, c.f)
		}
	}
	for _, l := range f32Levels() {
		got := make([]uint16, len(src))
		withLevels(t, l, q8Level, func() { ToHalf(got, src) })
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%v: ToHalf(%g) = %#04x, want %#04x", l, src[i], got[i], want[i])
			}
		}
	}
}

// halfRef is binary16's definition: (-1)^s * 2^(e-15) * (1 + m/1024), or
// m * 2^-24 for e = 0; NaN payloads shifted into the high mantissa bits.
func halfRef(h uint16) float32 {
	s, e, m := h>>15, int(h>>10&0x1f), int(h&0x3ff)
	var v float64
	switch {
	case e == 0x1f && m != 0:
		return math.Float32frombits(uint32(s)<<31 | 0x7f800000 | uint32(m)<<13)
	case e == 0x1f:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), -24)
	default:
		v = math.Ldexp(float64(1024+m), e-25)
	}
	if s == 1 {
		v = -v
	}
	return float32(v)
}

// TestFromHalfAll converts every half, with HalfToFloat and with FromHalf
// at every level.
func TestFromHalfAll(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
		if got, want := HalfToFloat(uint16(i)), halfRef(uint16(i)); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("HalfToFloat(%#04x) = %#08x, want %#08x", i, math.Float32bits(got), math.Float32bits(want))
		}
	}
	for _, l := range f32Levels() {
		got := make([]float32, len(all))
		withLevels(t, l, q8Level, func() { FromHalf(got, all) })
		for i, h := range all {
			want := HalfToFloat(h)
			if !sameFloat(got[i], want) || isHalfNaN(h) != (got[i] != got[i]) {
				t.Fatalf("%v: FromHalf(%#04x) = %#08x, want %#08x", l, h, math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
}

// TestToHalfPatterns compares ToHalf with FloatToHalf on every exponent
// and sign, with mantissas that cover the rounding cases of normal halves
// (the low 13 bits around the tie) and of subnormal ones (the bits
// dropped around their tie), plus random bit patterns.
func TestToHalfPatterns(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var src []float32
	for e := uint32(0); e < 256; e++ {
		for sign := uint32(0); sign < 2; sign++ {
			drop := uint32(13) // mantissa bits dropped for a normal half
			if be := int(e) - 127 + 15; be <= 0 {
				drop = min(24, uint32(14-be))
			}
			mid := uint32(1) << (drop - 1)
			lows := []uint32{0, 1, mid - 1, mid, mid + 1, 2*mid - 1}
			for i := 0; i < 64; i++ {
				m := r.Uint32() & 0x7fffff
				if i < 4 {
					m = uint32(i) << drop // even and odd kept bits
				}
				for _, lo := range lows {
					mm := (m&^(2*mid-1) | lo) & 0x7fffff
					src = append(src, math.Float32frombits(sign<<31|e<<23|mm))
				}
			}
		}
	}
	for range 1 << 15 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	want := make([]uint16, len(src))
	for i, f := range src {
		want[i] = FloatToHalf(f)
	}
	for _, l := range f32Levels() {
		got := make([]uint16, len(src))
		withLevels(t, l, q8Level, func() { ToHalf(got, src) })
		for i := range got {
			if !sameHalf(got[i], want[i]) {
				t.Fatalf("%v: ToHalf(%g = %#08x) = %#04x, want %#04x", l, src[i], math.Float32bits(src[i]), got[i], want[i])
			}
		}
	}
}

// TestHalfLengths checks every length and alignment: each tail, nothing
// written past len(src).
func TestHalfLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, l := range f32Levels() {
		for n := 0; n <= 100; n++ {
			for _, off := range []int{0, 1, 3} {
				f := randVec(r, n+off)[off:]
				h := make([]uint16, n+off+1)[off:]
				h[n] = 0xbeef
				withLevels(t, l, q8Level, func() { ToHalf(h, f) })
				if h[n] != 0xbeef {
					t.Fatalf("%v: ToHalf(len %d) wrote past the end", l, n)
				}
				back := make([]float32, n+off+1)[off:]
				back[n] = 42
				withLevels(t, l, q8Level, func() { FromHalf(back, h[:n]) })
				if back[n] != 42 {
					t.Fatalf("%v: FromHalf(len %d) wrote past the end", l, n)
				}
				for i := range n {
					if h[i] != FloatToHalf(f[i]) || back[i] != HalfToFloat(h[i]) {
						t.Fatalf("%v len %d: [%d] %g -> %#04x -> %g, want %#04x -> %g",
							l, n, i, f[i], h[i], back[i], FloatToHalf(f[i]), HalfToFloat(FloatToHalf(f[i])))
					}
				}
			}
		}
	}
	ToHalf(nil, nil)
	FromHalf(nil, nil)
}

// FuzzHalf checks ToHalf and FromHalf against FloatToHalf and HalfToFloat
// on arbitrary bit patterns, at every level.
func FuzzHalf(f *testing.F) {
	for _, b := range []uint32{0, 0x80000000, 0x3f800000, 0x477fe000, 0x477ff000, 0x33000000, 0x33000001,
		0x7f800000, 0x7fc00001, 0x7f800001, 0xff812345, 0x00000001, 0x387fc000} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		src := []float32{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x} // a full vector and a tail
		want := FloatToHalf(x)
		for _, l := range f32Levels() {
			h := make([]uint16, len(src))
			back := make([]float32, len(src))
			withLevels(t, l, q8Level, func() {
				ToHalf(h, src)
				FromHalf(back, h)
			})
			for i := range h {
				if !sameHalf(h[i], want) {
					t.Fatalf("%v: ToHalf(%#08x)[%d] = %#04x, want %#04x", l, bits, i, h[i], want)
				}
				if !sameFloat(back[i], HalfToFloat(h[i])) {
					t.Fatalf("%v: FromHalf(%#04x)[%d] = %g, want %g", l, h[i], i, back[i], HalfToFloat(h[i]))
				}
			}
		}
	})
}

// bitsEqual reports whether a and b hold the same float32 bit patterns.
func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// f32Twin runs fn with the float32 kernels at the level the F16 kernels
// use when the float32 ones run at l (the same, unless the CPU lacks F16C).
func f32Twin(t *testing.T, l level, fn func()) {
	withLevels(t, f16LevelOf(l), q8Level, fn)
}

// TestScoresF16 checks that ScoresTF16 and ScoresRowsF16 give, bit for bit,
// what ScoresT and ScoresRows give on the widened keys, read nothing past
// len(out) slots, and agree with each other.
func TestScoresF16(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	const nan = 0x7e00
	for _, l := range f32Levels() {
		for _, dim := range []int{0, 1, 2, 3, 4, 5, 7, 8, 15, 17, 33, 64, 65, 128} {
			for _, bs := range []int{1, 3, 8, 15, 16, 17, 31, 32, 33, 48} {
				for _, n := range []int{1, 2, 5, 6, 9, bs / 2, bs - 1, bs} {
					if n < 1 || n > bs {
						continue
					}
					// Slots n..bs-1 and everything past the last row hold
					// NaN: they must not be read. An odd start misaligns.
					buf := make([]uint16, dim*bs+40)
					for i := range buf {
						buf[i] = nan
					}
					kt := buf[3 : 3+max(0, (dim-1)*bs+n)]
					for d := 0; d < dim; d++ {
						for j := 0; j < n; j++ {
							kt[d*bs+j] = FloatToHalf(float32(r.NormFloat64()))
						}
					}
					q := randVec(r, dim)
					out, want := make([]float32, n+1), make([]float32, n)
					out[n] = 42
					var wide []float32
					withLevels(t, l, q8Level, func() {
						wide = widen(kt)
						ScoresTF16(out[:n], q, kt, bs)
					})
					f32Twin(t, l, func() { ScoresT(want, q, wide, bs) })
					if !bitsEqual(out[:n], want) || out[n] != 42 {
						t.Fatalf("%v dim=%d bs=%d n=%d: ScoresTF16 = %v, ScoresT %v", l, dim, bs, n, out, want)
					}

					// The same keys as rows of halves.
					stride := dim + 3
					rows := make([]uint16, (n-1)*stride+dim+5)
					for i := range rows {
						rows[i] = nan
					}
					for j := range n {
						for d := range dim {
							rows[j*stride+d] = kt[d*bs+j]
						}
					}
					rows = rows[:max(0, (n-1)*stride+dim)]
					got, wantRows := make([]float32, n+1), make([]float32, n)
					got[n] = 42
					withLevels(t, l, q8Level, func() {
						wide = widen(rows)
						ScoresRowsF16(got[:n], q, rows, stride)
					})
					f32Twin(t, l, func() { ScoresRows(wantRows, q, wide, stride) })
					if !bitsEqual(got[:n], wantRows) || got[n] != 42 {
						t.Fatalf("%v dim=%d n=%d: ScoresRowsF16 = %v, ScoresRows %v", l, dim, n, got, wantRows)
					}
					if !bitsEqual(got[:n], out[:n]) {
						t.Fatalf("%v dim=%d n=%d: ScoresRowsF16 = %v, ScoresTF16 %v", l, dim, n, got[:n], out[:n])
					}
				}
			}
		}
	}
	ScoresTF16(nil, []float32{1}, nil, 16) // no slots: no access
	ScoresRowsF16(nil, []float32{1}, nil, 16)
}

// TestMultiF16 checks ScoresTMultiF16, ScoresTBlocksF16 and
// AxpyStridedMultiF16 against their float32 twins on the widened data and
// against the single-query F16 kernels, at every level.
func TestMultiF16(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, l := range f32Levels() {
		for _, dim := range []int{1, 5, 16, 33, 64, 80, 128} {
			for _, bs := range []int{3, 16, 17, 32} {
				for _, nq := range []int{1, 2, 3, 4, 5, 7, 9} {
					n := 1 + r.IntN(bs)
					kt := randHalves(r, dim*bs)
					q, out, want, single := make([][]float32, nq), make([][]float32, nq), make([][]float32, nq), make([][]float32, nq)
					for i := range q {
						q[i], out[i] = randVec(r, dim+i)[i:], make([]float32, n+1)
						want[i], single[i] = make([]float32, n), make([]float32, n)
						out[i][n] = 42
						out[i] = out[i][:n]
					}
					var wide []float32
					withLevels(t, l, q8Level, func() {
						wide = widen(kt)
						ScoresTMultiF16(out, q, kt, bs)
						for i := range q {
							ScoresTF16(single[i], q[i], kt, bs)
						}
					})
					f32Twin(t, l, func() { ScoresTMulti(want, q, wide, bs) })
					for i := range q {
						if !bitsEqual(out[i], want[i]) || !bitsEqual(out[i], single[i]) || out[i][:n+1][n] != 42 {
							t.Fatalf("%v dim=%d bs=%d nq=%d: ScoresTMultiF16 query %d = %v, ScoresTMulti %v, ScoresTF16 %v",
								l, dim, bs, nq, i, out[i][:n+1], want[i], single[i])
						}
					}

					const stride = 201 // odd: rows start at odd halves
					v := randHalves(r, (n-1)*stride+dim)
					y, yw, ys, a := make([][]float32, nq), make([][]float32, nq), make([][]float32, nq), make([][]float32, nq)
					for i := range y {
						a[i] = randVec(r, n)
						y[i] = append(randVec(r, dim), 42)
						yw[i], ys[i] = slices.Clone(y[i][:dim]), slices.Clone(y[i][:dim])
						y[i] = y[i][:dim]
					}
					withLevels(t, l, q8Level, func() {
						wide = widen(v)
						AxpyStridedMultiF16(y, a, v, stride)
						for i := range ys {
							AxpyStridedF16(ys[i], a[i], v, stride)
						}
					})
					f32Twin(t, l, func() { AxpyStridedMulti(yw, a, wide, stride) })
					for i := range y {
						if !bitsEqual(y[i], yw[i]) || !bitsEqual(y[i], ys[i]) || y[i][:dim+1][dim] != 42 {
							t.Fatalf("%v dim=%d n=%d nq=%d: AxpyStridedMultiF16 sum %d = %v, AxpyStridedMulti %v, AxpyStridedF16 %v",
								l, dim, n, nq, i, y[i], yw[i], ys[i])
						}
					}
				}
			}
		}
	}
	ScoresTMultiF16(nil, nil, nil, 16)
	AxpyStridedMultiF16(nil, nil, nil, 16)

	for _, l := range f32Levels() {
		for _, dim := range []int{1, 6, 64, 67, 128} {
			for _, bs := range []int{1, 5, 16, 20, 32} {
				for nb := range 7 {
					q := randVec(r, dim)
					kt, wide := make([][]uint16, nb), make([][]float32, nb)
					for b := range kt {
						kt[b] = randHalves(r, dim*bs+b)[b:] // misaligned starts
					}
					out, want, single := make([]float32, nb*bs+1), make([]float32, nb*bs), make([]float32, nb*bs)
					out[nb*bs] = 42
					withLevels(t, l, q8Level, func() {
						for b := range kt {
							wide[b] = widen(kt[b])
							ScoresTF16(single[b*bs:(b+1)*bs], q, kt[b], bs)
						}
						ScoresTBlocksF16(out[:nb*bs], q, kt, bs)
					})
					f32Twin(t, l, func() { ScoresTBlocks(want, q, wide, bs) })
					if !bitsEqual(out[:nb*bs], want) || !bitsEqual(out[:nb*bs], single) || out[nb*bs] != 42 {
						t.Fatalf("%v dim=%d bs=%d blocks=%d: ScoresTBlocksF16 = %v, ScoresTBlocks %v, ScoresTF16 %v",
							l, dim, bs, nb, out, want, single)
					}
				}
			}
		}
	}
}

// TestAxpyStridedF16 checks AxpyStridedF16 against AxpyStrided on the
// widened values for widths with every tail, odd strides and starts.
func TestAxpyStridedF16(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	for _, l := range f32Levels() {
		for _, dim := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 128, 130} {
			for _, n := range []int{0, 1, 2, 5, 17} {
				for _, pad := range []int{0, 1, 3} {
					stride := dim + pad
					v := randHalves(r, max(0, (n-1)*stride+dim)+1)[1:]
					a := randVec(r, n)
					y := append(randVec(r, dim), 42)
					want := slices.Clone(y[:dim])
					var wide []float32
					withLevels(t, l, q8Level, func() {
						wide = widen(v)
						AxpyStridedF16(y[:dim], a, v, stride)
					})
					f32Twin(t, l, func() { AxpyStrided(want, a, wide, stride) })
					if !bitsEqual(y[:dim], want) || y[dim] != 42 {
						t.Fatalf("%v dim=%d n=%d stride=%d: AxpyStridedF16 = %v, AxpyStrided %v", l, dim, n, stride, y, want)
					}
				}
			}
		}
	}
}

// TestF16SpecialValues feeds halves that are infinite, NaN, subnormal or
// the largest finite: the kernels still match their twins, NaNs compared
// as NaNs.
func TestF16SpecialValues(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	specials := []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x83ff, 0x7bff, 0x8000, 0}
	const dim, bs, stride = 19, 21, 23
	kt := randHalves(r, dim*bs)
	v := randHalves(r, bs*stride)
	for i := range kt {
		if r.IntN(8) == 0 {
			kt[i] = specials[r.IntN(len(specials))]
		}
	}
	for i := range v {
		if r.IntN(8) == 0 {
			v[i] = specials[r.IntN(len(specials))]
		}
	}
	q, a := randVec(r, dim), randVec(r, bs)
	same := func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return sameFloat(p, q) })
	}
	for _, l := range f32Levels() {
		out, want := make([]float32, bs), make([]float32, bs)
		y, yw := make([]float32, dim), make([]float32, dim)
		var wk, wv []float32
		withLevels(t, l, q8Level, func() {
			wk, wv = widen(kt), widen(v)
			ScoresTF16(out, q, kt, bs)
			AxpyStridedF16(y, a, v, stride)
		})
		f32Twin(t, l, func() {
			ScoresT(want, q, wk, bs)
			AxpyStrided(yw, a, wv, stride)
		})
		if !same(out, want) {
			t.Errorf("%v: ScoresTF16 = %v, ScoresT %v", l, out, want)
		}
		if !same(y, yw) {
			t.Errorf("%v: AxpyStridedF16 = %v, AxpyStrided %v", l, y, yw)
		}
	}
}

func TestF16KernelsPanic(t *testing.T) {
	f := make([]float32, 64)
	h, long := make([]uint16, 64), make([]uint16, 128)
	for name, fn := range map[string]func(){
		"ScoresTF16 more slots than bs":  func() { ScoresTF16(f[:17], f[:4], h, 16) },
		"ScoresTF16 short kt":            func() { ScoresTF16(f[:16], f[:5], h, 16) },
		"ScoresTMultiF16 count mismatch": func() { ScoresTMultiF16([][]float32{f[:2]}, nil, h, 16) },
		"ScoresTMultiF16 ragged outputs": func() { ScoresTMultiF16([][]float32{f[:2], f[:3]}, [][]float32{f[:2], f[:2]}, h, 16) },
		"ScoresTMultiF16 ragged queries": func() { ScoresTMultiF16([][]float32{f[:2], f[:2]}, [][]float32{f[:2], f[:3]}, h, 16) },
		"ScoresTMultiF16 short kt":       func() { ScoresTMultiF16([][]float32{f[:16]}, [][]float32{f[:5]}, h, 16) },
		"AxpyStridedMultiF16 ragged":     func() { AxpyStridedMultiF16([][]float32{f[:2], f[:3]}, [][]float32{f[:2], f[:2]}, h, 4) },
		"AxpyStridedMultiF16 short v":    func() { AxpyStridedMultiF16([][]float32{f[:8]}, [][]float32{f[:9]}, h, 8) },
		"AxpyStridedMultiF16 count":      func() { AxpyStridedMultiF16([][]float32{f[:8]}, nil, h, 8) },
		"AxpyStridedF16 short v":         func() { AxpyStridedF16(f[:8], f[:9], h, 8) },
		"AxpyStridedF16 negative stride": func() { AxpyStridedF16(f[:8], f[:2], h, -1) },
		"ScoresRowsF16 short k":          func() { ScoresRowsF16(f[:4], f[:8], h, 20) },
		"ScoresTBlocksF16 short out":     func() { ScoresTBlocksF16(f[:31], f[:2], [][]uint16{h, h}, 16) },
		"ScoresTBlocksF16 short kt":      func() { ScoresTBlocksF16(f[:32], f[:8], [][]uint16{long, long[:100]}, 16) },
		"ScoresTBlocksF16 zero bs":       func() { ScoresTBlocksF16(nil, f[:8], nil, 0) },
		"ToHalf short dst":               func() { ToHalf(h[:3], f[:4]) },
		"FromHalf short dst":             func() { FromHalf(f[:3], h[:4]) },
	} {
		func() {
			defer func() {
				e := recover()
				if e == nil {
					t.Errorf("%s: no panic", name)
					return
				}
				// The argument checks name the function, as vec.go's do.
				if fn, _, _ := strings.Cut(name, " "); !strings.Contains(fmt.Sprint(e), "kernels: "+fn+" ") {
					t.Errorf("%s: panic %q does not name %s", name, e, fn)
				}
			}()
			fn()
		}()
	}
}

func TestF16KernelsNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	kt, v := randHalves(r, 64*16), randHalves(r, 16*64)
	q, out, y := make([][]float32, 6), make([][]float32, 6), make([][]float32, 6)
	for i := range q {
		q[i], out[i], y[i] = randVec(r, 64), make([]float32, 16), make([]float32, 64)
	}
	blocks := [][]uint16{kt, kt, kt, kt, kt}
	f, h := make([]float32, 100), make([]uint16, 100)
	for _, l := range f32Levels() {
		withLevels(t, l, q8Level, func() {
			allocs := testing.AllocsPerRun(100, func() {
				ScoresTF16(out[0], q[0], kt, 16)
				ScoresRowsF16(out[0], q[0], kt, 64)
				ScoresTMultiF16(out, q, kt, 16)
				ScoresTBlocksF16(f[:80], q[0], blocks, 16)
				AxpyStridedF16(y[0], out[0], v, 64)
				AxpyStridedMultiF16(y, out, v, 64)
				ToHalf(h, f)
				FromHalf(f, h)
			})
			if allocs != 0 {
				t.Errorf("%v: F16 kernels allocate %v times per call", l, allocs)
			}
		})
	}
}

// An F16 key cache block scored against a query: the scores equal those of
// the float32 kernel on the widened keys.
func ExampleScoresTF16() {
	const bs = 4                                        // slots per block
	keys := [][]float32{{1, 0.5}, {-2, 0.25}, {0.1, 3}} // three keys of two dims
	kt := make([]uint16, 2*bs)                          // transposed: dim-major
	for j, k := range keys {
		for d, x := range k {
			kt[d*bs+j] = FloatToHalf(x)
		}
	}
	q := []float32{2, 4}
	out := make([]float32, len(keys))
	ScoresTF16(out, q, kt, bs)
	fmt.Printf("%.4g\n", out)
	// Output: [4 -3 12.2]
}
