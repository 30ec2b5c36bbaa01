package kernels

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
// Idle workers spin (yielding the processor with runtime.Gosched) for a
// short while after each loop, because the next loop usually follows within
// microseconds, then park until woken.
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
	// and read by them after they claim the signal.
	task Task
	n    int
	next atomic.Int64 // first iteration not yet claimed

	mm matMulJob // MatMul's job, reused under mu so that MatMul does not allocate
}

// Task is a loop body for Pool.RunTask: Run(lo, hi) does the iterations
// [lo, hi). A pointer to a long-lived struct satisfies it without the
// allocation a capturing func literal costs. funcTask adapts a func;
// matMulJob is MatMul's body.
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
	state atomic.Int32
	wake  chan struct{}
	_     [48]byte // keep workers' states on separate cache lines
}

// guidedSplit sets how finely Run splits a loop (see work).
const guidedSplit = 2

// spinTime is how long an idle worker polls for the next loop before
// parking.
const spinTime = 100 * time.Microsecond

// NewPool starts a pool for threads-way parallelism: threads-1 workers plus
// the goroutine that calls Run. threads < 1 means runtime.GOMAXPROCS(0).
// Close stops the workers.
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	for i := 1; i < threads; i++ {
		w := &poolWorker{wake: make(chan struct{}, 1)}
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
	if n > 1 && p.mu.TryLock() {
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
	p.task, p.n = t, n
	p.next.Store(0)
	for _, w := range p.workers[:nw] {
		w.signal()
	}
	p.work()
	for _, w := range p.workers[:nw] {
		w.await()
	}
	p.task = nil
}

// work claims and runs chunks of the published loop until none are left.
// Chunks shrink as the loop drains (guided self-scheduling): each takes
// 1/(guidedSplit*threads) of what is left, at least one iteration. Large
// chunks first keep the claims few and a thread's rows contiguous (a Q8_0
// product prefetches the next rows of its chunk); small ones last keep the
// threads finishing together. Equal chunks, four per thread (the former
// split), could leave a thread idle for up to a quarter of its share at
// the end of every product: in a stories110M Q8_0 step of 16 branches the
// worker was idle for 24% of its time, against 13% with guided chunks.
func (p *Pool) work() {
	n := int64(p.n)
	for {
		lo := p.next.Load()
		if lo >= n {
			return
		}
		hi := lo + max(1, (n-lo)/int64(guidedSplit*p.threads))
		if !p.next.CompareAndSwap(lo, hi) {
			continue
		}
		p.task.Run(int(lo), int(hi))
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
			panic("kernels: pool worker signaled twice")
		}
	}
}

// await returns once w no longer works on the current loop.
func (w *poolWorker) await() {
	if w.state.CompareAndSwap(wSignaled, wIdle) {
		return // it had not started; every chunk is already done
	}
	for w.state.Load() == wRunning {
		runtime.Gosched()
	}
}

func (p *Pool) loop(w *poolWorker) {
	idleSince := time.Now()
	for spins := 0; ; spins++ {
		switch w.state.Load() {
		case wSignaled:
			if w.state.CompareAndSwap(wSignaled, wRunning) {
				p.work()
				w.state.Store(wIdle)
				idleSince, spins = time.Now(), 0
			}
		case wIdle:
			if spins%64 != 63 || time.Since(idleSince) < spinTime {
				runtime.Gosched()
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

// DefaultPool returns the pool used by MatMul and Parallel, started on
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
