package gguf

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
)

func le16(xs ...uint16) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func deq(t *testing.T, typ Type, data []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := Dequantize(typ, data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAt compares selected elements with hand-computed values.
func checkAt(t *testing.T, typ Type, got []float32, want map[int]float32) {
	t.Helper()
	for i, w := range want {
		if got[i] != w {
			t.Errorf("%s element %d = %v, want %v", typ, i, got[i], w)
		}
	}
}

func TestDequantizePlain(t *testing.T) {
	f32 := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5)), math.Float32bits(-2))
	checkAt(t, F32, deq(t, F32, f32, 2), map[int]float32{0: 1.5, 1: -2})

	got := deq(t, F16, le16(0x3c00, 0xc000, 0x3555, 0x0001, 0x7c00), 5)
	checkAt(t, F16, got, map[int]float32{0: 1, 1: -2, 2: 0.333251953125, 3: 5.9604645e-08})
	if !math.IsInf(float64(got[4]), 1) {
		t.Errorf("F16 0x7c00 = %v, want +Inf", got[4])
	}

	checkAt(t, BF16, deq(t, BF16, le16(0x3f80, 0xc040, 0x4049), 3), map[int]float32{0: 1, 1: -3, 2: 3.140625})
}

func TestDequantizeQ8_0(t *testing.T) {
	// Block 0: d = 0.5, q[j] = 8j-128. Block 1: d = -1, q[j] = j.
	b := le16(0x3800)
	for j := range 32 {
		b = append(b, byte(int8(8*j-128)))
	}
	b = append(b, le16(0xbc00)...)
	for j := range 32 {
		b = append(b, byte(j))
	}
	got := deq(t, Q8_0, b, 64)
	for j := range 32 {
		if want := float32(8*j-128) / 2; got[j] != want {
			t.Errorf("block 0 element %d = %v, want %v", j, got[j], want)
		}
		if got[32+j] != float32(-j) {
			t.Errorf("block 1 element %d = %v, want %v", j, got[32+j], -j)
		}
	}
}

// nibbles returns 16 bytes whose low nibbles count up and high nibbles down:
// element j holds j and element j+16 holds 15-j.
func nibbles() []byte {
	b := make([]byte, 16)
	for j := range b {
		b[j] = byte(j) | byte(15-j)<<4
	}
	return b
}

func TestDequantizeQ4(t *testing.T) {
	// Q4_0, d = 2: x = 2*(q-8).
	got := deq(t, Q4_0, append(le16(0x4000), nibbles()...), 32)
	for j := range 16 {
		if got[j] != float32(2*(j-8)) || got[j+16] != float32(2*(7-j)) {
			t.Errorf("Q4_0 elements %d, %d = %v, %v", j, j+16, got[j], got[j+16])
		}
	}
	// Q4_1, d = 0.5, m = -1: x = q/2 - 1.
	got = deq(t, Q4_1, append(le16(0x3800, 0xbc00), nibbles()...), 32)
	checkAt(t, Q4_1, got, map[int]float32{0: -1, 1: -0.5, 15: 6.5, 16: 6.5, 31: -1})
}

func TestDequantizeQ5(t *testing.T) {
	// High bits set for elements 0 and 31 only.
	qh := binary.LittleEndian.AppendUint32(nil, 1|1<<31)
	// Q5_0, d = 1: x = q-16.
	got := deq(t, Q5_0, append(append(le16(0x3c00), qh...), nibbles()...), 32)
	checkAt(t, Q5_0, got, map[int]float32{0: 0, 1: -15, 15: -1, 16: -1, 30: -15, 31: 0})
	// Q5_1, d = 1, m = 0.5: x = q+0.5.
	got = deq(t, Q5_1, append(append(le16(0x3c00, 0x3800), qh...), nibbles()...), 32)
	checkAt(t, Q5_1, got, map[int]float32{0: 16.5, 1: 1.5, 16: 15.5, 31: 16.5})
}

func TestDequantizeQ4K(t *testing.T) {
	// d = 1, dmin = 0.5. Scales/mins of sub-blocks 0-3: (1,10) (2,11)
	// (3,12) (4,13); sub-block 4: (21,39), its top bits borrowed from
	// bytes 0 and 4; sub-blocks 5-7: zero. Every quant byte is 0x93: low
	// nibble 3, high nibble 9.
	b := le16(0x3c00, 0x3800)
	b = append(b, 0x41, 2, 3, 4, 0x8a, 11, 12, 13, 0x75, 0, 0, 0)
	for range 128 {
		b = append(b, 0x93)
	}
	got := deq(t, Q4_K, b, 256)
	// x = d*sc*q - dmin*m
	checkAt(t, Q4_K, got, map[int]float32{
		0: 1*3 - 5, 31: -2, // sub-block 0: low nibbles of bytes 0-31
		32: 2*9 - 5.5, 63: 12.5, // sub-block 1: high nibbles
		64: 3*3 - 6, 96: 4*9 - 6.5,
		128: 21*3 - 19.5, 159: 43.5,
		160: 0, 255: 0,
	})
}

// Q5_K is Q4_K with a fifth bit per weight from qh: bit j of qh[l] for
// sub-block j.
func TestDequantizeQ5K(t *testing.T) {
	b := le16(0x3c00, 0x3800)                                     // d = 1, dmin = 0.5
	b = append(b, 0x41, 2, 3, 4, 0x8a, 11, 12, 13, 0x75, 0, 0, 0) // as in TestDequantizeQ4K
	for l := range 32 {
		qh := byte(0)
		if l == 0 {
			qh = 0x01 | 0x02 | 0x10 // sub-blocks 0, 1 and 4 of element 0
		}
		b = append(b, qh)
	}
	for range 128 {
		b = append(b, 0x93)
	}
	got := deq(t, Q5_K, b, 256)
	checkAt(t, Q5_K, got, map[int]float32{
		0: 1*(3+16) - 5, 1: 1*3 - 5, 31: -2,
		32: 2*(9+16) - 5.5, 33: 2*9 - 5.5,
		64: 3*3 - 6, 96: 4*9 - 6.5,
		128: 21*(3+16) - 19.5, 129: 21*3 - 19.5,
		160: 0, 255: 0,
	})
}

func TestDequantizeQ6K(t *testing.T) {
	// ql bytes 0x21 (low nibble 1, high 2); qh bytes 0xe4 (2-bit fields 0,
	// 1, 2, 3 from the bottom); scales 1, 2, -3, 4, ..., 16; d = 0.5. So
	// the four quarters of each half hold q-32 = -31, -15, 2, 18.
	b := make([]byte, 0, 210)
	for range 128 {
		b = append(b, 0x21)
	}
	for range 64 {
		b = append(b, 0xe4)
	}
	for i := range 16 {
		s := int8(i + 1)
		if i == 2 {
			s = -3
		}
		b = append(b, byte(s))
	}
	b = append(b, le16(0x3800)...)
	got := deq(t, Q6_K, b, 256)
	checkAt(t, Q6_K, got, map[int]float32{
		0: 0.5 * 1 * -31, 16: 0.5 * 2 * -31,
		32: 0.5 * -3 * -15, 48: 0.5 * 4 * -15,
		64: 0.5 * 5 * 2, 96: 0.5 * 7 * 18, 127: 0.5 * 8 * 18,
		128: 0.5 * 9 * -31, 255: 0.5 * 16 * 18,
	})
}

func TestDequantizeErrors(t *testing.T) {
	for _, c := range []struct {
		t    Type
		data int
		n    int
		want string
	}{
		{Q3_K, 110, 256, "Q3_K is not supported"},
		{Type(99), 4, 1, "unknown tensor type 99"},
		{F32, 7, 2, "F32: 7 bytes of data for 2 elements, want 8"},
		{Q8_0, 34, 31, "31 elements is not a multiple of the block size 32"},
		{Q8_0, 35, 32, "35 bytes of data for 32 elements, want 34"},
	} {
		err := Dequantize(c.t, make([]byte, c.data), make([]float32, c.n))
		if err == nil || !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", c.t, c.want, err)
		}
	}
}

func TestDequantizeNoAlloc(t *testing.T) {
	out := make([]float32, 256)
	for _, typ := range []Type{F32, Q8_0, Q4_K} {
		data := make([]byte, len(out)/typ.BlockSize()*typ.TypeSize())
		if n := testing.AllocsPerRun(10, func() { Dequantize(typ, data, out) }); n != 0 {
			t.Errorf("%s: %v allocations per call", typ, n)
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range []Type{F32, F16, Q8_0, Q4_0, Q4_K, Q6_K} {
		b.Run(typ.String(), func(b *testing.B) {
			out := make([]float32, 1<<16)
			data := make([]byte, len(out)/typ.BlockSize()*typ.TypeSize())
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				Dequantize(typ, data, out)
			}
		})
	}
}

// The kernels read Q4_K, Q5_K, Q6_K and Q4_0 blocks as this package
// dequantizes them: an encoded matrix's rows match Dequantize exactly, in
// the file's layout (3 rows) and in groups of eight rows (8; Q5_K and
// Q4_0 are kept so only).
func TestKQuantMatRows(t *testing.T) {
	for _, c := range []struct {
		typ    Type
		encode func(rows, cols int, w []float32) ([]byte, error)
		wrap   func(rows, cols int, raw []byte) (*kernels.Mat, error)
	}{{Q4_K, kernels.EncodeQ4K, kernels.NewQ4KMat}, {Q5_K, kernels.EncodeQ5K, kernels.NewQ5KMat}, {Q6_K, kernels.EncodeQ6K, kernels.NewQ6KMat}, {Q4_0, kernels.EncodeQ40, kernels.NewQ40Mat}} {
		for _, rows := range []int{3, 8} {
			if rows%8 != 0 && (c.typ == Q5_K || c.typ == Q4_0) {
				continue
			}
			cols := 512
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32(math.Sin(float64(i))) * float32(1+i%7)
			}
			raw, err := c.encode(rows, cols, w)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, rows*cols)
			if err := Dequantize(c.typ, raw, want); err != nil {
				t.Fatal(err)
			}
			m, err := c.wrap(rows, cols, raw)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, cols)
			for r := range rows {
				m.Row(got, r)
				for i := range cols {
					if got[i] != want[r*cols+i] {
						t.Fatalf("%v %d rows: row %d col %d: %g, Dequantize %g", c.typ, rows, r, i, got[i], want[r*cols+i])
					}
				}
			}
		}
	}
}
