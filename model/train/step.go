package train

import (
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// acts holds the activations of the last forward pass that the backward
// pass needs, and the backward pass's scratch memory, sized for n tokens.
type acts struct {
	n      int
	pos    []int32 // position of each token in its sequence
	attOff []int   // where each token's attention probabilities start
	segs   []int   // first token of each sequence, and n at the end
	layers []layerActs
	xL     []float32 // the residual stream after the last layer

	rows   []int     // tokens whose logits are computed
	rstdF  []float32 // final norm's 1/rms per computed row
	hF     []float32 // final norm's output, computed rows
	logits []float32 // computed rows x vocab; after the loss, their gradient

	// backward scratch
	dx, dh, dt, dq, dk, dv, do, dg, du, da []float32
	dhF                                    []float32
	wt                                     []float32 // a weight matrix transposed
}

// layerActs are one block's saved activations.
type layerActs struct {
	xin, h1, rstd1 []float32 // block input, its norm, 1/rms
	q, k, v        []float32 // after RoPE (q, k)
	att            []float32 // attention probabilities
	o              []float32 // attention output, before attn_output
	xmid, h2       []float32 // after the attention residual, its norm
	rstd2          []float32
	g, sg, u, a    []float32 // gate, sigmoid(gate), up, silu(gate)*up
}

// grow returns s with length n, reallocated when too small.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// ensure sizes the activations for the batch b and records its positions,
// sequences and attention offsets.
func (m *Model) ensure(b *Batch) *acts {
	s := &m.Shape
	n := b.B * b.T
	a := m.acts
	if a == nil {
		a = &acts{layers: make([]layerActs, s.Layers)}
		m.acts = a
	}
	a.n = n
	hd := s.HeadDim()
	qd, kvd, d, f := s.Heads*hd, s.KVHeads*hd, s.Dim, s.HiddenDim
	if cap(a.pos) < n {
		a.pos = make([]int32, n)
		a.attOff = make([]int, n+1)
	}
	a.pos, a.attOff = a.pos[:n], a.attOff[:n+1]
	a.segs = a.segs[:0]
	off := 0
	for i := 0; i < n; i++ {
		p := b.pos(i)
		a.pos[i] = int32(p)
		if p == 0 {
			a.segs = append(a.segs, i)
		}
		a.attOff[i] = off
		off += s.Heads * (p + 1)
	}
	a.attOff[n] = off
	a.segs = append(a.segs, n)
	for l := range a.layers {
		la := &a.layers[l]
		la.xin, la.h1, la.rstd1 = grow(la.xin, n*d), grow(la.h1, n*d), grow(la.rstd1, n)
		la.q, la.k, la.v = grow(la.q, n*qd), grow(la.k, n*kvd), grow(la.v, n*kvd)
		la.att, la.o = grow(la.att, off), grow(la.o, n*qd)
		la.xmid, la.h2, la.rstd2 = grow(la.xmid, n*d), grow(la.h2, n*d), grow(la.rstd2, n)
		la.g, la.sg, la.u, la.a = grow(la.g, n*f), grow(la.sg, n*f), grow(la.u, n*f), grow(la.a, n*f)
	}
	a.xL = grow(a.xL, n*d)
	widest := max(d, qd, f)
	a.dx, a.dh, a.dt = grow(a.dx, n*d), grow(a.dh, n*d), grow(a.dt, n*widest)
	a.dq, a.dk, a.dv, a.do = grow(a.dq, n*qd), grow(a.dk, n*kvd), grow(a.dv, n*kvd), grow(a.do, n*qd)
	a.dg, a.du, a.da = grow(a.dg, n*f), grow(a.du, n*f), grow(a.da, n*f)
	a.wt = grow(a.wt, max(s.Vocab*d, widest*widest))
	return a
}

// ForwardBackward runs the forward pass over b, then the backward pass, and
// returns the mean cross-entropy (natural log) over the positions with a
// target. Every tensor's G is overwritten with d(loss)/d(W). A batch
// without any target has loss 0 and zero gradients.
func (m *Model) ForwardBackward(b *Batch) (float64, error) {
	if err := b.check(m.Shape.Vocab, m.Shape.ContextLen); err != nil {
		return 0, err
	}
	a := m.forward(b, false)
	loss := m.loss(b, a)
	m.backward(b, a)
	return loss, nil
}

// Logits runs the forward pass alone over one sequence and returns the
// logits at each of its positions (len(tokens) x vocab).
func (m *Model) Logits(tokens []int32) ([][]float32, error) {
	n := len(tokens)
	b := &Batch{B: 1, T: n, Tokens: tokens, Targets: make([]int32, n)}
	for i := range b.Targets {
		b.Targets[i] = -1
	}
	if err := b.check(m.Shape.Vocab, m.Shape.ContextLen); err != nil {
		return nil, err
	}
	a := m.forward(b, true)
	out := make([][]float32, n)
	v := m.Shape.Vocab
	for i := range out {
		out[i] = append([]float32(nil), a.logits[i*v:(i+1)*v]...)
	}
	return out, nil
}

// forward runs the model over b, keeping the activations; logits are
// computed for the rows with a target, or for every row with all set.
func (m *Model) forward(b *Batch, all bool) *acts {
	s := &m.Shape
	a := m.ensure(b)
	n, d, f := a.n, s.Dim, s.HiddenDim
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd

	x := a.layers[0].xin
	for i, t := range b.Tokens {
		copy(x[i*d:(i+1)*d], m.emb.W[int(t)*d:(int(t)+1)*d])
	}
	for l := range m.layers {
		lp, la := &m.layers[l], &a.layers[l]
		rmsNorm(la.h1, la.rstd1, la.xin, lp.attnNorm.W, n, d, s.NormEps)
		mulT(la.q, la.h1, n, lp.wq.W, qd, d, a.wt)
		mulT(la.k, la.h1, n, lp.wk.W, kvd, d, a.wt)
		mulT(la.v, la.h1, n, lp.wv.W, kvd, d, a.wt)
		m.rope(la.q, a.pos, s.Heads, false)
		m.rope(la.k, a.pos, s.KVHeads, false)
		m.attend(a, la)
		mulT(a.dt, la.o, n, lp.wo.W, d, qd, a.wt)
		add(la.xmid, la.xin, a.dt[:n*d])
		rmsNorm(la.h2, la.rstd2, la.xmid, lp.ffnNorm.W, n, d, s.NormEps)
		mulT(la.g, la.h2, n, lp.w1.W, f, d, a.wt)
		mulT(la.u, la.h2, n, lp.w3.W, f, d, a.wt)
		kernels.Parallel(n, func(lo, hi int) {
			for i := lo * f; i < hi*f; i++ {
				g := la.g[i]
				sg := 1 / (1 + float32(math.Exp(float64(-g))))
				la.sg[i] = sg
				la.a[i] = g * sg * la.u[i]
			}
		})
		mulT(a.dt, la.a, n, lp.w2.W, d, f, a.wt)
		next := a.xL
		if l+1 < len(m.layers) {
			next = a.layers[l+1].xin
		}
		add(next, la.xmid, a.dt[:n*d])
	}

	a.rows = a.rows[:0]
	for i := 0; i < n; i++ {
		if all || b.Targets[i] >= 0 {
			a.rows = append(a.rows, i)
		}
	}
	r := len(a.rows)
	a.hF, a.rstdF = grow(a.hF, r*d), grow(a.rstdF, r)
	a.logits = grow(a.logits, r*s.Vocab)
	xs := a.dh[:r*d] // the computed rows of the stream, gathered
	for j, i := range a.rows {
		copy(xs[j*d:(j+1)*d], a.xL[i*d:(i+1)*d])
	}
	rmsNorm(a.hF, a.rstdF, xs, m.outNorm.W, r, d, s.NormEps)
	if r > 0 {
		mulT(a.logits, a.hF, r, m.out.W, s.Vocab, d, a.wt)
	}
	return a
}

// loss turns the logits of the rows with a target into the mean
// cross-entropy, and the logits into its gradient.
func (m *Model) loss(b *Batch, a *acts) float64 {
	v := m.Shape.Vocab
	r := len(a.rows)
	if r == 0 {
		return 0
	}
	parts := make([]float64, r)
	inv := 1 / float32(r)
	kernels.Parallel(r, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			z := a.logits[j*v : (j+1)*v]
			t := int(b.Targets[a.rows[j]])
			mx := z[0]
			for _, x := range z {
				mx = max(mx, x)
			}
			zt := float64(z[t] - mx)
			var sum float64
			for k, x := range z {
				e := math.Exp(float64(x - mx))
				z[k] = float32(e)
				sum += e
			}
			parts[j] = math.Log(sum) - zt
			sc := float32(1/sum) * inv
			for k := range z {
				z[k] *= sc
			}
			z[t] -= inv
		}
	})
	var loss float64
	for _, p := range parts {
		loss += p
	}
	return loss / float64(r)
}

// backward computes every tensor's gradient from the saved activations
// and the logits' gradient.
func (m *Model) backward(b *Batch, a *acts) {
	s := &m.Shape
	n, d, f, v := a.n, s.Dim, s.HiddenDim, s.Vocab
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	for _, t := range m.tensors {
		clear(t.G)
	}

	// Classifier and final norm, over the computed rows.
	r := len(a.rows)
	clear(a.dx[:n*d])
	if r > 0 {
		mulTN(m.out.G, a.logits, r, v, a.hF, d)
		a.dhF = grow(a.dhF, r*d)
		mulN(a.dhF, a.logits, r, m.out.W, v, d, false)
		xs := a.dh[:r*d]
		for j, i := range a.rows {
			copy(xs[j*d:(j+1)*d], a.xL[i*d:(i+1)*d])
		}
		dxs := a.dt[:r*d]
		clear(dxs)
		m.rmsNormBack(dxs, m.outNorm.G, a.dhF, xs, a.rstdF, m.outNorm.W, r, d)
		for j, i := range a.rows {
			copy(a.dx[i*d:(i+1)*d], dxs[j*d:(j+1)*d])
		}
	}

	for l := len(m.layers) - 1; l >= 0; l-- {
		lp, la := &m.layers[l], &a.layers[l]
		// FFN: x = xmid + (silu(g) * u) W2^T.
		mulN(a.da, a.dx, n, lp.w2.W, d, f, false)
		mulTN(lp.w2.G, a.dx, n, d, la.a, f)
		kernels.Parallel(n, func(lo, hi int) {
			for i := lo * f; i < hi*f; i++ {
				g, sg := la.g[i], la.sg[i]
				a.du[i] = a.da[i] * g * sg
				a.dg[i] = a.da[i] * la.u[i] * sg * (1 + g*(1-sg))
			}
		})
		mulN(a.dh, a.dg, n, lp.w1.W, f, d, false)
		mulN(a.dh, a.du, n, lp.w3.W, f, d, true)
		mulTN(lp.w1.G, a.dg, n, f, la.h2, d)
		mulTN(lp.w3.G, a.du, n, f, la.h2, d)
		m.rmsNormBack(a.dx, lp.ffnNorm.G, a.dh, la.xmid, la.rstd2, lp.ffnNorm.W, n, d)

		// Attention: xmid = xin + o Wo^T.
		mulN(a.do, a.dx, n, lp.wo.W, d, qd, false)
		mulTN(lp.wo.G, a.dx, n, d, la.o, qd)
		m.attendBack(a, la)
		m.rope(a.dq, a.pos, s.Heads, true)
		m.rope(a.dk, a.pos, s.KVHeads, true)
		mulN(a.dh, a.dq, n, lp.wq.W, qd, d, false)
		mulN(a.dh, a.dk, n, lp.wk.W, kvd, d, true)
		mulN(a.dh, a.dv, n, lp.wv.W, kvd, d, true)
		mulTN(lp.wq.G, a.dq, n, qd, la.h1, d)
		mulTN(lp.wk.G, a.dk, n, kvd, la.h1, d)
		mulTN(lp.wv.G, a.dv, n, kvd, la.h1, d)
		m.rmsNormBack(a.dx, lp.attnNorm.G, a.dh, la.xin, la.rstd1, lp.attnNorm.W, n, d)
	}

	// Embedding: the classifier's gradient is already there when tied.
	for i, t := range b.Tokens {
		kernels.Add(m.emb.G[int(t)*d:(int(t)+1)*d], a.dx[i*d:(i+1)*d])
	}
}

// add sets out = x + y.
func add(out, x, y []float32) {
	kernels.Parallel(len(out)/64+1, func(lo, hi int) {
		lo, hi = lo*64, min(len(out), hi*64)
		for i := lo; i < hi; i++ {
			out[i] = x[i] + y[i]
		}
	})
}

// rmsNorm sets out row i = x_i / rms(x_i) * w and rstd[i] = 1/rms(x_i),
// rms(x) = sqrt(mean(x^2) + eps), for n rows of d.
func rmsNorm(out, rstd, x, w []float32, n, d int, eps float32) {
	kernels.Parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi := x[i*d : (i+1)*d]
			ss := kernels.Dot(xi, xi)/float32(d) + eps
			r := float32(1 / math.Sqrt(float64(ss)))
			rstd[i] = r
			oi := out[i*d : (i+1)*d]
			for j := range xi {
				oi[j] = xi[j] * r * w[j]
			}
		}
	})
}

// normChunks is the number of partial sums of a norm's weight gradient: a
// constant, not the number of threads, so that training gives the same
// bits on any number of cores.
const normChunks = 2

// rmsNormBack adds to dx the gradient through y = rmsNorm(x) * w given dy,
// and to dw the norm weights' gradient, for n rows of d.
func (m *Model) rmsNormBack(dx, dw, dy, x, rstd, w []float32, n, d int) {
	parts := make([][]float32, normChunks)
	chunk := (n + normChunks - 1) / normChunks
	kernels.Parallel(normChunks, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			acc := make([]float32, d)
			parts[p] = acc
			for i := p * chunk; i < min(n, (p+1)*chunk); i++ {
				xi, dyi, dxi := x[i*d:(i+1)*d], dy[i*d:(i+1)*d], dx[i*d:(i+1)*d]
				r := rstd[i]
				var dot float32
				for j := range xi {
					g := dyi[j] * w[j]
					dot += g * xi[j]
					acc[j] += dyi[j] * xi[j] * r
				}
				c := dot * r * r * r / float32(d)
				for j := range xi {
					dxi[j] += dyi[j]*w[j]*r - c*xi[j]
				}
			}
		}
	})
	for _, p := range parts {
		if p != nil {
			kernels.Add(dw, p)
		}
	}
}

// rope rotates every head of every row of x (n rows of heads*HeadDim) by
// its token's position; back rotates the other way (the gradient).
func (m *Model) rope(x []float32, pos []int32, heads int, back bool) {
	hd := m.Shape.HeadDim()
	half := hd / 2
	w := heads * hd
	kernels.Parallel(len(pos), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := int(pos[i])
			cos, sin := m.cos[p*half:(p+1)*half], m.sin[p*half:(p+1)*half]
			for h := 0; h < heads; h++ {
				v := x[i*w+h*hd : i*w+(h+1)*hd]
				for j := 0; j < half; j++ {
					x0, x1 := v[2*j], v[2*j+1]
					c, s := cos[j], sin[j]
					if back {
						s = -s
					}
					v[2*j] = x0*c - x1*s
					v[2*j+1] = x0*s + x1*c
				}
			}
		}
	})
}

// attend computes causal attention within each sequence: la.att holds the
// probabilities, la.o the heads' outputs.
func (m *Model) attend(a *acts, la *layerActs) {
	s := &m.Shape
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	kernels.Parallel(a.n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := int(a.pos[i])
			s0 := i - p
			o := la.o[i*qd : (i+1)*qd]
			clear(o)
			for h := 0; h < s.Heads; h++ {
				kh := h / group
				q := la.q[i*qd+h*hd : i*qd+(h+1)*hd]
				pr := la.att[a.attOff[i]+h*(p+1) : a.attOff[i]+(h+1)*(p+1)]
				kernels.DotStrided(pr, q, la.k[s0*kvd+kh*hd:], kvd)
				kernels.SoftmaxScaled(pr, scale)
				kernels.AxpyStrided(o[h*hd:(h+1)*hd], pr, la.v[s0*kvd+kh*hd:], kvd)
			}
		}
	})
}

// attendBack computes dq, dk and dv from do, one sequence per task (the
// keys and values of a sequence gather gradient from all its tokens).
// Per head, a first pass over the queries makes each row of the scores'
// gradient ds and dq; a second pass over the keys gathers the columns of
// the probabilities and of ds to make dv and dk, each key's sum in one
// strided kernel call.
func (m *Model) attendBack(a *acts, la *layerActs) {
	s := &m.Shape
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	n := a.n
	clear(a.dq[:n*qd])
	clear(a.dk[:n*kvd])
	clear(a.dv[:n*kvd])
	nseg := len(a.segs) - 1
	kernels.Parallel(nseg, func(lo, hi int) {
		var ds, col, col2 []float32
		for sg := lo; sg < hi; sg++ {
			s0, s1 := a.segs[sg], a.segs[sg+1]
			L := s1 - s0
			// ds row t (of t+1 values) starts at t*(t+1)/2.
			if cap(ds) < L*(L+1)/2 {
				ds = make([]float32, L*(L+1)/2)
				col, col2 = make([]float32, L), make([]float32, L)
			}
			for h := 0; h < s.Heads; h++ {
				kh := h / group
				kb, vb := la.k[s0*kvd+kh*hd:], la.v[s0*kvd+kh*hd:]
				for t := 0; t < L; t++ {
					i := s0 + t
					pr := la.att[a.attOff[i]+h*(t+1) : a.attOff[i]+(h+1)*(t+1)]
					do := a.do[i*qd+h*hd : i*qd+(h+1)*hd]
					dp := ds[t*(t+1)/2 : t*(t+1)/2+t+1]
					kernels.DotStrided(dp, do, vb, kvd) // dp_j = do . v_j
					sum := kernels.Dot(pr, dp)
					for j, pj := range pr {
						dp[j] = pj * (dp[j] - sum) * scale // ds_j, with the scores' scale
					}
					kernels.AxpyStrided(a.dq[i*qd+h*hd:i*qd+(h+1)*hd], dp, kb, kvd)
				}
				for j := 0; j < L; j++ {
					// Column j of the probabilities and of ds, rows j..L-1.
					pc, dc := col[:L-j], col2[:L-j]
					for t := j; t < L; t++ {
						i := s0 + t
						pc[t-j] = la.att[a.attOff[i]+h*(t+1)+j]
						dc[t-j] = ds[t*(t+1)/2+j]
					}
					i := s0 + j
					kernels.AxpyStrided(a.dv[i*kvd+kh*hd:i*kvd+(kh+1)*hd], pc, a.do[i*qd+h*hd:], qd)
					kernels.AxpyStrided(a.dk[i*kvd+kh*hd:i*kvd+(kh+1)*hd], dc, la.q[i*qd+h*hd:], qd)
				}
			}
		}
	})
}

// String describes the shape and size, for logs.
func (m *Model) String() string {
	s := m.Shape
	return fmt.Sprintf("dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d, context %d, tied %v: %d parameters",
		s.Dim, s.HiddenDim, s.Layers, s.Heads, s.KVHeads, s.Vocab, s.ContextLen, s.Tied, m.NumParams())
}
