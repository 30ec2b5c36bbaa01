package cpu

import (
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// roundF16 is what an F16 pool gives back for f.
func roundF16(f float32) float32 { return kernels.HalfToFloat(kernels.FloatToHalf(f)) }

// TestF16Storage writes values that binary16 must round (thirds, tenths,
// a subnormal, an overflow to infinity) into an F16 pool and reads them
// back through every accessor, staged and sealed.
func TestF16Storage(t *testing.T) {
	const layers, kvDim, hd, bs = 2, 8, 4, 4
	p := newPool(t, Config{Layers: layers, KVDim: kvDim, HeadDim: hd, BlockSize: bs, MaxBlocks: 8, DType: F16})
	if p.DType() != F16 || p.Config().DType != F16 {
		t.Fatalf("DType %v, Config %+v", p.DType(), p.Config())
	}
	val := func(l, pos, j int, isV bool) float32 {
		f := float32(pos+1)/3 + float32(l*100+j)/10
		switch {
		case j == 0 && pos == 1:
			f = 1e-6 // subnormal in binary16
		case j == 1 && pos == 2:
			f = 70000 // beyond binary16's range
		}
		if isV {
			f = -f
		}
		return f
	}
	s := p.NewSeq()
	k, v := make([]float32, kvDim), make([]float32, kvDim)
	for pos := range 6 {
		if _, err := p.Append(s); err != nil {
			t.Fatal(err)
		}
		for l := range layers {
			for j := range kvDim {
				k[j], v[j] = val(l, pos, j, false), val(l, pos, j, true)
			}
			p.WriteKV(s, l, pos, k, v)
		}
	}
	p.Seal(s, 1, 0, 1) // one head of one layer of the full block
	if got := roundF16(70000); !math.IsInf(float64(got), 1) {
		t.Fatalf("70000 rounds to %g in binary16, want +Inf", got)
	}
	for l := range layers {
		for pos := range 6 {
			p.ReadK(s, l, pos, k)
			p.ReadV(s, l, pos, v)
			for j := range kvDim {
				if wk, wv := roundF16(val(l, pos, j, false)), roundF16(val(l, pos, j, true)); k[j] != wk || v[j] != wv {
					t.Fatalf("layer %d position %d dim %d: K %g V %g, want %g %g", l, pos, j, k[j], v[j], wk, wv)
				}
			}
		}
		for b := range p.Blocks(s) {
			kb, vb := p.KeyBlockF16(s, l, b), p.ValueBlockF16(s, l, b)
			n := min(bs, s.Len()-b*bs)
			if len(kb) != bs*kvDim || len(vb) != bs*kvDim {
				t.Fatalf("layer %d block %d: %d keys, %d values", l, b, len(kb), len(vb))
			}
			for slot := range n {
				pos := b*bs + slot
				for j := range kvDim {
					h, d := j/hd, j%hd
					idx := h*hd*bs + slot*hd + d
					if p.KeySealed(s, l, b, h) {
						idx = h*hd*bs + d*bs + slot
					}
					if got, want := kernels.HalfToFloat(kb[idx]), roundF16(val(l, pos, j, false)); got != want {
						t.Fatalf("layer %d block %d slot %d dim %d: key %g, want %g", l, b, slot, j, got, want)
					}
					if got, want := kernels.HalfToFloat(vb[h*hd*bs+slot*hd+d]), roundF16(val(l, pos, j, true)); got != want {
						t.Fatalf("layer %d block %d slot %d dim %d: value %g, want %g", l, b, slot, j, got, want)
					}
				}
			}
		}
	}
	// A fork inside the partial block, then appends by both: the copy on
	// write keeps the binary16 data.
	c := p.Fork(s)
	fill(p, c, must(p.Append(c)), 7)
	fill(p, s, must(p.Append(s)), 9)
	if !hasFill(p, c, 6, 7) || !hasFill(p, s, 6, 9) || p.Stats().CopyOnWrites != 1 {
		t.Fatalf("copy on write in an F16 pool: %+v", p.Stats())
	}
	p.ReadK(c, 0, 5, k)
	if want := roundF16(val(0, 5, 3, false)); k[3] != want {
		t.Fatalf("copied block: key %g, want %g", k[3], want)
	}
	p.Free(s)
	p.Free(c)
	checkInvariants(t, p, nil)
}

func must(pos int, err error) int {
	if err != nil {
		panic(err)
	}
	return pos
}

// TestStorageDTypes: each element type's views panic in a cache of the other.
func TestStorageDTypes(t *testing.T) {
	p32 := newPool(t, Config{Layers: 1, KVDim: 4, BlockSize: 2, MaxBlocks: 4})
	p16 := newPool(t, Config{Layers: 1, KVDim: 4, BlockSize: 2, MaxBlocks: 4, DType: F16})
	s32, s16 := p32.NewSeq(), p16.NewSeq()
	grow(t, p32, s32, 2, 0)
	grow(t, p16, s16, 2, 0)
	mustPanic(t, "KeyBlock of an F16 pool", func() { p16.KeyBlock(s16, 0, 0) })
	mustPanic(t, "ValueBlock of an F16 pool", func() { p16.ValueBlock(s16, 0, 0) })
	mustPanic(t, "KeyBlockF16 of an F32 pool", func() { p32.KeyBlockF16(s32, 0, 0) })
	mustPanic(t, "ValueBlockF16 of an F32 pool", func() { p32.ValueBlockF16(s32, 0, 0) })
	mustPanic(t, "ReadV short dst", func() { p16.ReadV(s16, 0, 0, make([]float32, 3)) })
}
