//go:build linux

package kernels

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

// guarded returns n elements that end where an inaccessible page starts:
// a kernel that reads or writes one element past the slice faults. The
// mapping is released when the test ends.
func guarded[E float32 | uint16](t *testing.T, r *rand.Rand, n int) []E {
	t.Helper()
	var e E
	size := int(unsafe.Sizeof(e))
	pg := syscall.Getpagesize()
	body := (n*size + pg - 1) / pg * pg
	mem, err := syscall.Mmap(-1, 0, body+pg, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[body:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	s := unsafe.Slice((*E)(unsafe.Pointer(&mem[body-n*size])), n)
	for i := range s {
		x := float32(r.NormFloat64())
		switch p := any(&s[i]).(type) {
		case *float32:
			*p = x
		case *uint16:
			*p = FloatToHalf(x)
		}
	}
	return s
}

// TestNoAccessPastOperands runs the attention kernels and the conversions,
// float32 and F16, at every level with each operand ending at an
// inaccessible page: masked and partial loads and stores must not touch a
// byte past an operand (a fault would crash the test).
func TestNoAccessPastOperands(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	f32 := func(n int) []float32 { return guarded[float32](t, r, n) }
	f16 := func(n int) []uint16 { return guarded[uint16](t, r, n) }
	for _, l := range f32Levels() {
		withLevels(t, l, q8Level, func() {
			for _, dim := range []int{1, 3, 6, 17, 64} {
				for _, bs := range []int{5, 16, 21} {
					for _, n := range []int{1, bs/2 + 1, bs} {
						kl := (dim-1)*bs + n
						ScoresT(f32(n), f32(dim), f32(kl), bs)
						ScoresTF16(f32(n), f32(dim), f16(kl), bs)
						ScoresTMulti([][]float32{f32(n), f32(n), f32(n)}, [][]float32{f32(dim), f32(dim), f32(dim)}, f32(kl), bs)
						ScoresTMultiF16([][]float32{f32(n), f32(n), f32(n)}, [][]float32{f32(dim), f32(dim), f32(dim)}, f16(kl), bs)
						ScoresTBlocks(f32(3*bs), f32(dim), [][]float32{f32(dim * bs), f32(dim * bs), f32(dim * bs)}, bs)
						ScoresTBlocksF16(f32(3*bs), f32(dim), [][]uint16{f16(dim * bs), f16(dim * bs), f16(dim * bs)}, bs)

						stride := dim + bs%3
						rl := (n-1)*stride + dim
						ScoresRows(f32(n), f32(dim), f32(rl), stride)
						ScoresRowsF16(f32(n), f32(dim), f16(rl), stride)
						DotStrided(f32(n), f32(dim), f32(rl), stride)
						AxpyStrided(f32(dim), f32(n), f32(rl), stride)
						AxpyStridedF16(f32(dim), f32(n), f16(rl), stride)
						AxpyStridedMulti([][]float32{f32(dim), f32(dim)}, [][]float32{f32(n), f32(n)}, f32(rl), stride)
						AxpyStridedMultiF16([][]float32{f32(dim), f32(dim)}, [][]float32{f32(n), f32(n)}, f16(rl), stride)
					}
				}
			}
			for n := 1; n < 40; n++ {
				ToHalf(f16(n), f32(n))
				FromHalf(f32(n), f16(n))
			}
		})
	}
}
