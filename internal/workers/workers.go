// Package workers is the thread pool every parallel loop of the program
// runs on: the matrix products of the forward pass (package kernels), the
// attention of the CPU backend, and the engine's and the policy's per-row
// decisions between two forward steps. One pool, sized once (SetThreads),
// so that the loops of the forward pass and of the search share the same
// threads instead of oversubscribing the cores.
package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs data-parallel loops on a fixed set of long-lived worker
// goroutines, so that a loop costs about a microsecond to start instead of
// the several microseconds of spawning goroutines; a token's forward pass
// runs hundreds of them.
//
// Run splits [0,n) into contiguous chunks that the calling goroutine and
// the workers claim one at a time, and returns when all are done. One Run
// holds the pool at a time: a Run that finds the pool busy (another
// goroutine's Run, or a Run nested inside a chunk) does all the work itself
// on the calling goroutine instead of waiting, so concurrent and nested use
// are safe and never deadlock.
//
// Idle workers spin (polling, and yielding the processor with
// runtime.Gosched between polls) for a short while after each loop,
// because the next loop usually follows within microseconds, then park
// until woken.
//
// golang.org/x/sync/errgroup was the obvious alternative; it starts a
// goroutine per task (about 2 µs each here), which a forward pass of
// hundreds of matmuls per token cannot afford, so the pool keeps its
// workers alive instead.
type Pool struct {
	threads int
	mu      sync.Mutex // held by the goroutine whose Run owns the workers
	workers []*poolWorker

	// The published loop, written under mu before the workers are signaled
	// and read by them after they claim the signal: spans[i] is the part
	// of it that thread i (0 the caller, i the worker workers[i-1]) has not
	// claimed yet.
	task  Task
	spans []span
}

// Task is a loop body for Pool.RunTask: Run(lo, hi) does the iterations
// [lo, hi). A pointer to a long-lived struct satisfies it without the
// allocation a capturing func literal costs. funcTask adapts a func.
type Task interface{ Run(lo, hi int) }

type funcTask func(lo, hi int)

func (f funcTask) Run(lo, hi int) { f(lo, hi) }

// Worker states. A worker moves idle -> sleeping by itself; the Run that
// signals it moves idle|sleeping -> signaled (sending on wake only from
// sleeping); the worker moves signaled -> running -> idle, unless Run takes
// the signal back first (signaled -> idle) because all chunks were claimed
// before the worker woke. exit is set by Close on an idle or sleeping
// worker.
const (
	wIdle int32 = iota
	wSleeping
	wSignaled
	wRunning
	wExit
)

type poolWorker struct {
	id    int // its index in Pool.spans
	state atomic.Int32
	wake  chan struct{}
	_     [40]byte // keep workers' states on separate cache lines
}

// span is the unclaimed iterations [lo, hi) of one thread's part of a
// loop, packed lo<<32 | hi so that its owner (claiming from the front)
// and a thief (taking the back half) contend with one compare-and-swap.
type span struct {
	v atomic.Uint64
	_ [56]byte // one cache line each: the owner's claims stay local
}

func packSpan(lo, hi int) uint64       { return uint64(lo)<<32 | uint64(hi) }
func unpackSpan(v uint64) (lo, hi int) { return int(v >> 32), int(v & (1<<32 - 1)) }

// claimSplit sets how finely a thread claims its own span (see work).
const claimSplit = 4

// spinTime is how long an idle worker polls for the next loop before
// parking.
const spinTime = 100 * time.Microsecond

// spinPolls is how many times a waiting thread (an idle worker, or Run
// awaiting one) re-reads a worker's state before it yields its processor
// (runtime.Gosched): about a microsecond of loads. Yielding at every poll,
// as the pool first did, passed through the scheduler (and its locks)
// between two reads, and a hand-off waited for that: with the polls a
// stories110M Q8_0 step took 1.3-3.6% less time with 1 branch (61 loops)
// and 0.5-1.4% less with 16 (122 loops), in three sets of 10-12
// interleaved pairs of runs; ten times as many polls did the same.
const spinPolls = 2000

// pollWhile re-reads s up to spinPolls times while it holds v, and
// reports whether it still does.
func pollWhile(s *atomic.Int32, v int32) bool {
	for range spinPolls {
		if s.Load() != v {
			return false
		}
	}
	return true
}

// NewPool starts a pool for threads-way parallelism: threads-1 workers plus
// the goroutine that calls Run. threads < 1 means runtime.GOMAXPROCS(0).
// Close stops the workers.
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, spans: make([]span, threads)}
	for i := 1; i < threads; i++ {
		w := &poolWorker{id: i, wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w)
	}
	return p
}

// Threads is the parallelism of the pool (workers plus the caller).
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers, after any Run in progress. Runs after Close
// execute serially on the calling goroutine.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		for {
			s := w.state.Load()
			if s == wIdle && w.state.CompareAndSwap(wIdle, wExit) {
				break
			}
			if s == wSleeping && w.state.CompareAndSwap(wSleeping, wExit) {
				w.wake <- struct{}{}
				break
			}
			if s == wExit {
				break
			}
		}
	}
	p.workers = nil
}

// Run calls fn(lo, hi) for disjoint ranges that together cover [0, n),
// possibly concurrently on several goroutines, and returns when all calls
// have returned. fn must not panic. Run itself does not allocate, but fn
// escapes: a func literal that captures variables costs one small
// allocation where it is created.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.run(n, funcTask(fn))
}

// RunTask is Run for a Task; it does not allocate.
func (p *Pool) RunTask(n int, t Task) {
	if n <= 0 {
		return
	}
	p.run(n, t)
}

// run is Run for any task.
func (p *Pool) run(n int, t Task) {
	if n > 1 && int64(n) < 1<<31 && p.mu.TryLock() {
		if len(p.workers) > 0 {
			p.runLocked(n, t)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	t.Run(0, n)
}

// runLocked publishes t, works on it, and waits for the workers. p.mu is
// held by the caller.
func (p *Pool) runLocked(n int, t Task) {
	nw := min(len(p.workers), n-1)
	p.task = t
	for i := range p.spans {
		lo, hi := min(n, i*n/(nw+1)), min(n, (i+1)*n/(nw+1))
		p.spans[i].v.Store(packSpan(lo, hi))
	}
	for _, w := range p.workers[:nw] {
		w.signal()
	}
	p.work(0)
	for _, w := range p.workers[:nw] {
		w.await()
	}
	p.task = nil
}

// work runs chunks of the published loop for thread id until none are
// left. Each thread starts on its own contiguous part of the loop and
// claims it from the front, a quarter of what is left at a time (at least
// one iteration); a thread whose part is done steals the back half of the
// largest part left and goes on with that as its own. So each thread
// moves through contiguous iterations (a Q8_0 product's tiles prefetch the
// next rows of the matrix, which then are its own), and the threads still
// finish together when one is slowed down.
//
// Two earlier schemes did worse on a stories110M Q8_0 step of 16
// branches. Equal chunks, four per thread, left a thread idle for up to a
// quarter of its share at the end of every product (the worker was idle
// 24% of its time). Chunks from one shared cursor, shrinking as the loop
// drained (guided self-scheduling), brought that to 13%, but the threads
// alternated between chunks, and each new chunk began on weights that the
// other core had prefetched: a step took 3-5% longer than with these
// parts.
func (p *Pool) work(id int) {
	own := &p.spans[id].v
	for {
		v := own.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			if !p.steal(id) {
				return
			}
			continue
		}
		c := lo + max(1, (hi-lo)/claimSplit)
		if own.CompareAndSwap(v, packSpan(c, hi)) {
			p.task.Run(lo, c)
		}
	}
}

// steal moves the back half of the largest unclaimed span to thread id's
// (which is empty), or reports that no span has anything left.
func (p *Pool) steal(id int) bool {
	for {
		best, bestLeft, bv := -1, 0, uint64(0)
		for i := range p.spans {
			v := p.spans[i].v.Load()
			if lo, hi := unpackSpan(v); hi-lo > bestLeft {
				best, bestLeft, bv = i, hi-lo, v
			}
		}
		if best < 0 {
			return false
		}
		lo, hi := unpackSpan(bv)
		mid := lo + (hi-lo)/2
		if p.spans[best].v.CompareAndSwap(bv, packSpan(lo, mid)) {
			p.spans[id].v.Store(packSpan(mid, hi))
			return true
		}
	}
}

func (w *poolWorker) signal() {
	for {
		switch w.state.Load() {
		case wIdle:
			if w.state.CompareAndSwap(wIdle, wSignaled) {
				return
			}
		case wSleeping:
			if w.state.CompareAndSwap(wSleeping, wSignaled) {
				w.wake <- struct{}{} // buffered: the worker is or will be receiving
				return
			}
		default:
			panic("workers: pool worker signaled twice")
		}
	}
}

// await returns once w no longer works on the current loop.
func (w *poolWorker) await() {
	if w.state.CompareAndSwap(wSignaled, wIdle) {
		return // it had not started; every chunk is already done
	}
	for pollWhile(&w.state, wRunning) {
		runtime.Gosched()
	}
}

func (p *Pool) loop(w *poolWorker) {
	idleSince := time.Now()
	for spins := 0; ; spins++ {
		switch w.state.Load() {
		case wSignaled:
			if w.state.CompareAndSwap(wSignaled, wRunning) {
				p.work(w.id)
				w.state.Store(wIdle)
				idleSince, spins = time.Now(), 0
			}
		case wIdle:
			if spins%64 != 63 || time.Since(idleSince) < spinTime {
				if pollWhile(&w.state, wIdle) {
					runtime.Gosched()
				}
				continue
			}
			if w.state.CompareAndSwap(wIdle, wSleeping) {
				<-w.wake
				idleSince, spins = time.Now(), 0
			}
		case wExit:
			return
		}
	}
}

var defaultPool atomic.Pointer[Pool]

// DefaultPool returns the pool used by Parallel and ParallelTask (and the
// kernels' matrix products), started on
// first use with runtime.GOMAXPROCS(0) threads.
func DefaultPool() *Pool {
	if p := defaultPool.Load(); p != nil {
		return p
	}
	p := NewPool(0)
	if defaultPool.CompareAndSwap(nil, p) {
		return p
	}
	p.Close()
	return defaultPool.Load()
}

// SetThreads replaces the default pool by one with n threads (n < 1 means
// runtime.GOMAXPROCS(0)); loops already running finish on the old one.
func SetThreads(n int) {
	old := defaultPool.Swap(NewPool(n))
	if old != nil {
		old.Close()
	}
}

// Threads returns the parallelism of the default pool.
func Threads() int { return DefaultPool().Threads() }

// Parallel runs fn over [0,n) on the default pool (see Pool.Run).
func Parallel(n int, fn func(lo, hi int)) { DefaultPool().Run(n, fn) }

// ParallelTask runs t over [0,n) on the default pool (see Pool.RunTask).
func ParallelTask(n int, t Task) { DefaultPool().RunTask(n, t) }
