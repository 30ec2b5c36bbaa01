package gguf

import (
	"encoding/binary"
	"math"
	"slices"
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

// TestDequantizeQ2K checks a hand-built Q2_K block against values worked
// out from ggml's block_q2_K: scales[16], qs[64], then f16 d and dmin;
// sub-block s (16 elements) has scale scales[s]&15 and min scales[s]>>4,
// and x = d*scale*q - dmin*min. Element e = 128h + 32p + 16k + l (half h,
// pass p, k picking quant bytes 0-15 or 16-31 of the half, l < 16) is in
// sub-block s = 8h + 2p + k and has q = bits 2p, 2p+1 of qs[32h + 16k + l].
func TestDequantizeQ2K(t *testing.T) {
	b := make([]byte, 0, 84)
	for s := range 16 { // scale s, min 15-s
		b = append(b, byte(s)|byte(15-s)<<4)
	}
	for range 64 { // 0xe4 = 0b11_10_01_00: pass p reads q = p
		b = append(b, 0xe4)
	}
	b[16+20] = 0x4e                        // byte 20 of half 0 (k = 1, l = 4): 0b01_00_11_10, q = 2, 3, 0, 1 by pass
	b = append(b, le16(0x3c00, 0x3800)...) // d = 1, dmin = 0.5
	got := deq(t, Q2_K, b, 256)
	checkAt(t, Q2_K, got, map[int]float32{
		0:   0*0 - 0.5*15, // s 0, q 0
		16:  1*0 - 0.5*14, // s 1, q 0
		32:  2*1 - 0.5*13, // p 1, k 0: s 2, q 1
		48:  3*1 - 0.5*12, // s 3
		64:  4*2 - 0.5*11, // p 2: s 4, q 2
		112: 7*3 - 0.5*8,  // p 3, k 1: s 7, q 3
		128: 8*0 - 0.5*7,  // h 1: s 8, q 0
		255: 15*3 - 0.5*0, // s 15, q 3
		20:  1*2 - 0.5*14, // byte 20 of half 0 in pass 0 ...
		52:  3*3 - 0.5*12, // ... pass 1
		84:  5*0 - 0.5*10, // ... pass 2
		116: 7*1 - 0.5*8,  // ... pass 3
		148: 9*0 - 0.5*6,  // byte 20 of half 1 is 0xe4 again
	})
}

// TestDequantizeQ3K checks a hand-built Q3_K block against values worked
// out from ggml's block_q3_K: hmask[32], qs[64], scales[12], f16 d. Elements
// map to sub-blocks and 2-bit fields as in Q2_K (s = 8h + 2p + k); the third
// bit is bit 4h+p of hmask[16k + l]: q = low2 when set, low2-4 when clear.
// The 6-bit scale S_s has its low nibble in scales[s%8] (low nibble for s
// < 8, high for s >= 8) and its top two bits in bits 2*(s/4) of
// scales[8 + s%4]; x = d*(S_s-32)*q.
func TestDequantizeQ3K(t *testing.T) {
	hm := make([]byte, 32)
	for i := range hm {
		hm[i] = 0xff
	}
	hm[3] = 0     // element l = 3 of k = 0: every pass clear
	hm[20] = 0x0f // l = 4 of k = 1: set in half 0, clear in half 1
	qs := make([]byte, 64)
	for i := range 32 {
		qs[i] = 0xe4    // half 0: pass p gives low2 = p
		qs[32+i] = 0x1b // half 1: 0b00_01_10_11, low2 = 3-p
	}
	sc := make([]byte, 12)
	sc[0] = 0xf1  // S_0 low 1, S_8 low 15
	sc[1] = 0x05  // S_1 low 5, S_9 low 0
	sc[2] = 0x03  // S_2 low 3
	sc[8] = 0x62  // 0b01_10_00_10: top bits S_0 2, S_4 0, S_8 2, S_12 1
	sc[9] = 0x02  // S_1 top 2; S_5, S_9, S_13 top 0
	sc[10] = 0x0a // S_2 2, S_6 2; S_10, S_14 0
	sc[11] = 0x0a // S_3 2, S_7 2; S_11, S_15 0
	// So S-32: s0 1, s1 5, s2 3, s3 0, s4 -32, s5 -32, s6 0, s7 0,
	// s8 15, s9 -32, s10 -32, s11 -32, s12 -16, s13 -32, s14 -32, s15 -32.
	b := append(append(append(hm, qs...), sc...), le16(0x3800)...) // d = 0.5
	got := deq(t, Q3_K, b, 256)
	checkAt(t, Q3_K, got, map[int]float32{
		0:   0.5 * 1 * 0,    // s 0, q 0
		3:   0.5 * 1 * -4,   // hmask[3] clear: q 0-4
		16:  0.5 * 5 * 0,    // s 1
		32:  0.5 * 3 * 1,    // p 1: s 2, q 1
		35:  0.5 * 3 * -3,   // q 1-4
		64:  0.5 * -32 * 2,  // p 2: s 4, q 2
		67:  0.5 * -32 * -2, // q 2-4
		84:  0.5 * -32 * 2,  // p 2, k 1, l 4: s 5, bit 2 of hmask[20] set
		128: 0.5 * 15 * 3,   // h 1, p 0: s 8, q 3
		131: 0.5 * 15 * -1,  // q 3-4
		144: 0.5 * -32 * 3,  // s 9
		148: 0.5 * -32 * -1, // bit 4 of hmask[20] clear
		192: 0.5 * -16 * 1,  // h 1, p 2: s 12, q 1
		195: 0.5 * -16 * -3,
		240: 0.5 * -32 * 0,  // s 15, q 0
		244: 0.5 * -32 * -4, // bit 7 of hmask[20] clear
	})
}

// iq4Table is kvalues_iq4nl from ggml-common.h, copied here by hand so that
// a typo in the package's table shows.
var iq4Table = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// TestDequantizeIQ4NL: ggml's block_iq4_nl is an f16 d and 16 bytes;
// element j is d*table[low nibble of byte j], element j+16 uses the high
// nibble. With nibbles(), element j holds index j and element j+16 index
// 15-j.
func TestDequantizeIQ4NL(t *testing.T) {
	b := append(le16(0x3800), nibbles()...) // d = 0.5
	b = append(b, le16(0xc000)...)          // second block: d = -2,
	b = append(b, make([]byte, 16)...)      // every index 0
	got := deq(t, IQ4_NL, b, 64)
	for j := range 16 {
		if got[j] != 0.5*iq4Table[j] || got[j+16] != 0.5*iq4Table[15-j] {
			t.Errorf("IQ4_NL elements %d, %d = %v, %v", j, j+16, got[j], got[j+16])
		}
	}
	checkAt(t, IQ4_NL, got, map[int]float32{0: -63.5, 7: -5, 8: 0.5, 15: 56.5, 16: 56.5, 31: -63.5, 32: 254, 63: 254})
}

// TestDequantizeIQ4XS: ggml's block_iq4_xs is f16 d, uint16 scales_h, 4
// bytes scales_l, 128 bytes qs. Sub-block i (32 elements) has the 6-bit
// scale ls = nibble i%2 of scales_l[i/2] (low nibble for even i) | bits 2i,
// 2i+1 of scales_h << 4, and decodes as an IQ4_NL block over qs[16i:16i+16]
// with d*(ls-32) for its scale.
func TestDequantizeIQ4XS(t *testing.T) {
	// Low nibbles i+1; top bits 2, 2, 0, 1, 3, 2, 2, 2: ls-32 = 1, 2, -29,
	// -12, 21, 6, 7, 8.
	sh := uint16(2 | 2<<2 | 0<<4 | 1<<6 | 3<<8 | 2<<10 | 2<<12 | 2<<14)
	b := append(le16(0x3400, sh), 0x21, 0x43, 0x65, 0x87) // d = 0.25
	for range 8 {
		b = append(b, nibbles()...)
	}
	got := deq(t, IQ4_XS, b, 256)
	checkAt(t, IQ4_XS, got, map[int]float32{
		0:        0.25 * 1 * -127, // sub-block 0, index 0
		15:       0.25 * 1 * 113,  // index 15
		16:       0.25 * 1 * 113,  // high nibble of byte 0: index 15
		32:       0.25 * 2 * -127,
		64:       0.25 * -29 * -127,
		96 + 16:  0.25 * -12 * 113,
		128 + 8:  0.25 * 21 * 1,
		160 + 9:  0.25 * 6 * 13,
		192 + 31: 0.25 * 7 * -127,
		255:      0.25 * 8 * -127,
	})
}

func TestDequantizeErrors(t *testing.T) {
	for _, c := range []struct {
		t    Type
		data int
		n    int
		want string
	}{
		{IQ2_XXS, 66, 256, "IQ2_XXS is not supported (supported: F32, F16, BF16, Q8_0, "},
		{IQ3_S, 110, 256, "IQ3_S is not supported"},
		{IQ1_M, 56, 256, "IQ1_M is not supported"},
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
	for _, typ := range []Type{F32, Q8_0, Q4_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS} {
		data := make([]byte, len(out)/typ.BlockSize()*typ.TypeSize())
		if n := testing.AllocsPerRun(10, func() { Dequantize(typ, data, out) }); n != 0 {
			t.Errorf("%s: %v allocations per call", typ, n)
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range []Type{F32, F16, Q8_0, Q4_0, Q4_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS} {
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

// CanDequantize says yes to exactly the types DequantizeTypes names.
func TestCanDequantize(t *testing.T) {
	names := strings.Split(DequantizeTypes, ", ")
	for ty := Type(0); ty < 64; ty++ {
		if got, want := CanDequantize(ty), slices.Contains(names, ty.String()); got != want {
			t.Errorf("CanDequantize(%v) = %v, want %v", ty, got, want)
		}
	}
}
