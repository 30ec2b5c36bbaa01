package kernels

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// withLevels runs fn with the given implementations selected.
func withLevels(t testing.TB, f32, q8 level, fn func()) {
	t.Helper()
	of, oq := f32Level, q8Level
	f32Level, q8Level = f32, q8
	defer func() { f32Level, q8Level = of, oq }()
	fn()
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// dotRef returns the float64 dot product and the sum of |terms|, the scale
// against which rounding errors are measured.
func dotRef(a, b []float32) (sum, abs float64) {
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		sum += p
		abs += math.Abs(p)
	}
	return sum, abs
}

func TestDotAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70, 127, 128, 129, 255, 1000, 4099}
	for _, l := range f32Levels() {
		for _, n := range sizes {
			for _, off := range []int{0, 1, 3} { // unaligned starts
				a := randVec(r, n+off)[off:]
				b := randVec(r, n+off)[off:]
				withLevels(t, l, q8Level, func() {
					got := Dot(a, b)
					want, abs := dotRef(a, b)
					if math.Abs(float64(got)-want) > 1e-5*abs+1e-30 {
						t.Errorf("%v: Dot(len %d) = %g, want %g", l, n, got, want)
					}

					y := randVec(r, n+off)[off:]
					y0 := append([]float32(nil), y...)
					ya := append([]float32(nil), y...)
					ya = append(ya, 777)
					const alpha = 0.37
					Axpy(alpha, a, ya[:n])
					for i := range n {
						want := float64(y0[i]) + alpha*float64(a[i])
						scale := math.Abs(float64(y0[i])) + math.Abs(alpha*float64(a[i]))
						if math.Abs(float64(ya[i])-want) > 1e-6*scale {
							t.Fatalf("%v: Axpy(len %d)[%d] = %g, want %g", l, n, i, ya[i], want)
						}
					}
					if ya[n] != 777 {
						t.Fatalf("%v: Axpy(len %d) wrote past the end", l, n)
					}

					s := append([]float32(nil), y0...)
					Add(s, a)
					for i := range n {
						if s[i] != y0[i]+a[i] {
							t.Fatalf("%v: Add(len %d)[%d] = %g, want %g", l, n, i, s[i], y0[i]+a[i])
						}
					}
				})
			}
		}
	}
}

func TestStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, l := range f32Levels() {
		for _, dim := range []int{1, 7, 8, 16, 17, 48, 64, 65, 100, 128, 130, 200} {
			for _, n := range []int{0, 1, 3, 4, 5, 9, 33} {
				for _, pad := range []int{0, 3} {
					stride := dim + pad
					q := randVec(r, dim)
					k := randVec(r, max(0, (n-1)*stride+dim))
					out := make([]float32, n+1)
					out[n] = 42
					withLevels(t, l, q8Level, func() { DotStrided(out[:n], q, k, stride) })
					if out[n] != 42 {
						t.Fatalf("%v: DotStrided wrote past out", l)
					}
					for i := 0; i < n; i++ {
						want, abs := dotRef(q, k[i*stride:i*stride+dim])
						if math.Abs(float64(out[i])-want) > 1e-5*abs {
							t.Fatalf("%v dim=%d n=%d stride=%d: out[%d] = %g, want %g", l, dim, n, stride, i, out[i], want)
						}
					}

					a := randVec(r, n)
					y := randVec(r, dim+1)
					y[dim] = 42
					want := make([]float64, dim)
					scale := make([]float64, dim)
					for i := range want {
						want[i], scale[i] = float64(y[i]), math.Abs(float64(y[i]))
						for tt := 0; tt < n; tt++ {
							p := float64(a[tt]) * float64(k[tt*stride+i])
							want[i] += p
							scale[i] += math.Abs(p)
						}
					}
					withLevels(t, l, q8Level, func() { AxpyStrided(y[:dim], a, k, stride) })
					if y[dim] != 42 {
						t.Fatalf("%v: AxpyStrided wrote past y", l)
					}
					for i := range want {
						if math.Abs(float64(y[i])-want[i]) > 1e-5*scale[i] {
							t.Fatalf("%v dim=%d n=%d stride=%d: y[%d] = %g, want %g", l, dim, n, stride, i, y[i], want[i])
						}
					}
				}
			}
		}
	}
}

func TestScoresT(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	nan := float32(math.NaN())
	for _, dim := range []int{0, 1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 128} {
		for _, bs := range []int{1, 3, 8, 15, 16, 17, 31, 32, 33, 48} {
			for _, n := range []int{1, 2, bs / 2, bs - 1, bs} {
				if n < 1 || n > bs {
					continue
				}
				// Slots n..bs-1 and everything past the last row hold NaN:
				// they must not be read.
				buf := make([]float32, dim*bs+40)
				for i := range buf {
					buf[i] = nan
				}
				kt := buf[3 : 3+max(0, (dim-1)*bs+n)]
				for d := 0; d < dim; d++ {
					for j := 0; j < n; j++ {
						kt[d*bs+j] = float32(r.NormFloat64())
					}
				}
				q := randVec(r, dim)
				key := make([]float32, dim)
				var first []float32
				for _, l := range f32Levels() {
					out := make([]float32, n+1)
					out[n] = 42
					withLevels(t, l, q8Level, func() { ScoresT(out[:n], q, kt, bs) })
					if out[n] != 42 {
						t.Fatalf("%v: ScoresT wrote past out", l)
					}
					for j := 0; j < n; j++ {
						for d := range key {
							key[d] = kt[d*bs+j]
						}
						want, abs := dotRef(q, key)
						if math.Abs(float64(out[j])-want) > 1e-5*abs || math.IsNaN(float64(out[j])) {
							t.Fatalf("%v dim=%d bs=%d n=%d: out[%d] = %g, want %g", l, dim, bs, n, j, out[j], want)
						}
					}
					// The same keys as rows (a staged block) score the same,
					// bit for bit.
					stride := dim + 3
					rows := make([]float32, (n-1)*stride+dim+5)
					for j := range n {
						for d := range dim {
							rows[j*stride+d] = kt[d*bs+j]
						}
					}
					got := make([]float32, n+1)
					got[n] = 42
					withLevels(t, l, q8Level, func() { ScoresRows(got[:n], q, rows[:max(0, (n-1)*stride+dim)], stride) })
					if !slices.Equal(got[:n], out[:n]) || got[n] != 42 {
						t.Fatalf("%v dim=%d n=%d: ScoresRows = %v, ScoresT %v", l, dim, n, got, out[:n])
					}
					// A slot's score does not depend on how many slots are
					// asked for, and the assembly levels agree bit for bit.
					for m := 1; m < n; m += 5 {
						part := make([]float32, m)
						withLevels(t, l, q8Level, func() { ScoresT(part, q, kt, bs) })
						for j := range part {
							if part[j] != out[j] {
								t.Fatalf("%v dim=%d bs=%d: slot %d of %d = %g, of %d = %g", l, dim, bs, j, m, part[j], n, out[j])
							}
						}
					}
					if l == levelGo {
						continue
					}
					if first == nil {
						first = out
					} else if !slices.Equal(first[:n], out[:n]) {
						t.Fatalf("%v dim=%d bs=%d n=%d: %v, other level %v", l, dim, bs, n, out[:n], first[:n])
					}
				}
			}
		}
	}
	ScoresT(nil, []float32{1}, nil, 16) // no slots: no access
}

// TestMulti checks that ScoresTMulti and AxpyStridedMulti give, query by
// query, exactly what ScoresT and AxpyStrided give, at every level.
func TestMulti(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, l := range f32Levels() {
		for _, dim := range []int{1, 5, 16, 33, 64, 80, 128} {
			for _, bs := range []int{3, 16, 17, 32} {
				for _, nq := range []int{1, 2, 3, 4, 5, 7, 9} {
					n := 1 + r.IntN(bs)
					kt := randVec(r, dim*bs)
					q, out, want := make([][]float32, nq), make([][]float32, nq), make([][]float32, nq)
					for i := range q {
						q[i], out[i], want[i] = randVec(r, dim+i)[i:], make([]float32, n+1), make([]float32, n)
						out[i][n] = 42
					}
					withLevels(t, l, q8Level, func() {
						for i := range q {
							ScoresT(want[i], q[i], kt, bs)
							out[i] = out[i][:n]
						}
						ScoresTMulti(out, q, kt, bs)
					})
					for i := range q {
						if !slices.Equal(out[i], want[i]) || out[i][:n+1][n] != 42 {
							t.Fatalf("%v dim=%d bs=%d nq=%d: ScoresTMulti query %d = %v, ScoresT %v", l, dim, bs, nq, i, out[i][:n+1], want[i])
						}
					}

					const stride = 200
					v := randVec(r, (n-1)*stride+dim)
					y, yw, a := make([][]float32, nq), make([][]float32, nq), make([][]float32, nq)
					for i := range y {
						a[i] = randVec(r, n)
						y[i] = append(randVec(r, dim), 42)
						yw[i] = slices.Clone(y[i][:dim])
						y[i] = y[i][:dim]
					}
					withLevels(t, l, q8Level, func() {
						for i := range y {
							AxpyStrided(yw[i], a[i], v, stride)
						}
						AxpyStridedMulti(y, a, v, stride)
					})
					for i := range y {
						if !slices.Equal(y[i], yw[i]) || y[i][:dim+1][dim] != 42 {
							t.Fatalf("%v dim=%d n=%d nq=%d: AxpyStridedMulti sum %d = %v, AxpyStrided %v", l, dim, n, nq, i, y[i], yw[i])
						}
					}
				}
			}
		}
	}
	ScoresTMulti(nil, nil, nil, 16)
	AxpyStridedMulti(nil, nil, nil, 16)

	for _, l := range f32Levels() {
		for _, dim := range []int{1, 6, 64, 67, 128} {
			for _, bs := range []int{1, 5, 16, 20, 32} {
				for nb := range 7 {
					q := randVec(r, dim)
					kt, want := make([][]float32, nb), make([]float32, nb*bs)
					for b := range kt {
						kt[b] = randVec(r, dim*bs)
					}
					out := make([]float32, nb*bs+1)
					out[nb*bs] = 42
					withLevels(t, l, q8Level, func() {
						for b := range kt {
							ScoresT(want[b*bs:(b+1)*bs], q, kt[b], bs)
						}
						ScoresTBlocks(out[:nb*bs], q, kt, bs)
					})
					if !slices.Equal(out[:nb*bs], want) || out[nb*bs] != 42 {
						t.Fatalf("%v dim=%d bs=%d blocks=%d: ScoresTBlocks = %v, ScoresT %v", l, dim, bs, nb, out, want)
					}
				}
			}
		}
	}
}

func TestAttentionKernelsPanic(t *testing.T) {
	f := make([]float32, 64)
	for name, fn := range map[string]func(){
		"ScoresT more slots than bs":  func() { ScoresT(f[:17], f[:4], f, 16) },
		"ScoresT short kt":            func() { ScoresT(f[:16], f[:5], f, 16) },
		"ScoresTMulti count mismatch": func() { ScoresTMulti([][]float32{f[:2]}, nil, f, 16) },
		"ScoresTMulti ragged outputs": func() { ScoresTMulti([][]float32{f[:2], f[:3]}, [][]float32{f[:2], f[:2]}, f, 16) },
		"ScoresTMulti ragged queries": func() { ScoresTMulti([][]float32{f[:2], f[:2]}, [][]float32{f[:2], f[:3]}, f, 16) },
		"AxpyStridedMulti ragged":     func() { AxpyStridedMulti([][]float32{f[:2], f[:3]}, [][]float32{f[:2], f[:2]}, f, 4) },
		"AxpyStridedMulti short v":    func() { AxpyStridedMulti([][]float32{f[:8]}, [][]float32{f[:9]}, f, 8) },
		"AxpyStridedMulti count":      func() { AxpyStridedMulti([][]float32{f[:8]}, nil, f, 8) },
		"ScoresRows short k":          func() { ScoresRows(f[:4], f[:8], f, 20) },
		"ScoresTBlocks short out":     func() { ScoresTBlocks(f[:31], f[:2], [][]float32{f, f}, 16) },
		"ScoresTBlocks short kt":      func() { ScoresTBlocks(f[:32], f[:8], [][]float32{f, f[:100]}, 16) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestAttentionKernelsNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	kt, v := randVec(r, 64*16), randVec(r, 16*64)
	q, out, y := make([][]float32, 6), make([][]float32, 6), make([][]float32, 6)
	for i := range q {
		q[i], out[i], y[i] = randVec(r, 64), make([]float32, 16), make([]float32, 64)
	}
	allocs := testing.AllocsPerRun(100, func() {
		ScoresT(out[0], q[0], kt, 16)
		ScoresRows(out[0], q[0], kt, 64)
		ScoresTMulti(out, q, kt, 16)
		ScoresTBlocks(v[:64], q[0], [][]float32{kt, kt, kt, kt}, 16)
		AxpyStrided(y[0], out[0], v, 64)
		AxpyStridedMulti(y, out, v, 64)
	})
	if allocs != 0 {
		t.Errorf("attention kernels allocate %v times per call", allocs)
	}
}

func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, l := range f32Levels() {
		for _, n := range []int{0, 1, 15, 16, 17, 100} {
			x := randVec(r, n+1)
			want := slices.Clone(x)
			for i := range n {
				want[i] *= 0.125 + 1e-3
			}
			withLevels(t, l, q8Level, func() { Scale(x[:n], 0.125+1e-3) })
			if !slices.Equal(x, want) {
				t.Fatalf("%v: Scale(len %d) = %v, want %v", l, n, x, want)
			}
		}
	}
}

func TestVectorOps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randVec(r, 77)
	w := randVec(r, 77)
	out := make([]float32, 77)
	RMSNorm(out, x, w, 1e-5)
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/77+1e-5)
	for i := range x {
		want := float64(w[i]) * inv * float64(x[i])
		if math.Abs(float64(out[i])-want) > 1e-5*math.Abs(want)+1e-7 {
			t.Fatalf("RMSNorm[%d] = %g, want %g", i, out[i], want)
		}
	}
	// Every level computes what the Go loop does, bit for bit (the norm
	// itself rests on Dot, which the levels may sum in other orders).
	for _, n := range []int{1, 15, 16, 17, 77, 768} {
		x, w := randVec(r, n), randVec(r, n)
		want := make([]float32, n)
		normScaleGo(want, x, w, 0.731)
		for _, l := range f32Levels() {
			got := make([]float32, n+1)
			got[n] = 42
			withLevels(t, l, q8Level, func() { normScale(got[:n], x, w, 0.731) })
			if got[n] != 42 {
				t.Errorf("%v: normScale(%d) wrote past its end", l, n)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: normScale(%d)[%d] = %g, want %g", l, n, i, got[i], want[i])
				}
			}
		}
	}

}

func TestSoftmaxSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, l := range f32Levels() {
		for _, n := range []int{1, 2, 5, 15, 16, 17, 31, 33, 64, 70, 1000} {
			x := randVec(r, n)
			for i := range x {
				x[i] *= 10 // spread: many terms underflow relative to the max
			}
			if n > 3 {
				x[1] = float32(math.Inf(-1)) // a masked position
				x[2] = -200
			}
			var m float64 = math.Inf(-1)
			for _, v := range x {
				m = max(m, float64(v))
			}
			want := make([]float64, n)
			var sum float64
			for i, v := range x {
				want[i] = math.Exp(float64(v - float32(m))) // the kernels subtract in float32
				sum += want[i]
			}
			p := append([]float32(nil), x...)
			withLevels(t, l, q8Level, func() { Softmax(p) })
			for i := range p {
				w := want[i] / sum
				if math.Abs(float64(p[i])-w) > 2e-6*w+1e-38 {
					t.Fatalf("%v: Softmax(len %d)[%d] = %g, want %g", l, n, i, p[i], w)
				}
			}
			// SoftmaxScaled is Scale then Softmax, bit for bit, the tail
			// left alone.
			const a = 0.125
			u := append(append([]float32(nil), x...), 42)
			v := append([]float32(nil), x...)
			withLevels(t, l, q8Level, func() {
				SoftmaxScaled(u[:n], a)
				Scale(v, a)
				Softmax(v)
			})
			if u[n] != 42 {
				t.Fatalf("%v: SoftmaxScaled(len %d) wrote past its end", l, n)
			}
			for i := range v {
				if math.Float32bits(u[i]) != math.Float32bits(v[i]) {
					t.Fatalf("%v: SoftmaxScaled(len %d)[%d] = %g, Scale+Softmax %g", l, n, i, u[i], v[i])
				}
			}

			h := randVec(r, n)
			for i := range h {
				h[i] *= 8
			}
			if n > 3 {
				h[0], h[1], h[2] = -120, 120, 0
			}
			if n >= 16 {
				// Around the ends of exp's range: e^x finite up to 88.72,
				// normal down to -87.3 (AVX2's exp8 scales by 2^(t-1)*2
				// and flushes below -86.5).
				copy(h[3:], []float32{-88.5, -88.8, -89.5, 88.5, 86.4, 86.6, 87.4, -86.4, -86.6, 1e-30, -1e-30, 0.5})
			}
			g := randVec(r, n)
			got := append([]float32(nil), h...)
			withLevels(t, l, q8Level, func() { SwiGLU(got, g) })
			for i := range got {
				v := float64(h[i])
				w := v / (1 + math.Exp(-v)) * float64(g[i])
				if math.Abs(float64(got[i])-w) > 2e-6*math.Abs(w)+1e-36 { // e^88.8 overflows float32: silu(-88.8) = -0
					t.Fatalf("%v: SwiGLU(len %d)[%d] = %g (h=%g g=%g), want %g", l, n, i, got[i], h[i], g[i], w)
				}
			}
		}
	}
}

// matRef is the float64 product with the dequantized weights, and the
// sum of |terms| for each output.
func matRef(m *Mat, x []float32, n int) (want, abs []float64) {
	want = make([]float64, n*m.Rows)
	abs = make([]float64, n*m.Rows)
	row := make([]float32, m.Cols)
	for r := 0; r < m.Rows; r++ {
		m.Row(row, r)
		for b := 0; b < n; b++ {
			want[b*m.Rows+r], abs[b*m.Rows+r] = dotRef(row, x[b*m.Cols:(b+1)*m.Cols])
		}
	}
	return want, abs
}

// Shapes with tails everywhere: rows not a multiple of 4 (F32) or 16
// (Q8_0 panels: pairs, a lone panel, a partial one), columns not a
// multiple of 16 (F32), batches that are not a multiple of the tile widths
// (and split unevenly among tiles).
var (
	testRows    = []int{1, 3, 4, 5, 8, 13, 16, 17, 32, 37, 48, 77}
	testColsF32 = []int{1, 5, 16, 17, 33, 64, 100, 288}
	testColsQ8  = []int{32, 64, 96, 160, 288, 512, 768, 1056}
	testBatches = []int{1, 2, 3, 4, 5, 7, 9, 11, 13, 16, 31, 64, 70}
)

func TestMatMulF32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, rows := range testRows {
		for _, cols := range testColsF32 {
			m, err := NewF32Mat(rows, cols, randVec(r, rows*cols))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range testBatches {
				if rows*cols*n > 400000 {
					continue
				}
				x := randVec(r, n*cols)
				want, abs := matRef(m, x, n)
				for _, l := range f32Levels() {
					withLevels(t, l, q8Level, func() {
						out := make([]float32, n*rows+1)
						out[n*rows] = 42
						m.MatMul(out, x, n)
						if out[n*rows] != 42 {
							t.Fatalf("%v %dx%d n=%d: wrote past the output", l, rows, cols, n)
						}
						for i := range want {
							if math.Abs(float64(out[i])-want[i]) > 1e-5*abs[i]+1e-30 {
								t.Fatalf("%v %dx%d n=%d: out[%d] = %g, want %g", l, rows, cols, n, i, out[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

func TestQuantizeQ8Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, cols := range testColsQ8 {
		for _, n := range []int{1, 3} {
			x := randVec(r, n*cols)
			// Exercise zero blocks, exact ties and large magnitudes.
			clear(x[:32])
			if cols >= 64 {
				for i := 32; i < 64; i++ {
					x[i] = float32(i-48) * 0.5
				}
			}
			x[len(x)-1] = 1e30
			want := make([]byte, n*q8XBytes(cols))
			quantizeQ8RowsGo(want, x, n, cols)
			for _, l := range q8Levels() {
				got := make([]byte, len(want))
				for i := range got {
					got[i] = 0xAA // the quantizer must write every byte
				}
				withLevels(t, f32Level, l, func() { quantizeQ8Rows(got, x, n, cols) })
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%v cols=%d n=%d: scratch byte %d = %#x, want %#x", l, cols, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// A row with a NaN or an infinity is quantized as the Go code does at
// AVX2 (the assembly reports it and the row is redone in Go).
func TestQuantizeQ8NonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		x := randVec(rand.New(rand.NewPCG(1, 1)), 96)
		x[40] = bad
		want := make([]byte, q8XBytes(96))
		quantizeQ8RowsGo(want, x, 1, 96)
		for _, l := range q8Levels() {
			if l == levelAVX512 {
				continue // quantQ8VNNI does not promise Go's bytes for these
			}
			got := make([]byte, len(want))
			withLevels(t, f32Level, l, func() { quantizeQ8Rows(got, x, 1, 96) })
			if !bytes.Equal(got, want) {
				t.Errorf("%v, %g: %x, want %x", l, bad, got, want)
			}
		}
	}
}

func TestMatMulQ8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, rows := range testRows {
		for _, cols := range testColsQ8 {
			m, err := QuantizeQ8(rows, cols, randVec(r, rows*cols))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range testBatches {
				if rows*cols*n > 400000 {
					continue
				}
				x := randVec(r, n*cols)
				want, abs := matRef(m, x, n)
				// The activation quantization error bound: each x moves by
				// at most half a step, amax/254, per block.
				qerr := make([]float64, n*rows)
				row := make([]float32, cols)
				for rr := 0; rr < rows; rr++ {
					m.Row(row, rr)
					for b := 0; b < n; b++ {
						for k := 0; k < cols; k += 32 {
							var amax, wabs float64
							for i := k; i < k+32; i++ {
								amax = max(amax, math.Abs(float64(x[b*cols+i])))
								wabs += math.Abs(float64(row[i]))
							}
							qerr[b*rows+rr] += amax / 254 * wabs
						}
					}
				}
				var ref []float32
				for _, l := range q8Levels() {
					withLevels(t, f32Level, l, func() {
						out := make([]float32, n*rows+1)
						out[n*rows] = 42
						m.MatMul(out, x, n)
						if out[n*rows] != 42 {
							t.Fatalf("%v %dx%d n=%d: wrote past the output", l, rows, cols, n)
						}
						for i := range want {
							if math.Abs(float64(out[i])-want[i]) > qerr[i]*1.0001+1e-5*abs[i] {
								t.Fatalf("%v %dx%d n=%d: out[%d] = %g, float product %g, beyond quantization bound %g",
									l, rows, cols, n, i, out[i], want[i], qerr[i])
							}
						}
						if l == levelGo {
							ref = out
							return
						}
						// Same quantized operands: only float rounding differs.
						for i := range want {
							if math.Abs(float64(out[i]-ref[i])) > 1e-6*(abs[i]+qerr[i]) {
								t.Fatalf("%v %dx%d n=%d: out[%d] = %g, pure Go %g", l, rows, cols, n, i, out[i], ref[i])
							}
						}
					})
				}
			}
		}
	}
}

func TestQ8Layout(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	w := randVec(r, 3*96)
	raw, err := EncodeQ8(3, 96, w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewQ8Mat(3, 96, raw)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 96)
	for rr := 0; rr < 3; rr++ {
		m.Row(row, rr)
		for b := 0; b < 3; b++ {
			blk := raw[(rr*3+b)*34:]
			d := HalfToFloat(uint16(blk[0]) | uint16(blk[1])<<8)
			for i := 0; i < 32; i++ {
				if want := d * float32(int8(blk[2+i])); row[b*32+i] != want {
					t.Fatalf("Row(%d)[%d] = %g, want %g", rr, b*32+i, row[b*32+i], want)
				}
			}
		}
	}
	if _, err := NewQ8Mat(3, 96, raw[:len(raw)-1]); err == nil {
		t.Error("NewQ8Mat accepted a short buffer")
	}
	if _, err := NewQ8Mat(3, 90, raw); err == nil {
		t.Error("NewQ8Mat accepted 90 columns")
	}
	if _, err := NewF32Mat(2, 3, make([]float32, 5)); err == nil {
		t.Error("NewF32Mat accepted 5 values for 2x3")
	}
}

// A -128 quant (not produced by EncodeQ8, but valid in a file) must work
// too: it is the edge of both the bias and the sign trick.
func TestQ8ExtremeQuants(t *testing.T) {
	const rows, cols = 5, 64
	raw := make([]byte, rows*cols/32*34)
	r := rand.New(rand.NewPCG(13, 14))
	for b := 0; b < rows*cols/32; b++ {
		blk := raw[b*34:]
		h := FloatToHalf(0.01 * float32(b+1))
		blk[0], blk[1] = byte(h), byte(h>>8)
		for i := 0; i < 32; i++ {
			switch r.IntN(3) {
			case 0:
				blk[2+i] = 0x80 // -128
			case 1:
				blk[2+i] = 0x7f // 127
			default:
				blk[2+i] = byte(r.IntN(256))
			}
		}
	}
	m, err := NewQ8Mat(rows, cols, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 4, 6} {
		x := randVec(r, n*cols)
		var ref []float32
		for _, l := range q8Levels() {
			out := make([]float32, n*rows)
			withLevels(t, f32Level, l, func() { m.MatMul(out, x, n) })
			if ref == nil {
				ref = out
				continue
			}
			for i := range out {
				if math.Abs(float64(out[i]-ref[i])) > 1e-5*math.Abs(float64(ref[i]))+1e-6 {
					t.Fatalf("%v n=%d: out[%d] = %g, pure Go %g", l, n, i, out[i], ref[i])
				}
			}
		}
	}
}

func TestMatMulConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	mf, _ := NewF32Mat(64, 256, randVec(r, 64*256))
	mq, _ := QuantizeQ8(64, 256, randVec(r, 64*256))
	x := randVec(r, 8*256)
	wantF := make([]float32, 8*64)
	wantQ := make([]float32, 8*64)
	mf.MatMul(wantF, x, 8)
	mq.MatMul(wantQ, x, 8)
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			out := make([]float32, 8*64)
			for it := 0; it < 20; it++ {
				for _, c := range []struct {
					m    *Mat
					want []float32
				}{{mf, wantF}, {mq, wantQ}} {
					c.m.MatMul(out, x, 8)
					for i := range out {
						if out[i] != c.want[i] {
							done <- fmt.Errorf("%v: out[%d] = %g, want %g", c.m.Type, i, out[i], c.want[i])
							return
						}
					}
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestMatMulNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	r := rand.New(rand.NewPCG(17, 18))
	mf, _ := NewF32Mat(256, 256, randVec(r, 256*256))
	mq, _ := QuantizeQ8(256, 256, randVec(r, 256*256))
	raw4, _ := EncodeQ4K(256, 256, randVec(r, 256*256))
	m4, _ := NewQ4KMat(256, 256, raw4)
	raw6, _ := EncodeQ6K(256, 256, randVec(r, 256*256))
	m6, _ := NewQ6KMat(256, 256, raw6)
	x := randVec(r, 16*256)
	out := make([]float32, 16*256)
	for _, m := range []*Mat{mf, mq, m4, m6} {
		for _, n := range []int{4, 16} { // 16: rows quantized on the pool
			m.MatMul(out, x, n)
			if a := testing.AllocsPerRun(50, func() { m.MatMul(out, x, n) }); a != 0 {
				t.Errorf("%v MatMul of %d rows: %v allocations per call", m.Type, n, a)
			}
		}
	}
	if a := testing.AllocsPerRun(50, func() { _ = Dot(x, x); Axpy(2, x, out) }); a != 0 {
		t.Errorf("Dot+Axpy: %v allocations per call", a)
	}
}

func TestMatMulBadSizes(t *testing.T) {
	m, _ := NewF32Mat(4, 8, make([]float32, 32))
	defer func() {
		if recover() == nil {
			t.Error("MatMul with a short x did not panic")
		}
	}()
	m.MatMul(make([]float32, 8), make([]float32, 15), 2)
}

// FuzzQuantizeQ8 checks the assembly quantizer against the Go one on
// arbitrary bit patterns (NaN and Inf excepted: their quants are unspecified).
func FuzzQuantizeQ8(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 191}, uint8(1))
	f.Add(make([]byte, 128), uint8(2))
	f.Add([]byte{1, 0, 0, 0, 255, 255, 127, 127, 0, 0, 0, 128}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, nb uint8) {
		cols := 32 * (int(nb)%5 + 1)
		x := make([]float32, cols)
		for i := range x {
			if len(data) >= 4*(i+1) {
				v := math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24)
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					v = 0
				}
				x[i] = v
			}
		}
		want := make([]byte, q8XBytes(cols))
		quantizeQ8RowsGo(want, x, 1, cols)
		for _, l := range q8Levels() {
			got := make([]byte, len(want))
			withLevels(t, f32Level, l, func() { quantizeQ8Rows(got, x, 1, cols) })
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%v: byte %d = %#x, want %#x (x=%v)", l, i, got[i], want[i], x)
				}
			}
		}
	})
}

// FuzzNewQ8Mat feeds arbitrary shapes and bytes: errors, never panics.
func FuzzNewQ8Mat(f *testing.F) {
	f.Add(2, 32, make([]byte, 68))
	f.Add(1, 64, make([]byte, 68))
	f.Add(-1, 32, []byte{})
	f.Add(1<<30, 1<<30, []byte{1})
	f.Fuzz(func(t *testing.T, rows, cols int, raw []byte) {
		m, err := NewQ8Mat(rows, cols, raw)
		if err != nil {
			return
		}
		out := make([]float32, rows)
		m.MatMul(out, make([]float32, cols), 1)
	})
}

// TestMatMulMany checks that one MatMulMany call computes what separate
// MatMul calls do, bit for bit, whatever the split among threads.
func TestMatMulMany(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const cols = 288
	for _, typ := range []DType{F32, Q8_0} {
		var mats []*Mat
		for _, rows := range []int{77, 16, 37} {
			w := randVec(r, rows*cols)
			m, err := NewF32Mat(rows, cols, w)
			if typ == Q8_0 {
				m, err = QuantizeQ8(rows, cols, w)
			}
			if err != nil {
				t.Fatal(err)
			}
			mats = append(mats, m)
		}
		for _, n := range []int{1, 5, 16} {
			x := randVec(r, n*cols)
			outs := make([][]float32, len(mats))
			for i, m := range mats {
				outs[i] = make([]float32, n*m.Rows)
			}
			MatMulMany(mats, outs, x, n)
			for i, m := range mats {
				want := make([]float32, n*m.Rows)
				m.MatMul(want, x, n)
				for e := range want {
					if outs[i][e] != want[e] {
						t.Fatalf("%v n=%d matrix %d: out[%d] = %g, MatMul %g", typ, n, i, e, outs[i][e], want[e])
					}
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MatMulMany of different column counts did not panic")
		}
	}()
	a, _ := NewF32Mat(2, 4, make([]float32, 8))
	b, _ := NewF32Mat(2, 8, make([]float32, 16))
	MatMulMany([]*Mat{a, b}, [][]float32{make([]float32, 2), make([]float32, 2)}, make([]float32, 8), 1)
}

// TestPrefetchRows: a hint that must accept any shape without faulting,
// rows past the end of x included.
func TestPrefetchRows(t *testing.T) {
	x := make([]float32, 1000)
	h := make([]uint16, 1000)
	for _, c := range [][3]int{{0, 0, 0}, {1, 64, 0}, {16, 64, 768}, {1000, 64, 128}, {3, 2000, 10}, {-1, 5, 5}, {5, 1, min(1<<40, math.MaxInt)}} {
		PrefetchRows(x, c[0], c[1], c[2])
		PrefetchRows(h, c[0], c[1], c[2])
		PrefetchRows(x[:0], c[0], c[1], c[2])
	}
}

// TestRoPE checks every level against the pure-Go rotation, both layouts,
// with head sizes the assembly takes and some it leaves to Go.
func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, half := range []int{1, 4, 8, 12, 16, 24, 32, 64} {
		for _, il := range []bool{true, false} {
			x0 := randVec(r, 2*half+1)
			cos, sin := make([]float32, half), make([]float32, half)
			for i := range cos {
				a := r.Float64() * 6.3
				cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			want := append([]float32(nil), x0...)
			ropeGo(want[:2*half], cos, sin, il)
			for _, l := range f32Levels() {
				got := append([]float32(nil), x0...)
				withLevels(t, l, q8Level, func() { RoPE(got[:2*half], cos, sin, il) })
				for i := range got {
					if math.Abs(float64(got[i]-want[i])) > 1e-6*(math.Abs(float64(x0[i]))+1) {
						t.Fatalf("%v half=%d interleaved=%v: x[%d] = %g, want %g", l, half, il, i, got[i], want[i])
					}
				}
				if got[2*half] != x0[2*half] {
					t.Fatalf("%v half=%d: wrote past the head", l, half)
				}
			}
		}
	}
}

// TestTranspose checks every level against the definition, for both
// element types, with the 16 rows the assembly takes (odd columns of
// halves go to Go) and other row counts; the elements past rows*cols in
// dst are left alone.
func TestTranspose(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, rc := range [][2]int{{16, 64}, {16, 128}, {16, 1}, {16, 2}, {16, 7}, {16, 96}, {1, 64}, {15, 64}, {17, 3}, {32, 64}, {0, 5}, {16, 0}} {
		rows, cols := rc[0], rc[1]
		src32 := randVec(r, rows*cols)
		src16 := make([]uint16, rows*cols)
		for i := range src16 {
			src16[i] = uint16(r.Uint32())
		}
		for _, l := range f32Levels() {
			got32 := make([]float32, rows*cols+3)
			got16 := make([]uint16, rows*cols+3)
			withLevels(t, l, q8Level, func() {
				Transpose(got32, src32, rows, cols)
				Transpose(got16, src16, rows, cols)
			})
			for rr := range rows {
				for c := range cols {
					if got32[c*rows+rr] != src32[rr*cols+c] || got16[c*rows+rr] != src16[rr*cols+c] {
						t.Fatalf("%v %dx%d: element (%d, %d) is %g / %#x, want %g / %#x", l, rows, cols, rr, c,
							got32[c*rows+rr], got16[c*rows+rr], src32[rr*cols+c], src16[rr*cols+c])
					}
				}
			}
			for i := rows * cols; i < len(got32); i++ {
				if got32[i] != 0 || got16[i] != 0 {
					t.Fatalf("%v %dx%d: element %d past the transpose written", l, rows, cols, i)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Transpose into a short dst did not panic")
		}
	}()
	Transpose(make([]float32, 10), make([]float32, 16), 4, 4)
}

// TestMatMulQ8Acts checks that products of rows quantized ahead, each on
// its own goroutine, are bit for bit MatMulMany's on every level, and that
// a mismatched batch panics.
func TestMatMulQ8Acts(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const cols = 96
	a1, _ := QuantizeQ8(40, cols, randVec(r, 40*cols))
	a2, _ := QuantizeQ8(17, cols, randVec(r, 17*cols))
	for _, n := range []int{0, 1, 5, 16} {
		x := randVec(r, n*cols)
		for _, l := range q8Levels() {
			want := [][]float32{make([]float32, n*40), make([]float32, n*17)}
			got := [][]float32{make([]float32, n*40), make([]float32, n*17)}
			var acts Q8Acts
			withLevels(t, f32Level, l, func() {
				MatMulMany([]*Mat{a1, a2}, want, x, n)
				acts.Reset(n, cols)
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						acts.Quantize(i, x[i*cols:(i+1)*cols])
					}()
				}
				wg.Wait()
				MatMulQ8Acts([]*Mat{a1, a2}, got, &acts)
			})
			for i := range got {
				if !bitsEqual(got[i], want[i]) {
					t.Fatalf("%v n=%d: matrix %d: MatMulQ8Acts = %v, MatMulMany %v", l, n, i, got[i], want[i])
				}
			}
		}
	}
	f, _ := NewF32Mat(2, cols, make([]float32, 2*cols))
	var acts Q8Acts
	acts.Reset(1, cols)
	for name, fn := range map[string]func(){
		"F32 matrix":    func() { MatMulQ8Acts([]*Mat{f}, [][]float32{make([]float32, 2)}, &acts) },
		"other width":   func() { acts.Reset(1, 64); MatMulQ8Acts([]*Mat{a1}, [][]float32{make([]float32, 40)}, &acts) },
		"row past n":    func() { acts.Reset(1, cols); acts.Quantize(1, make([]float32, cols)) },
		"short row":     func() { acts.Reset(1, cols); acts.Quantize(0, make([]float32, cols-1)) },
		"odd columns":   func() { acts.Reset(1, 33) },
		"short outputs": func() { acts.Reset(2, cols); MatMulQ8Acts([]*Mat{a1}, [][]float32{make([]float32, 40)}, &acts) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}
