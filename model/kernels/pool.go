package kernels

import (
	"sync"

	"github.com/entropix-search/entropix-search/internal/workers"
)

// Pool is the worker pool the products split their rows over: package
// workers' (see there), under the name the kernels' callers know.
type Pool = workers.Pool

// Task is a loop body for Pool.RunTask (workers.Task).
type Task = workers.Task

// NewPool starts a pool for threads-way parallelism (workers.NewPool).
func NewPool(threads int) *Pool { return workers.NewPool(threads) }

// DefaultPool returns the pool used by MatMul and Parallel
// (workers.DefaultPool).
func DefaultPool() *Pool { return workers.DefaultPool() }

// SetThreads replaces the default pool by one with n threads
// (workers.SetThreads).
func SetThreads(n int) { workers.SetThreads(n) }

// Threads returns the parallelism of the default pool.
func Threads() int { return workers.Threads() }

// Parallel runs fn over [0,n) on the default pool (see Pool.Run).
func Parallel(n int, fn func(lo, hi int)) { workers.Parallel(n, fn) }

// ParallelTask runs t over [0,n) on the default pool (see Pool.RunTask).
func ParallelTask(n int, t Task) { workers.ParallelTask(n, t) }

// matMulJobs recycles the jobs handed to the pool, so that a product does
// not allocate (a job's address escapes into the pool's task).
var matMulJobs = sync.Pool{New: func() any { return new(matMulJob) }}

// matMul runs j over the default pool, or on the caller for small
// products (and when the pool is busy: see Pool.Run).
func matMul(j matMulJob) {
	blocks := j.start[j.nm]
	if blocks > 1 && j.work >= parallelWork {
		jp := matMulJobs.Get().(*matMulJob)
		*jp = j
		workers.ParallelTask(blocks, jp)
		*jp = matMulJob{}
		matMulJobs.Put(jp)
		return
	}
	j.Run(0, blocks)
}
