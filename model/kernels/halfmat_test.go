package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// F16 and BF16 matrices multiply bit for bit as the F32 matrices of their
// widened weights, at every level, for every batch size and for rows
// whose length is not a multiple of the vector width (but on AVX2, where
// such rows take the Go path); Row widens exactly; the weights are used
// in place.
func TestHalfMatMatchesF32(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []DType{F16, BF16} {
		for _, shape := range [][2]int{{1, 16}, {7, 64}, {13, 40}, {37, 256}, {8, 24}} {
			rows, cols := shape[0], shape[1]
			raw := make([]byte, 2*rows*cols)
			wide := make([]float32, rows*cols)
			for i := range wide {
				v := float32(r.NormFloat64())
				var h uint16
				if typ == F16 {
					h = FloatToHalf(v)
					wide[i] = HalfToFloat(h)
				} else {
					h = uint16(math.Float32bits(v) >> 16)
					wide[i] = BF16ToFloat(h)
				}
				binary.LittleEndian.PutUint16(raw[2*i:], h)
			}
			newMat := NewF16Mat
			if typ == BF16 {
				newMat = NewBF16Mat
			}
			m, err := newMat(rows, cols, raw)
			if err != nil {
				t.Fatal(err)
			}
			if m.Type != typ || m.Bytes() != int64(len(raw)) {
				t.Fatalf("%v: type %v, %d bytes", typ, m.Type, m.Bytes())
			}
			if littleEndian && &m.half[0] != (*uint16)(unsafeBytePtr(raw)) {
				t.Errorf("%v: the weights were copied", typ)
			}
			f, _ := NewF32Mat(rows, cols, wide)
			row := make([]float32, cols)
			for i := range rows {
				m.Row(row, i)
				if !slices.Equal(row, wide[i*cols:(i+1)*cols]) {
					t.Fatalf("%v row %d: %v, want %v", typ, i, row, wide[i*cols:(i+1)*cols])
				}
			}
			for _, n := range []int{1, 2, 3, 5, 16} {
				x := randVec(r, n*cols)
				for _, l := range f32Levels() {
					got, want := make([]float32, n*rows+1), make([]float32, n*rows+1)
					got[n*rows], want[n*rows] = 42, 42 // not written
					withLevels(t, l, q8Level, func() {
						m.MatMul(got, x, n)
						f.MatMul(want, x, n)
					})
					if l == levelAVX2 && cols%8 != 0 {
						// Go against the F32 tiles' tail: the same sums
						// in another order.
						for i := range want {
							if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Abs(float64(want[i]))+1e-5 {
								t.Fatalf("%v %dx%d n=%d %v: out[%d] = %v, want %v", typ, rows, cols, n, l, i, got[i], want[i])
							}
						}
						continue
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%v %dx%d n=%d %v: %v, want %v", typ, rows, cols, n, l, got, want)
					}
				}
			}
		}
	}
	if _, err := NewF16Mat(2, 8, make([]byte, 30)); err == nil {
		t.Error("a short buffer was accepted")
	}
	if _, err := NewBF16Mat(0, 8, nil); err == nil {
		t.Error("no rows were accepted")
	}
}

// MatMulMany takes F32, F16 and BF16 matrices in one call.
func TestHalfMatMany(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	rows, cols, n := 24, 32, 3
	w := randVec(r, rows*cols)
	raw16, rawbf := make([]byte, 2*rows*cols), make([]byte, 2*rows*cols)
	for i, v := range w {
		binary.LittleEndian.PutUint16(raw16[2*i:], FloatToHalf(v))
		binary.LittleEndian.PutUint16(rawbf[2*i:], uint16(math.Float32bits(v)>>16))
	}
	a, _ := NewF32Mat(rows, cols, w)
	b, _ := NewF16Mat(rows, cols, raw16)
	c, _ := NewBF16Mat(rows, cols, rawbf)
	x := randVec(r, n*cols)
	outs := [][]float32{make([]float32, n*rows), make([]float32, n*rows), make([]float32, n*rows)}
	MatMulMany([]*Mat{a, b, c}, outs, x, n)
	for i, m := range []*Mat{a, b, c} {
		want := make([]float32, n*rows)
		m.MatMul(want, x, n)
		if !slices.Equal(outs[i], want) {
			t.Errorf("%v: MatMulMany differs from MatMul", m.Type)
		}
	}
}
