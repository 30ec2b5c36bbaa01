package cpu

import (
	"github.com/entropix-search/entropix-search/model/kernels"
)

// rowTask is per-row work between a layer's products, for
// kernels.ParallelTask: the RMSNorm of rows of r.x into r.xb with weights
// norm, after adding r.xb (the last product's output) into r.x if
// residual is set; or (norm nil) the SwiGLU of r.hb by r.hb2. From
// parallelRows rows it is worth a hand-off to the threads: done on the
// calling goroutine, it left the others idle for some 10% of a 16-branch
// stories110M Q8_0 step (and so did the residual adds, until they moved
// into the norms).
type rowTask struct {
	r        *Runner
	norm     []float32
	residual bool
	quant    *kernels.Q8Acts // when not nil, the rows made are also quantized there
}

func (t *rowTask) Run(lo, hi int) {
	r, c := t.r, &t.r.m.Config
	if t.norm != nil {
		dim := c.Dim
		for i := lo; i < hi; i++ {
			x, xb := r.x[i*dim:(i+1)*dim], r.xb[i*dim:(i+1)*dim]
			if t.residual {
				kernels.Add(x, xb)
			}
			kernels.RMSNorm(xb, x, t.norm, c.NormEps)
			if t.quant != nil {
				t.quant.Quantize(i, xb)
			}
		}
		return
	}
	h := c.HiddenDim
	kernels.SwiGLU(r.hb[lo*h:hi*h], r.hb2[lo*h:hi*h])
	if t.quant != nil {
		for i := lo; i < hi; i++ {
			t.quant.Quantize(i, r.hb[i*h:(i+1)*h])
		}
	}
}

// parallelRows is the batch from which rowWork hands rows to the threads.
const parallelRows = 8

// rowWork runs t over rows [0, n): on the pool for parallelRows rows and
// more, else here (a hand-off costs about a microsecond).
func (r *Runner) rowWork(t rowTask, n int) {
	r.rows = t
	if n >= parallelRows {
		kernels.ParallelTask(n, &r.rows)
	} else {
		r.rows.Run(0, n)
	}
	r.rows = rowTask{}
}

// addNorm is x += xb (when residual is set: the last sublayer's output
// joins the residual stream), then xb = rmsnorm(x) with weights norm, for
// the n rows, each quantized into quant too when it is not nil.
func (r *Runner) addNorm(norm []float32, residual bool, quant *kernels.Q8Acts, n int) {
	r.rowWork(rowTask{r: r, norm: norm, residual: residual, quant: quant}, n)
}

// swiGLU is hb = silu(hb) * hb2 for the n rows, each quantized into quant
// too when it is not nil.
func (r *Runner) swiGLU(quant *kernels.Q8Acts, n int) {
	r.rowWork(rowTask{r: r, quant: quant}, n)
}

// quantFor returns a, sized for n rows, when the product that follows
// is of Q8_0 matrices only: the row task that makes the product's input
// rows then quantizes them too, on the thread that made them, sparing the
// product a hand-off to the threads (three a layer; with them, a
// 16-branch stories110M Q8_0 step took some 1-2% longer). Otherwise nil:
// the product takes float rows.
func quantFor(a *kernels.Q8Acts, mats []*kernels.Mat, n int) *kernels.Q8Acts {
	for _, m := range mats {
		if m.Type != kernels.Q8_0 {
			return nil
		}
	}
	a.Reset(n, mats[0].Cols)
	return a
}

// matMuls computes outs[i] = mats[i] x: from xq, x's rows quantized, when
// it is not nil; else one kernels.MatMulMany call (one quantization of x,
// one hand-off to the threads) when the matrices share a type, as they do
// but in mixed-type files.
func matMuls(mats []*kernels.Mat, outs [][]float32, x []float32, n int, xq *kernels.Q8Acts) {
	if xq != nil {
		kernels.MatMulQ8Acts(mats, outs, xq)
		return
	}
	for _, m := range mats[1:] {
		if !kernels.SameActs(m.Type, mats[0].Type) {
			for i, m := range mats {
				m.MatMul(outs[i], x, n)
			}
			return
		}
	}
	kernels.MatMulMany(mats, outs, x, n)
}
