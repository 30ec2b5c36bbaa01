package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// checkCover runs p.Run(n) and checks every index is visited exactly once.
func checkCover(t *testing.T, p *Pool, n int) {
	t.Helper()
	seen := make([]atomic.Int32, n)
	p.Run(n, func(lo, hi int) {
		if lo < 0 || hi > n || lo >= hi {
			t.Errorf("Run(%d) gave chunk [%d,%d)", n, lo, hi)
			return
		}
		for i := lo; i < hi; i++ {
			seen[i].Add(1)
		}
	})
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("Run(%d): index %d visited %d times", n, i, c)
		}
	}
}

func TestPoolRun(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		if p.Threads() != threads {
			t.Errorf("NewPool(%d).Threads() = %d", threads, p.Threads())
		}
		for _, n := range []int{0, 1, 2, 3, 7, 64, 1000} {
			for range 20 {
				checkCover(t, p, n)
			}
		}
		p.Close()
		checkCover(t, p, 100) // serial after Close
	}
}

// TestPoolSteal slows the iterations of the first thread's part, so that
// the other threads finish theirs first and steal from it, and checks
// that each iteration still runs once.
func TestPoolSteal(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	const n = 300
	for range 10 {
		seen := make([]atomic.Int32, n)
		var slowDone atomic.Int32
		p.Run(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
				if i < n/3 {
					runtime.Gosched() // the part of thread 0 is slow
					slowDone.Add(1)
				}
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("index %d visited %d times", i, c)
			}
		}
		if slowDone.Load() != n/3 {
			t.Fatalf("slow part: %d of %d iterations", slowDone.Load(), n/3)
		}
	}
}

func TestSpanPacking(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {0, 1}, {5, 9}, {1<<31 - 2, 1<<31 - 1}} {
		if lo, hi := unpackSpan(packSpan(c[0], c[1])); lo != c[0] || hi != c[1] {
			t.Errorf("span %v round-trips to [%d,%d)", c, lo, hi)
		}
	}
}

func TestPoolConcurrentAndNested(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				var total atomic.Int64
				p.Run(10, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						// A nested Run finds the pool busy and runs inline.
						p.Run(5, func(lo, hi int) { total.Add(int64(hi - lo)) })
					}
				})
				if got := total.Load(); got != 50 {
					t.Errorf("nested Runs covered %d, want 50", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestPoolSleepWake lets the workers park, then checks they wake.
func TestPoolSleepWake(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for range 3 {
		for p.workers[0].state.Load() != wSleeping {
			runtime.Gosched()
		}
		var ran atomic.Int32
		p.Run(64, func(lo, hi int) {
			ran.Add(int32(hi - lo))
			if lo == 0 {
				runtime.Gosched() // give the worker time to join
			}
		})
		if ran.Load() != 64 {
			t.Fatalf("covered %d of 64", ran.Load())
		}
	}
}

func TestSetThreads(t *testing.T) {
	defer SetThreads(0)
	SetThreads(3)
	if Threads() != 3 {
		t.Fatalf("Threads() = %d after SetThreads(3)", Threads())
	}
	var n atomic.Int64
	Parallel(100, func(lo, hi int) { n.Add(int64(hi - lo)) })
	if n.Load() != 100 {
		t.Fatalf("Parallel covered %d of 100", n.Load())
	}
	SetThreads(0)
	if Threads() != runtime.GOMAXPROCS(0) {
		t.Fatalf("Threads() = %d, want GOMAXPROCS %d", Threads(), runtime.GOMAXPROCS(0))
	}
}

func BenchmarkPoolRun(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	b.ReportAllocs()
	for b.Loop() {
		p.Run(64, fn)
	}
}

// countTask counts the visits of each index.
type countTask struct{ seen []atomic.Int32 }

func (c *countTask) Run(lo, hi int) {
	for i := lo; i < hi; i++ {
		c.seen[i].Add(1)
	}
}

func TestPoolRunTask(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	c := &countTask{seen: make([]atomic.Int32, 100)}
	for _, n := range []int{0, 1, 5, 100} {
		for i := range c.seen {
			c.seen[i].Store(0)
		}
		p.RunTask(n, c)
		for i := range c.seen {
			if want := int32(min(1, max(0, n-i))); c.seen[i].Load() != want {
				t.Fatalf("RunTask(%d): index %d visited %d times", n, i, c.seen[i].Load())
			}
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { p.RunTask(100, c) }); allocs != 0 {
		t.Errorf("RunTask allocates %v times per call", allocs)
	}
	ParallelTask(3, c)
}
