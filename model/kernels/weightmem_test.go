package kernels

import (
	"sync"
	"testing"
	"unsafe"
)

// TestWeightBytes checks the weight allocator: every slice is zeroed, on
// a cache line, of the length asked, and no two overlap, whether they
// share a chunk or not, when several goroutines allocate at once.
func TestWeightBytes(t *testing.T) {
	sizes := []int{1, 63, 64, 100, 1 << 20, 3 << 20, weightSmall, weightSmall + 1, 9 << 20}
	type span struct{ lo, hi uintptr }
	var (
		mu    sync.Mutex
		spans []span
		keep  []*weightChunk
		wg    sync.WaitGroup
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				n := sizes[(g+i)%len(sizes)]
				b, c := weightBytes(n)
				if len(b) != n || cap(b) != n {
					t.Errorf("weightBytes(%d): len %d, cap %d", n, len(b), cap(b))
					return
				}
				if c == nil {
					t.Errorf("weightBytes(%d): no chunk", n)
					return
				}
				p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
				if p%64 != 0 {
					t.Errorf("weightBytes(%d) at %#x: not on a cache line", n, p)
				}
				for j, v := range b {
					if v != 0 {
						t.Errorf("weightBytes(%d): byte %d is %d", n, j, v)
						return
					}
				}
				for j := range b {
					b[j] = byte(g + 1)
				}
				mu.Lock()
				spans = append(spans, span{p, p + uintptr(n)})
				keep = append(keep, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.lo < b.hi && b.lo < a.hi {
				t.Fatalf("allocations [%#x, %#x) and [%#x, %#x) overlap", a.lo, a.hi, b.lo, b.hi)
			}
		}
	}
	_ = keep
}
