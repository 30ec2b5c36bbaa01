package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The Q4_K encoder keeps the weights to about a sixteenth of each
// sub-block's range, and Row gives them back.
func TestQ4KEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, cols := 3, 512
	w := randVec(r, rows*cols)
	raw, err := EncodeQ4K(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewQ4KMat(rows, cols, raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.Bytes() != int64(len(raw)) || len(raw) != rows*cols/256*144 {
		t.Errorf("bytes %d, raw %d", m.Bytes(), len(raw))
	}
	row := make([]float32, cols)
	for i := range rows {
		m.Row(row, i)
		for c := 0; c < cols; c += 32 {
			lo, hi := float32(0), w[i*cols+c]
			for _, v := range w[i*cols+c : i*cols+c+32] {
				lo, hi = min(lo, v), max(hi, v)
			}
			for k := c; k < c+32; k++ {
				if d := math.Abs(float64(row[k] - w[i*cols+k])); d > float64(hi-lo)/15 {
					t.Fatalf("row %d col %d: %g for %g (range %g..%g)", i, k, row[k], w[i*cols+k], lo, hi)
				}
			}
		}
	}
	if _, err := NewQ4KMat(2, 512, raw); err == nil {
		t.Error("a short buffer was accepted")
	}
	if _, err := NewQ4KMat(1, 100, raw); err == nil {
		t.Error("columns not a multiple of 256 were accepted")
	}
}

// MatMul with Q4_K weights is the exact integer product with the Q8_K
// activations (float64 reference from the dequantized weights), at every
// level and batch size.
func TestQ4KMatMul(t *testing.T) { testKQuantMatMul(t, EncodeQ4K, NewQ4KMat) }

// The same for Q6_K.
func TestQ6KMatMul(t *testing.T) { testKQuantMatMul(t, EncodeQ6K, NewQ6KMat) }

// The same for Q5_K (rows a multiple of 8 only: others are refused).
func TestQ5KMatMul(t *testing.T) { testKQuantMatMul(t, EncodeQ5K, NewQ5KMat) }

// The same for Q4_0 (rows a multiple of 8 only).
func TestQ40MatMul(t *testing.T) { testKQuantMatMul(t, EncodeQ40, NewQ40Mat) }

func testKQuantMatMul(t *testing.T, encode func(rows, cols int, w []float32) ([]byte, error), newMat func(rows, cols int, raw []byte) (*Mat, error)) {
	for _, k16 := range []bool{false, true} {
		withK16(t, k16, func() { testKQuantMatMulLayout(t, encode, newMat) })
	}
}

// withK16 runs fn with new K-quant matrices in the 16-row layouts or not.
func withK16(t testing.TB, on bool, fn func()) {
	t.Helper()
	old := useK16
	useK16 = on
	defer func() { useK16 = old }()
	fn()
}

func testKQuantMatMulLayout(t *testing.T, encode func(rows, cols int, w []float32) ([]byte, error), newMat func(rows, cols int, raw []byte) (*Mat, error)) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, cols := range []int{256, 768} {
		for _, rows := range []int{1, 7, 16, 40, 45} { // 40: two pairs of groups and one more (VNNI)
			w := randVec(r, rows*cols)
			raw, _ := encode(rows, cols, w)
			m, err := newMat(rows, cols, raw)
			if err != nil && rows%8 != 0 && (len(raw) == rows*cols/256*q5kBlockBytes || len(raw) == rows*cols/32*q40BlockBytes) {
				continue // Q5_K, Q4_0: groups of eight rows only
			}
			if err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, rows*cols)
			for i := range rows {
				m.Row(deq[i*cols:(i+1)*cols], i)
			}
			for _, n := range []int{1, 2, 3, 4, 5, 9, 16} {
				x := randVec(r, n*cols)
				xq := make([]byte, n*q8kBytes(cols))
				for j := range n {
					quantizeQ8KRow(xq[j*q8kBytes(cols):], x[j*cols:(j+1)*cols])
				}
				for _, l := range f32Levels() {
					out := make([]float32, n*rows+1)
					out[n*rows] = 42
					withLevels(t, l, q8Level, func() { m.MatMul(out, x, n) })
					if out[n*rows] != 42 {
						t.Fatalf("%v: wrote past the output", l)
					}
					for j := range n {
						yb := xq[j*q8kBytes(cols):]
						for i := range rows {
							var want, abs float64
							for c := range cols {
								blk := yb[c/256*q8kBlockBytes:]
								dy := float64(math.Float32frombits(binary.LittleEndian.Uint32(blk)))
								v := float64(deq[i*cols+c]) * dy * float64(int8(blk[q8kQuantOff+c%256]))
								want += v
								abs += math.Abs(v)
							}
							if got := float64(out[j*rows+i]); math.Abs(got-want) > 1e-5*abs+1e-6 {
								t.Fatalf("%v %dx%d n=%d: out[%d][%d] = %g, want %g", l, rows, cols, n, j, i, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// The Q6_K encoder keeps the weights to half a step of their run's scale.
func TestQ6KEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows, cols := 2, 512
	w := randVec(r, rows*cols)
	raw, err := EncodeQ6K(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewQ6KMat(rows, cols, raw)
	if err != nil || m.Bytes() != int64(rows*cols/256*210) {
		t.Fatalf("%v, %d bytes", err, m.Bytes())
	}
	row := make([]float32, cols)
	for i := range rows {
		m.Row(row, i)
		for g := 0; g < cols; g += 16 {
			var amax float64
			for _, v := range w[i*cols+g : i*cols+g+16] {
				amax = max(amax, math.Abs(float64(v)))
			}
			for k := g; k < g+16; k++ {
				if d := math.Abs(float64(row[k] - w[i*cols+k])); d > amax/31*0.6+amax*0.01 {
					t.Fatalf("row %d col %d: %g for %g", i, k, row[k], w[i*cols+k])
				}
			}
		}
	}
}

// Q8_K quantization: d = max|x|/127, q = round-half-even(x/d), the runs'
// sums; ties and the extremes included.
func TestQuantizeQ8K(t *testing.T) {
	testQuantizeQ8KAsm(t)
	r := rand.New(rand.NewPCG(9, 10))
	x := randVec(r, 512)
	x[3], x[4], x[5] = 0, -x[6], 2.5 // a zero and a tie-prone value
	for i := 256; i < 512; i++ {
		x[i] = float32(i-384) / 2 // exact halves: ties to even
	}
	dst := make([]byte, q8kBytes(len(x)))
	quantizeQ8KRow(dst, x)
	for b := range 2 {
		xb, o := x[256*b:256*b+256], dst[b*q8kBlockBytes:]
		var amax float64
		for _, v := range xb {
			amax = max(amax, math.Abs(float64(v)))
		}
		d := float32(amax) / 127
		if got := math.Float32frombits(binary.LittleEndian.Uint32(o)); got != d {
			t.Fatalf("block %d: d = %g, want %g", b, got, d)
		}
		id := 1 / d
		for g := range 16 {
			var sum int16
			for i := 16 * g; i < 16*g+16; i++ {
				want := int8(math.RoundToEven(float64(xb[i] * id)))
				if got := int8(o[q8kQuantOff+i]); got != want {
					t.Fatalf("block %d x[%d] = %g: q = %d, want %d", b, i, xb[i], got, want)
				}
				sum += int16(want)
			}
			if got := int16(binary.LittleEndian.Uint16(o[q8kSumsOff+2*g:])); got != sum {
				t.Fatalf("block %d run %d: sum %d, want %d", b, g, got, sum)
			}
			if got := int32(binary.LittleEndian.Uint32(o[q8kNeg16Off+4*g:])); got != -16*int32(sum) {
				t.Fatalf("block %d run %d: -16 sum %d, want %d", b, g, got, -16*int32(sum))
			}
		}
		for j := range 8 {
			var sum int32
			for i := 32 * j; i < 32*j+32; i++ {
				sum += int32(int8(o[q8kQuantOff+i]))
			}
			if got := int32(binary.LittleEndian.Uint32(o[q8kSubSumsOff+4*j:])); got != sum {
				t.Fatalf("block %d run of 32 %d: sum %d, want %d", b, j, got, sum)
			}
			if got := int32(binary.LittleEndian.Uint32(o[q8kNeg8Off+4*j:])); got != -8*sum {
				t.Fatalf("block %d run of 32 %d: -8 sum %d, want %d", b, j, got, -8*sum)
			}
			if got := int16(binary.LittleEndian.Uint16(o[q8kSub16Off+2*j:])); int32(got) != sum {
				t.Fatalf("block %d run of 32 %d: int16 sum %d, want %d", b, j, got, sum)
			}
			if got := int16(binary.LittleEndian.Uint16(o[q8kSub16x8Off+2*j:])); int32(got) != 8*sum {
				t.Fatalf("block %d run of 32 %d: int16 8 sum %d, want %d", b, j, got, 8*sum)
			}
		}
		for r := range 32 {
			var sum int32
			for i := 8 * r; i < 8*r+8; i++ {
				sum += int32(int8(o[q8kQuantOff+i]))
			}
			if got := int32(binary.LittleEndian.Uint32(o[q8kNeg32Off+4*r:])); got != -32*sum {
				t.Fatalf("block %d run of 8 %d: -32 sum %d, want %d", b, r, got, -32*sum)
			}
		}
	}
}

// A Q4_K or Q6_K matrix with rows a multiple of 8 is repacked in groups
// of eight (the q4k8 and q6k8 layouts): its rows dequantize to exactly
// those of the file's layout and its memory is the units'
// (TestQ4KMatMapped covers the mapped constructor); other matrices keep
// the file's layout.
func TestK8Repack(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows, cols := 24, 768
	for _, c := range []struct {
		typ       DType
		encode    func(rows, cols int, w []float32) ([]byte, error)
		newMat    func(rows, cols int, raw []byte) (*Mat, error)
		blk, unit int
	}{
		{Q4_K, EncodeQ4K, NewQ4KMat, q4kBlockBytes, q4k8Unit},
		{Q6_K, EncodeQ6K, NewQ6KMat, q6kBlockBytes, q6k8Unit},
	} {
		raw, _ := c.encode(rows, cols, randVec(r, rows*cols))
		plain := &Mat{Type: c.typ, Rows: rows, Cols: cols, kq: raw, kRow: cols / 256 * c.blk}
		for _, k16 := range []bool{false, true} {
			var m *Mat
			var err error
			want16 := false
			withK16(t, k16, func() {
				m, err = c.newMat(rows, cols, append([]byte(nil), raw...))
				want16 = k16 && (c.typ == Q4_K || k16Q6())
			})
			if err != nil {
				t.Fatal(err)
			}
			if !m.k8 || m.Bytes() != int64(rows/8*cols/256*c.unit) || m.k16 != want16 {
				t.Fatalf("%v: k8 %v, k16 %v, %d bytes", c.typ, m.k8, m.k16, m.Bytes())
			}
			testRowsMatch(t, c.typ, m, plain)
		}
		if m, _ := c.newMat(3, cols, raw[:3*cols/256*c.blk]); m.k8 {
			t.Errorf("%v: 3 rows were repacked", c.typ)
		}
	}
}

// testRowsMatch checks that m's rows dequantize exactly as plain's.
func testRowsMatch(t *testing.T, typ DType, m, plain *Mat) {
	t.Helper()
	rows, cols := m.Rows, m.Cols
	{
		{
			want, got := make([]float32, cols), make([]float32, cols)
			for i := range rows {
				plain.Row(want, i)
				m.Row(got, i)
				for k := range cols {
					if got[k] != want[k] {
						t.Fatalf("%v row %d col %d: %g, want %g", typ, i, k, got[k], want[k])
					}
				}
			}
		}
	}
}

// testQuantizeQ8KAsm: quantizeQ8K writes quantizeQ8KRow's bytes at every
// level, for ordinary rows, rows with zero, subnormal, infinite and NaN
// values, and exact ties.
func testQuantizeQ8KAsm(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for c := range 7 {
		x := randVec(r, 512)
		switch c {
		case 1:
			clear(x[:256])
		case 2:
			for i := range x {
				x[i] = float32(i%64-32) * 0.5
			}
		case 3:
			clear(x[256:])
			x[300] = 4e-39
		case 4:
			x[7] = float32(math.Inf(1))
		case 5:
			x[511] = float32(math.NaN())
		case 6:
			x[0] = 1e30
		}
		want := make([]byte, q8kBytes(512))
		quantizeQ8KRow(want, x)
		for _, l := range f32Levels() {
			got := make([]byte, len(want))
			for i := range got {
				got[i] = 0xAA
			}
			withLevels(t, l, q8Level, func() { quantizeQ8K(got, x) })
			if !bytes.Equal(got, want) {
				t.Fatalf("%v case %d: differs from quantizeQ8KRow", l, c)
			}
		}
	}
}

// FuzzQuantizeQ8K: any float32 row (NaN, infinities, subnormals included)
// quantizes to quantizeQ8KRow's bytes at every level.
func FuzzQuantizeQ8K(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 191}, uint8(1))
	f.Add([]byte{1, 0, 0, 0, 255, 255, 127, 127, 0, 0, 192, 127}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, nb uint8) {
		cols := 256 * (int(nb)%3 + 1)
		x := make([]float32, cols)
		for i := range x {
			if len(data) >= 4*(i+1) {
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
		want := make([]byte, q8kBytes(cols))
		quantizeQ8KRow(want, x)
		for _, l := range f32Levels() {
			got := make([]byte, len(want))
			withLevels(t, l, q8Level, func() { quantizeQ8K(got, x) })
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: differs from quantizeQ8KRow (x=%v)", l, x[:min(len(x), 8)])
			}
		}
	})
}

// FuzzNewKQuantMat feeds the 4- to 6-bit constructors arbitrary shapes and
// bytes (an error, or a matrix whose rows and products can be computed),
// then a shape of at most 40 rows and 768 columns filled from the bytes.
func FuzzNewKQuantMat(f *testing.F) {
	f.Add(uint8(0), 8, 256, make([]byte, 8*144))
	f.Add(uint8(1), 8, 256, make([]byte, 8*176))
	f.Add(uint8(2), 3, 256, make([]byte, 3*210))
	f.Add(uint8(3), 8, 256, make([]byte, 8*8*18))
	f.Add(uint8(0), -8, 256, []byte{})
	f.Add(uint8(1), min(1<<40, math.MaxInt), min(1<<40, math.MaxInt), []byte{1})
	f.Fuzz(func(t *testing.T, typ uint8, rows, cols int, raw []byte) {
		newMat := [...]func(int, int, []byte) (*Mat, error){NewQ4KMat, NewQ5KMat, NewQ6KMat, NewQ40Mat}[typ%4]
		blk := [...]int{144, 176, 210, 8 * 18}[typ%4]
		use := func(m *Mat, rows, cols int) {
			row := make([]float32, cols)
			m.Row(row, rows-1)
			out := make([]float32, 2*rows)
			m.MatMul(out, make([]float32, 2*cols), 2)
		}
		if m, err := newMat(rows, cols, raw); err == nil {
			use(m, rows, cols)
		}
		if len(raw) == 0 {
			return
		}
		r, c := int(uint(rows)%40)+1, 256*(int(uint(cols)%3)+1)
		data := make([]byte, r*c/256*blk)
		for i := range data {
			data[i] = raw[i%len(raw)]
		}
		if m, err := newMat(r, c, data); err == nil {
			use(m, r, c)
		} else if r%8 == 0 || typ%4 == 0 || typ%4 == 2 {
			t.Fatalf("%d x %d: %v", r, c, err)
		}
	})
}

// The AVX-512 VNNI tiles of the eight-row layout (Q6_K's; the other
// types' eight-row matrices take the AVX2 tiles at every level) and of
// the 16-row layouts give the AVX2 tiles' products bit for bit: the same
// integer sums, the same float steps in the same order lane by lane
// (pairs of groups and an odd last one; 1 to 17, 31 to 33 and 48
// activation rows: every row count of the looped 16-row tiles, and the
// full ones of 16 rows alone, twice, three times and beside others).
func TestK8VNNIMatchesAVX2(t *testing.T) {
	if !slices.Contains(f32Levels(), levelAVX512) || !slices.Contains(q8Levels(), levelAVX512) {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, ty := range []struct {
		encode func(rows, cols int, w []float32) ([]byte, error)
		newMat func(rows, cols int, raw []byte) (*Mat, error)
	}{{EncodeQ4K, NewQ4KMat}, {EncodeQ6K, NewQ6KMat}, {EncodeQ5K, NewQ5KMat}, {EncodeQ40, NewQ40Mat}} {
		rows, cols := 40, 768
		raw, _ := ty.encode(rows, cols, randVec(r, rows*cols))
		var m8, m16 *Mat
		var err8, err16 error
		withK16(t, false, func() { m8, err8 = ty.newMat(rows, cols, raw) })
		withK16(t, true, func() { m16, err16 = ty.newMat(rows, cols, raw) })
		if err8 != nil || err16 != nil {
			t.Fatal(err8, err16)
		}
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 32, 33, 48} {
			x := randVec(r, n*cols)
			a, b, c := make([]float32, n*rows), make([]float32, n*rows), make([]float32, n*rows)
			withLevels(t, levelAVX2, levelAVX512, func() { m8.MatMul(a, x, n) })
			withLevels(t, levelAVX512, levelAVX512, func() { m8.MatMul(b, x, n) })
			if !slices.Equal(a, b) {
				t.Errorf("%v n=%d: the eight-row VNNI and AVX2 tiles differ", m8.Type, n)
			}
			if !m16.k16 {
				t.Errorf("%v: k16 %v", m16.Type, m16.k16)
			}
			gfni := hasGFNI
			for _, gf := range []bool{false, gfni} {
				hasGFNI = gf
				withLevels(t, levelAVX512, levelAVX512, func() { m16.MatMul(c, x, n) })
				if !slices.Equal(a, c) {
					t.Errorf("%v n=%d: the 16-row VNNI (k16 %v, GFNI %v) and AVX2 tiles differ", m16.Type, n, m16.k16, gf)
				}
			}
			hasGFNI = gfni
		}
	}
}
