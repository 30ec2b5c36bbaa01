package cpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// Runner runs forward steps of one model over one KV cache. It owns
// scratch buffers sized to the largest batch it has seen, so a Runner is
// not safe for concurrent use; the work inside a step is parallel. It is
// the CPU's model.Backend.
type Runner struct {
	m  *model.Model
	w  *Weights // m's matrices as the kernels run them (WeightsOf)
	kv *Cache

	capRows int
	x       []float32 // residual stream, rows x dim
	xb      []float32 // normed input / matmul output, rows x dim
	q       []float32 // rows x QDim
	k, v    []float32 // rows x KVDim
	ao      []float32 // attention output, rows x QDim
	hb, hb2 []float32 // FFN hidden, rows x hidden
	cos     []float32 // rows x HeadDim/2
	sin     []float32

	// The step's attention plan (see plan): chunks of rows, and for each
	// chunk the groups of its rows that share a cache block.
	chunks    []attnChunk
	groups    []attnGroup
	groupRows []int32 // rows of each group, r.groups[g].lo:hi
	rowGroup  []int32 // scratch of plan
	sealRows  []int32 // rows writing the last slot of a block
	poolHD    int     // the cache's HeadDim: KVDim, or the model's HeadDim
	initErr   error   // the cache does not fit the model, or its weights did not convert

	xq, hq  kernels.Q8Acts // quantized norm and SwiGLU outputs, for Q8_0 products
	task    layerTask      // the running layer's attention work for the thread pool
	rows    rowTask        // per-row work for the thread pool
	scratch sync.Pool      // *attnScratch, one per attention work item
	out     model.Output
}

// NewRunner returns a Runner over the given cache, which must have been
// made for this model (model.Model.NewCache), running the model's weights
// as WeightsOf converts them (the first Runner or backend on a model
// converts them): Forward reports an error if the cache does not fit or
// the weights did not convert. The cache's HeadDim may be the model's or
// KVDim.
func NewRunner(m *model.Model, kv *Cache) *Runner {
	r := &Runner{m: m, kv: kv}
	c, pc := &m.Config, kv.Config()
	r.poolHD = pc.HeadDim
	if pc.Layers != c.Layers || pc.KVDim != c.KVDim() || pc.HeadDim%c.HeadDim != 0 {
		r.initErr = fmt.Errorf("model: KV cache of %d layers, KVDim %d, HeadDim %d does not fit the model's %d layers, KVDim %d, HeadDim %d",
			pc.Layers, pc.KVDim, pc.HeadDim, c.Layers, c.KVDim(), c.HeadDim)
		return r
	}
	r.w, r.initErr = WeightsOf(m)
	return r
}

// Cache returns the Runner's KV cache.
func (r *Runner) Cache() *Cache { return r.kv }

func growTo(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func (r *Runner) ensure(n int) {
	if n <= r.capRows {
		return
	}
	c := &r.m.Config
	r.capRows = n
	r.x = growTo(r.x, n*c.Dim)
	r.xb = growTo(r.xb, n*c.Dim)
	r.q = growTo(r.q, n*c.QDim())
	r.k = growTo(r.k, n*c.KVDim())
	r.v = growTo(r.v, n*c.KVDim())
	r.ao = growTo(r.ao, n*c.QDim())
	r.hb = growTo(r.hb, n*c.HiddenDim)
	r.hb2 = growTo(r.hb2, n*c.HiddenDim)
	r.cos = growTo(r.cos, n*c.HeadDim/2)
	r.sin = growTo(r.sin, n*c.HeadDim/2)
}

// Forward runs one step: every row's token goes through the whole network
// and is appended to its sequence's cache; attnLayers names the layers
// whose attention (scores and probabilities) Output should hold — none
// when empty, at no cost.
//
// On error no sequence has changed: rows already appended are rolled back.
// A full cache returns an error wrapping kvcache.ErrCacheFull, a row past
// the context length one wrapping model.ErrContextFull.
//
// The step, for the rows x of the residual stream (model.Reference is
// the same, one row at a time):
//
//	x = embedding(token)
//	for each layer:
//		x += attention(rmsnorm(x))   // q, k, v; RoPE; cache write; attend; Wo
//		x += ffn(rmsnorm(x))         // W2 (silu(W1 x) * W3 x)
//	logits = output(rmsnorm(x))
//
// Each residual add is done by the row task of the norm that follows it
// (addNorm), on the thread that then reads the row.
func (r *Runner) Forward(rows []model.Row, attnLayers ...int) (*model.Output, error) {
	m := r.m
	c := &m.Config
	n := len(rows)
	if n == 0 {
		return nil, errors.New("model: empty batch")
	}
	if r.initErr != nil {
		return nil, r.initErr
	}
	if err := m.CheckRows(rows, attnLayers); err != nil {
		return nil, err
	}

	// Reserve a cache position per row (rolled back on failure), and
	// perform the copies on write the reservations decided.
	out := &r.out
	var err error
	out.Pos, err = model.AppendRows(r.kv.Pool, rows, c.ContextLen, out.Pos)
	r.kv.ApplyCopies()
	if err != nil {
		return nil, err
	}
	for i, row := range rows {
		r.kv.Appended(row.Seq, out.Pos[i])
	}

	r.ensure(n)
	out.Prepare(rows, c.Vocab, c.Heads, attnLayers)
	r.planBatch(rows)
	r.embed(rows)
	for l := range r.w.Layers {
		r.layer(rows, l, attnLayers)
	}
	r.classify(rows)
	return out, nil
}

// embed sets each row of the residual stream to its token's embedding,
// and computes the rotation angles of each row's position.
func (r *Runner) embed(rows []model.Row) {
	m := r.m
	dim, half := m.Config.Dim, m.Config.HeadDim/2
	for i, row := range rows {
		r.w.TokenEmbd.Row(r.x[i*dim:(i+1)*dim], row.Token)
		m.RopeAngles(r.cos[i*half:(i+1)*half], r.sin[i*half:(i+1)*half], r.out.Pos[i])
	}
}

// layer runs transformer block l over the batch. Its input is the
// residual stream r.x plus r.xb, the previous block's feed-forward output
// (none before block 0), whose add goes with the first norm.
func (r *Runner) layer(rows []model.Row, l int, attnLayers []int) {
	n := len(rows)
	lw, mw := &r.m.Weights.Layers[l], &r.w.Layers[l] // norms and biases, matrices

	// x += xb; xb = rmsnorm(x); q, k, v = Wq xb, Wk xb, Wv xb.
	qkv := []*kernels.Mat{mw.Wq, mw.Wk, mw.Wv}
	xq := quantFor(&r.xq, qkv, n)
	r.addNorm(lw.AttnNorm, l > 0, xq, n)
	matMuls(qkv, [][]float32{r.q, r.k, r.v}, r.xb, n, xq)

	// ao = attention over each row's positions 0..pos; xb = Wo ao.
	slot := -1
	for i, al := range attnLayers {
		if al == l {
			slot = i
		}
	}
	r.attention(rows, lw, l, slot)
	mw.Wo.MatMul(r.xb, r.ao, n)

	// x += xb; xb = rmsnorm(x); hb = silu(W1 xb) * W3 xb; xb = W2 hb.
	ffn := []*kernels.Mat{mw.W1, mw.W3}
	xq = quantFor(&r.xq, ffn, n)
	r.addNorm(lw.FFNNorm, true, xq, n)
	matMuls(ffn, [][]float32{r.hb, r.hb2}, r.xb, n, xq)
	down := []*kernels.Mat{mw.W2}
	hq := quantFor(&r.hq, down, n)
	r.swiGLU(hq, n)
	matMuls(down, [][]float32{r.xb}, r.hb, n, hq) // its residual add goes with the next norm
}

// attention runs a layer's attention in three phases over the thread
// pool: prepare every row (q/k/v biases, RoPE, cache write), seal the
// blocks this step fills, and attend over each row's positions 0..pos, by
// (chunk of rows, kv head), into r.ao.
func (r *Runner) attention(rows []model.Row, lw *model.Layer, l, slot int) {
	c := &r.m.Config
	t := &r.task
	*t = layerTask{r: r, rows: rows, lw: lw, l: l, slot: slot, phase: phasePrepare}
	kernels.ParallelTask(len(rows), t)
	t.phase = phaseSeal
	kernels.ParallelTask(len(r.sealRows)*(c.KVDim()/r.poolHD), t)
	t.phase = phaseAttend
	kernels.ParallelTask(len(r.chunks)*c.KVHeads, t)
	*t = layerTask{} // drop the references
}

// classify adds the last residual, and runs the final norm and the
// classifier, only for rows that want logits: when all do (a decoding
// step), as the layers' norms do, on the threads; else row by row here,
// compacting: row nl <= i of r.xb is free by the time row i's norm goes
// there.
func (r *Runner) classify(rows []model.Row) {
	c, norm := &r.m.Config, r.m.Weights.OutputNorm
	n, dim := len(rows), c.Dim
	logits := r.out.LogitsBuffer()
	if len(logits) == n*c.Vocab {
		head := []*kernels.Mat{r.w.Output}
		xq := quantFor(&r.xq, head, n)
		r.addNorm(norm, true, xq, n)
		matMuls(head, [][]float32{logits}, r.xb, n, xq)
		return
	}
	nl := 0
	for i, row := range rows {
		if row.NoLogits {
			continue
		}
		x := r.x[i*dim : (i+1)*dim]
		kernels.Add(x, r.xb[i*dim:(i+1)*dim])
		kernels.RMSNorm(r.xb[nl*dim:(nl+1)*dim], x, norm, c.NormEps)
		nl++
	}
	if nl > 0 {
		r.w.Output.MatMul(logits, r.xb, nl)
	}
}
