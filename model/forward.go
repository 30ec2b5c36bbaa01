package model

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// Row is one token to feed: the next token of sequence Seq. It is written
// at position Seq.Len() (the cache grows by one).
type Row struct {
	Seq   *kvcache.Seq
	Token int
	// NoLogits skips the classifier for this row, e.g. for the prompt
	// positions of a prefill whose predictions nobody reads.
	NoLogits bool
}

// Attention is one row's attention in one layer: for each head, the
// pre-softmax scores q·k/sqrt(headDim) and the probabilities over the
// positions 0..Len-1 the sequence really has, head-major (Heads x Len).
type Attention struct {
	Heads, Len    int
	Scores, Probs []float32
}

// Output is the result of a forward step. Its slices belong to the Runner
// and are valid until its next Forward call.
type Output struct {
	Pos []int // the position each row was written at

	vocab      int
	logits     []float32 // packed, one vocab-sized row per row with logits
	logitIndex []int     // row -> index into logits, or -1

	heads      int
	attnLayers []int
	attnOff    []int     // row*len(attnLayers)+i -> offset into attn
	attn       []float32 // per row and layer: scores then probabilities, Heads x (Pos+1) each
}

// Logits returns row r's next-token logits (nil for a NoLogits row).
func (o *Output) Logits(r int) []float32 {
	i := o.logitIndex[r]
	if i < 0 {
		return nil
	}
	return o.logits[i*o.vocab : (i+1)*o.vocab]
}

// Attention returns row r's attention in the i-th of the layers asked for
// (the zero value when no attention was asked for, or for a NoLogits row).
func (o *Output) Attention(r, i int) Attention {
	if i < 0 || i >= len(o.attnLayers) {
		return Attention{}
	}
	n := o.Pos[r] + 1
	off := o.attnOff[r*len(o.attnLayers)+i]
	if off < 0 {
		return Attention{}
	}
	h := o.heads
	return Attention{Heads: h, Len: n, Scores: o.attn[off : off+h*n], Probs: o.attn[off+h*n : off+2*h*n]}
}

// Runner runs forward steps of one model over one KV cache pool. It owns
// scratch buffers sized to the largest batch it has seen, so a Runner is
// not safe for concurrent use; the work inside a step is parallel.
type Runner struct {
	m  *Model
	kv *kvcache.Pool

	capRows int
	x       []float32 // residual stream, rows x dim
	xb      []float32 // normed input / matmul output, rows x dim
	q       []float32 // rows x QDim
	k, v    []float32 // rows x KVDim
	ao      []float32 // attention output, rows x QDim
	hb, hb2 []float32 // FFN hidden, rows x hidden
	cos     []float32 // rows x HeadDim/2
	sin     []float32

	scratch sync.Pool // *[]float32 attention scores for one (row, head)
	out     Output
}

// NewRunner returns a Runner over the given cache, which must have been
// made for this model (NewCache).
func (m *Model) NewRunner(kv *kvcache.Pool) *Runner {
	return &Runner{m: m, kv: kv}
}

// Cache returns the Runner's KV cache pool.
func (r *Runner) Cache() *kvcache.Pool { return r.kv }

// ErrContextFull is returned when a row would be written past the model's
// context length.
var ErrContextFull = errors.New("model: context length exceeded")

func grow(s []float32, n int) []float32 {
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
	r.x = grow(r.x, n*c.Dim)
	r.xb = grow(r.xb, n*c.Dim)
	r.q = grow(r.q, n*c.QDim())
	r.k = grow(r.k, n*c.KVDim())
	r.v = grow(r.v, n*c.KVDim())
	r.ao = grow(r.ao, n*c.QDim())
	r.hb = grow(r.hb, n*c.HiddenDim)
	r.hb2 = grow(r.hb2, n*c.HiddenDim)
	r.cos = grow(r.cos, n*c.HeadDim/2)
	r.sin = grow(r.sin, n*c.HeadDim/2)
}

// Forward runs one step: every row's token goes through the whole network
// and is appended to its sequence's cache; attnLayers names the layers
// whose attention (scores and probabilities) Output should hold — none when
// empty, at no cost.
//
// On error no sequence has changed: rows already appended are rolled back.
// A full cache returns an error wrapping kvcache.ErrCacheFull, a row past
// the context length one wrapping ErrContextFull.
func (r *Runner) Forward(rows []Row, attnLayers ...int) (*Output, error) {
	m := r.m
	c := &m.Config
	w := m.Weights
	n := len(rows)
	if n == 0 {
		return nil, errors.New("model: empty batch")
	}
	for _, l := range attnLayers {
		if l < 0 || l >= c.Layers {
			return nil, fmt.Errorf("model: attention asked for layer %d of %d", l, c.Layers)
		}
	}
	for i, row := range rows {
		if row.Seq == nil {
			return nil, fmt.Errorf("model: row %d has no sequence", i)
		}
		if row.Token < 0 || row.Token >= c.Vocab {
			return nil, fmt.Errorf("model: row %d: token %d is outside the vocabulary (0..%d)", i, row.Token, c.Vocab-1)
		}
	}

	// Reserve a cache position per row; roll back on failure.
	out := &r.out
	out.Pos = out.Pos[:0]
	for i, row := range rows {
		pos := row.Seq.Len()
		var err error
		if pos >= c.ContextLen {
			err = fmt.Errorf("%w: position %d, context length %d", ErrContextFull, pos, c.ContextLen)
		} else {
			pos, err = r.kv.Append(row.Seq)
		}
		if err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = r.kv.Truncate(rows[j].Seq, out.Pos[j])
			}
			return nil, fmt.Errorf("model: row %d: %w", i, err)
		}
		out.Pos = append(out.Pos, pos)
	}

	r.ensure(n)
	dim, qd, kvd, hd := c.Dim, c.QDim(), c.KVDim(), c.HeadDim
	r.prepareOutput(rows, attnLayers)

	// Token embeddings and the rotation angles of each row's position.
	half := hd / 2
	for i, row := range rows {
		w.TokenEmbd.Row(r.x[i*dim:(i+1)*dim], row.Token)
		p := float64(out.Pos[i])
		for j, f := range m.invFreq {
			s, co := math.Sincos(p * f)
			r.cos[i*half+j], r.sin[i*half+j] = float32(co), float32(s)
		}
	}

	for l := range w.Layers {
		lw := &w.Layers[l]

		// Attention: norm, q/k/v projections, RoPE, cache write.
		for i := 0; i < n; i++ {
			kernels.RMSNorm(r.xb[i*dim:(i+1)*dim], r.x[i*dim:(i+1)*dim], lw.AttnNorm, c.NormEps)
		}
		lw.Wq.MatMul(r.q, r.xb, n)
		lw.Wk.MatMul(r.k, r.xb, n)
		lw.Wv.MatMul(r.v, r.xb, n)
		for i, row := range rows {
			q, k, v := r.q[i*qd:(i+1)*qd], r.k[i*kvd:(i+1)*kvd], r.v[i*kvd:(i+1)*kvd]
			if c.QKVBias {
				kernels.Add(q, lw.Bq)
				kernels.Add(k, lw.Bk)
				kernels.Add(v, lw.Bv)
			}
			cos, sin := r.cos[i*half:(i+1)*half], r.sin[i*half:(i+1)*half]
			for h := 0; h < c.Heads; h++ {
				kernels.RoPE(q[h*hd:(h+1)*hd], cos, sin, c.RopeInterleaved)
			}
			for h := 0; h < c.KVHeads; h++ {
				kernels.RoPE(k[h*hd:(h+1)*hd], cos, sin, c.RopeInterleaved)
			}
			copy(r.kv.K(row.Seq, l, out.Pos[i]), k)
			copy(r.kv.V(row.Seq, l, out.Pos[i]), v)
		}

		// Each (row, head) attends over its own sequence's positions 0..pos.
		attnSlot := -1
		for i, al := range attnLayers {
			if al == l {
				attnSlot = i
			}
		}
		kernels.Parallel(n*c.Heads, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				i, slot := j/c.Heads, attnSlot
				if slot >= 0 && rows[i].NoLogits {
					slot = -1
				}
				r.attend(rows, l, i, j%c.Heads, slot)
			}
		})

		// Output projection and residual.
		lw.Wo.MatMul(r.xb, r.ao, n)
		kernels.Add(r.x[:n*dim], r.xb[:n*dim])

		// SwiGLU feed-forward and residual.
		for i := 0; i < n; i++ {
			kernels.RMSNorm(r.xb[i*dim:(i+1)*dim], r.x[i*dim:(i+1)*dim], lw.FFNNorm, c.NormEps)
		}
		lw.W1.MatMul(r.hb, r.xb, n)
		lw.W3.MatMul(r.hb2, r.xb, n)
		kernels.SwiGLU(r.hb[:n*c.HiddenDim], r.hb2[:n*c.HiddenDim])
		lw.W2.MatMul(r.xb, r.hb, n)
		kernels.Add(r.x[:n*dim], r.xb[:n*dim])
	}

	// Final norm and classifier, only for rows that want logits.
	nl := 0
	for i, row := range rows {
		if row.NoLogits {
			continue
		}
		kernels.RMSNorm(r.xb[nl*dim:(nl+1)*dim], r.x[i*dim:(i+1)*dim], w.OutputNorm, c.NormEps)
		nl++
	}
	if nl > 0 {
		w.Output.MatMul(out.logits, r.xb, nl)
	}
	return out, nil
}

// prepareOutput sizes the logits and attention buffers of r.out.
func (r *Runner) prepareOutput(rows []Row, attnLayers []int) {
	c := &r.m.Config
	out := &r.out
	out.vocab, out.heads = c.Vocab, c.Heads
	out.logitIndex = out.logitIndex[:0]
	nl := 0
	for _, row := range rows {
		if row.NoLogits {
			out.logitIndex = append(out.logitIndex, -1)
			continue
		}
		out.logitIndex = append(out.logitIndex, nl)
		nl++
	}
	out.logits = grow(out.logits, nl*c.Vocab)

	// Attention is kept only for rows with logits: a prefill's other rows
	// would cost O(prompt²) memory for nothing.
	out.attnLayers = append(out.attnLayers[:0], attnLayers...)
	out.attnOff = out.attnOff[:0]
	total := 0
	for i, row := range rows {
		for range attnLayers {
			if row.NoLogits {
				out.attnOff = append(out.attnOff, -1)
				continue
			}
			out.attnOff = append(out.attnOff, total)
			total += 2 * c.Heads * (out.Pos[i] + 1)
		}
	}
	out.attn = grow(out.attn, total)
}

// attend computes head h of row i in layer l into r.ao. When slot >= 0 the
// scores and probabilities are also kept in the output's attention slot.
func (r *Runner) attend(rows []Row, l, i, h, slot int) {
	c := &r.m.Config
	hd, kvd := c.HeadDim, c.KVDim()
	seq := rows[i].Seq
	n := r.out.Pos[i] + 1
	kvOff := (h / (c.Heads / c.KVHeads)) * hd
	q := r.q[i*c.QDim()+h*hd:][:hd]
	scale := float32(1 / math.Sqrt(float64(hd)))

	var att, keep []float32
	if slot >= 0 {
		off := r.out.attnOff[i*len(r.out.attnLayers)+slot] + h*n
		keep = r.out.attn[off : off+n]                    // scores
		att = r.out.attn[off+c.Heads*n : off+c.Heads*n+n] // probabilities
	} else {
		bp, _ := r.scratch.Get().(*[]float32)
		if bp == nil {
			bp = new([]float32)
		}
		if cap(*bp) < n {
			*bp = make([]float32, n, max(n, min(c.ContextLen, 1024)))
		}
		att = (*bp)[:n]
		defer r.scratch.Put(bp)
	}

	// Scores block by block, each block's keys stride KVDim apart: one
	// kernel call per block rather than one per position.
	bs := r.kv.BlockSize()
	for b := 0; b*bs < n; b++ {
		cnt := min(bs, n-b*bs)
		kernels.DotStrided(att[b*bs:b*bs+cnt], q, r.kv.KeyBlock(seq, l, b)[kvOff:], kvd)
	}
	for t := range att {
		att[t] *= scale
	}
	if keep != nil {
		copy(keep, att)
	}
	kernels.Softmax(att)

	o := r.ao[i*c.QDim()+h*hd:][:hd]
	clear(o)
	for b := 0; b*bs < n; b++ {
		cnt := min(bs, n-b*bs)
		kernels.AxpyStrided(o, att[b*bs:b*bs+cnt], r.kv.ValueBlock(seq, l, b)[kvOff:], kvd)
	}
}
