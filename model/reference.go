package model

import (
	"fmt"
	"math"
	"slices"
)

// Reference runs the forward pass over tokens, one position after the
// other, as llama2.c's run.c does, and returns the logits at every
// position (len(tokens) rows of Vocab). It is the oracle every backend is
// tested against: one function, one line per operation, sums in float64,
// each weight row dequantized (Tensor.Row) when it is used, whatever the
// weights' type; slow, and meant for tests. The training package's
// forward (model/train, step.go) is the same network with its backward
// pass.
func (m *Model) Reference(tokens []int) ([][]float32, error) {
	c, w := &m.Config, m.Weights
	if len(tokens) > c.ContextLen {
		return nil, fmt.Errorf("%w: %d tokens, context length %d", ErrContextFull, len(tokens), c.ContextLen)
	}
	for i, t := range tokens {
		if t < 0 || t >= c.Vocab {
			return nil, fmt.Errorf("model: token %d at %d is outside the vocabulary (0..%d)", t, i, c.Vocab-1)
		}
	}
	dim, hd, hpk := c.Dim, c.HeadDim, c.Heads/c.KVHeads
	x, xb := make([]float32, dim), make([]float32, dim) // residual stream, sublayer input/output
	q, k, v := make([]float32, c.QDim()), make([]float32, c.KVDim()), make([]float32, c.KVDim())
	ao := make([]float32, c.QDim())                                       // attention output
	hb, hb2 := make([]float32, c.HiddenDim), make([]float32, c.HiddenDim) // FFN hidden
	keys, values := make([][][]float32, c.Layers), make([][][]float32, c.Layers)
	row := make([]float32, max(dim, c.QDim(), c.HiddenDim)) // one dequantized weight row

	// out = mat x, one dequantized row at a time.
	matVec := func(out []float32, mat *Tensor, x []float32) {
		for r := range out {
			mat.Row(row, r)
			s := 0.0
			for i, xi := range x {
				s += float64(row[i]) * float64(xi)
			}
			out[r] = float32(s)
		}
	}
	// out = x / rms(x) * g.
	rmsNorm := func(out, x, g []float32) {
		ss := 0.0
		for _, xi := range x {
			ss += float64(xi) * float64(xi)
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+float64(c.NormEps))
		for i := range out {
			out[i] = float32(float64(x[i]) * inv * float64(g[i]))
		}
	}
	add := func(y, x []float32) {
		for i := range y {
			y[i] += x[i]
		}
	}
	// Rotate the pairs of one head's vector by the angles of position pos:
	// (x[2i], x[2i+1]) when interleaved, else (x[i], x[i+hd/2]).
	rope := func(h []float32, pos int) {
		for i, f := range m.invFreq {
			a, b := 2*i, 2*i+1
			if !c.RopeInterleaved {
				a, b = i, i+hd/2
			}
			sin, cos := math.Sincos(float64(pos) * f)
			x0, x1 := float64(h[a]), float64(h[b])
			h[a], h[b] = float32(x0*cos-x1*sin), float32(x0*sin+x1*cos)
		}
	}

	logits := make([][]float32, 0, len(tokens))
	for pos, tok := range tokens {
		w.TokenEmbd.Row(x, tok) // x = embedding(token)
		for l := range c.Layers {
			lw := &w.Layers[l]
			rmsNorm(xb, x, lw.AttnNorm) // xb = rmsnorm(x)
			matVec(q, lw.Wq, xb)        // q = Wq xb
			matVec(k, lw.Wk, xb)        // k = Wk xb
			matVec(v, lw.Wv, xb)        // v = Wv xb
			if c.QKVBias {              // Qwen2's biases
				add(q, lw.Bq)
				add(k, lw.Bk)
				add(v, lw.Bv)
			}
			for h := range c.Heads {
				rope(q[h*hd:(h+1)*hd], pos) // RoPE on every query head
			}
			for h := range c.KVHeads {
				rope(k[h*hd:(h+1)*hd], pos) // and every key head
			}
			keys[l] = append(keys[l], slices.Clone(k))     // the cache: position pos's key
			values[l] = append(values[l], slices.Clone(v)) // and value
			for h := range c.Heads {                       // attention, head by head
				qh, kv := q[h*hd:(h+1)*hd], (h/hpk)*hd // the query, its kv head's offset
				att := make([]float64, pos+1)
				mx := math.Inf(-1)
				for t := range att {
					s := 0.0
					for i, qi := range qh {
						s += float64(qi) * float64(keys[l][t][kv+i])
					}
					att[t] = s / math.Sqrt(float64(hd)) // score = q·k / sqrt(head dim)
					mx = max(mx, att[t])
				}
				sum := 0.0
				for t := range att {
					att[t] = math.Exp(att[t] - mx) // softmax over positions 0..pos
					sum += att[t]
				}
				for i := range hd {
					s := 0.0
					for t, p := range att {
						s += p / sum * float64(values[l][t][kv+i])
					}
					ao[h*hd+i] = float32(s) // the probabilities' weighted sum of values
				}
			}
			matVec(xb, lw.Wo, ao)      // xb = Wo ao
			add(x, xb)                 // x += attention (the residual)
			rmsNorm(xb, x, lw.FFNNorm) // xb = rmsnorm(x)
			matVec(hb, lw.W1, xb)      // hb = W1 xb (gate)
			matVec(hb2, lw.W3, xb)     // hb2 = W3 xb (up)
			for i, g := range hb {
				s := float64(g) / (1 + math.Exp(-float64(g)))
				hb[i] = float32(s * float64(hb2[i])) // hb = silu(hb) * hb2
			}
			matVec(xb, lw.W2, hb) // xb = W2 hb (down)
			add(x, xb)            // x += ffn (the residual)
		}
		rmsNorm(xb, x, w.OutputNorm) // xb = rmsnorm(x)
		out := make([]float32, c.Vocab)
		matVec(out, w.Output, xb) // logits = output xb
		logits = append(logits, out)
	}
	return logits, nil
}
