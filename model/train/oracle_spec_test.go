package train_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/train"
)

// This file holds what the oracle tests share: the parameter list a shape
// implies, the tiny shapes and batch the tests run on, random parameters,
// and a plain-loop float64 forward pass that pins down the gorgonia graph's
// forward semantics (the gradients themselves come from gorgonia).

// oracleParam is one parameter in float64: row-major Rows x Cols values
// (a norm's weights are 1 x Dim).
type oracleParam struct {
	Name       string
	Rows, Cols int
	Vec        bool
	W          []float64
}

// oracleSpecs returns the parameters a shape has, in GGUF naming, with
// nil values.
func oracleSpecs(s synth.Shape) []*oracleParam {
	hd := s.HeadDim()
	d, q, kv, h := s.Dim, s.Heads*hd, s.KVHeads*hd, s.HiddenDim
	ps := []*oracleParam{{Name: "token_embd.weight", Rows: s.Vocab, Cols: d}}
	for l := range s.Layers {
		pre := fmt.Sprintf("blk.%d.", l)
		ps = append(ps,
			&oracleParam{Name: pre + "attn_norm.weight", Rows: 1, Cols: d, Vec: true},
			&oracleParam{Name: pre + "attn_q.weight", Rows: q, Cols: d},
			&oracleParam{Name: pre + "attn_k.weight", Rows: kv, Cols: d},
			&oracleParam{Name: pre + "attn_v.weight", Rows: kv, Cols: d},
			&oracleParam{Name: pre + "attn_output.weight", Rows: d, Cols: q},
			&oracleParam{Name: pre + "ffn_norm.weight", Rows: 1, Cols: d, Vec: true},
			&oracleParam{Name: pre + "ffn_gate.weight", Rows: h, Cols: d},
			&oracleParam{Name: pre + "ffn_up.weight", Rows: h, Cols: d},
			&oracleParam{Name: pre + "ffn_down.weight", Rows: d, Cols: h},
		)
	}
	ps = append(ps, &oracleParam{Name: "output_norm.weight", Rows: 1, Cols: d, Vec: true})
	if !s.Tied {
		ps = append(ps, &oracleParam{Name: "output.weight", Rows: s.Vocab, Cols: d})
	}
	return ps
}

// oracleShape is the tiny shape the oracle tests use: two layers, grouped
// query attention (4 query heads over 2 key/value heads), head dim 4, and
// the smallest vocabulary synth.Shape.Validate accepts.
func oracleShape(tied bool) synth.Shape {
	return synth.Shape{Name: "oracle", Dim: 16, HiddenDim: 24, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 259, ContextLen: 16, RopeTheta: 10000, NormEps: 1e-5, Tied: tied}
}

// oracleBatch returns 3 sequences of 7 tokens: the first scored at every
// position, the second with a 2-token prompt (targets -1), the third a
// short sequence padded after 4 tokens (targets -1, padding token 0).
func oracleBatch(vocab int) *train.Batch {
	const B, T = 3, 7
	r := rand.New(rand.NewPCG(7, 11))
	b := &train.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
	for s := range B {
		seq := make([]int32, T+1)
		for i := range seq {
			seq[i] = int32(r.IntN(vocab))
		}
		for t := range T {
			i := s*T + t
			b.Tokens[i], b.Targets[i] = seq[t], seq[t+1]
			switch {
			case s == 1 && t < 2: // prompt
				b.Targets[i] = -1
			case s == 2 && t >= 4: // padding
				b.Tokens[i], b.Targets[i] = 0, -1
			}
		}
	}
	return b
}

// oracleRandomize fills the parameters with values far from a fresh
// initialization (std 0.3 matrices, norms around 1), so that attention is
// far from uniform and every path of the model matters.
func oracleRandomize(ps []*oracleParam, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for _, p := range ps {
		p.W = make([]float64, p.Rows*p.Cols)
		for i := range p.W {
			if p.Vec {
				p.W[i] = 1 + 0.2*r.NormFloat64()
			} else {
				p.W[i] = 0.3 * r.NormFloat64()
			}
		}
	}
}

// oracleByName indexes parameters by name.
func oracleByName(ps []*oracleParam) map[string]*oracleParam {
	m := make(map[string]*oracleParam, len(ps))
	for _, p := range ps {
		m[p.Name] = p
	}
	return m
}

// oracleRefLoss is the model's loss written out as plain loops in float64,
// straight from the model's definition. It checks the gorgonia graph's
// forward pass; it is not a gradient oracle.
func oracleRefLoss(s synth.Shape, ps []*oracleParam, b *train.Batch) float64 {
	P := oracleByName(ps)
	w := func(name string) *oracleParam { return P[name] }
	hd := s.HeadDim()
	group := s.Heads / s.KVHeads
	// linear returns x W^T.
	linear := func(x []float64, p *oracleParam) []float64 {
		y := make([]float64, p.Rows)
		for r := range p.Rows {
			for c := range p.Cols {
				y[r] += p.W[r*p.Cols+c] * x[c]
			}
		}
		return y
	}
	rmsnorm := func(x []float64, p *oracleParam) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+float64(s.NormEps))
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v * inv * p.W[i]
		}
		return y
	}
	rope := func(x []float64, t int) {
		for h := 0; h < len(x)/hd; h++ {
			for i := range hd / 2 {
				ang := float64(t) * math.Pow(s.RopeTheta, -2*float64(i)/float64(hd))
				c, sn := math.Cos(ang), math.Sin(ang)
				a, bb := x[h*hd+2*i], x[h*hd+2*i+1]
				x[h*hd+2*i], x[h*hd+2*i+1] = a*c-bb*sn, a*sn+bb*c
			}
		}
	}
	out := w("output.weight")
	if s.Tied {
		out = w("token_embd.weight")
	}
	emb := w("token_embd.weight")
	var total float64
	var count int
	for seq := range b.B {
		xs := make([][]float64, b.T)
		for t := range b.T {
			tok := int(b.Tokens[seq*b.T+t])
			xs[t] = append([]float64(nil), emb.W[tok*s.Dim:(tok+1)*s.Dim]...)
		}
		for l := range s.Layers {
			pre := fmt.Sprintf("blk.%d.", l)
			qs, ks, vs := make([][]float64, b.T), make([][]float64, b.T), make([][]float64, b.T)
			for t := range b.T {
				h := rmsnorm(xs[t], w(pre+"attn_norm.weight"))
				qs[t], ks[t], vs[t] = linear(h, w(pre+"attn_q.weight")), linear(h, w(pre+"attn_k.weight")), linear(h, w(pre+"attn_v.weight"))
				rope(qs[t], t)
				rope(ks[t], t)
			}
			for t := range b.T {
				o := make([]float64, s.Heads*hd)
				for hq := range s.Heads {
					g := hq / group
					sc := make([]float64, t+1)
					mx := math.Inf(-1)
					for u := 0; u <= t; u++ {
						for j := range hd {
							sc[u] += qs[t][hq*hd+j] * ks[u][g*hd+j]
						}
						sc[u] /= math.Sqrt(float64(hd))
						mx = max(mx, sc[u])
					}
					var z float64
					for u := range sc {
						sc[u] = math.Exp(sc[u] - mx)
						z += sc[u]
					}
					for u := range sc {
						for j := range hd {
							o[hq*hd+j] += sc[u] / z * vs[u][g*hd+j]
						}
					}
				}
				for i, v := range linear(o, w(pre+"attn_output.weight")) {
					xs[t][i] += v
				}
			}
			for t := range b.T {
				h := rmsnorm(xs[t], w(pre+"ffn_norm.weight"))
				a, u := linear(h, w(pre+"ffn_gate.weight")), linear(h, w(pre+"ffn_up.weight"))
				for i := range a {
					a[i] = a[i] / (1 + math.Exp(-a[i])) * u[i]
				}
				for i, v := range linear(a, w(pre+"ffn_down.weight")) {
					xs[t][i] += v
				}
			}
		}
		for t := range b.T {
			tgt := int(b.Targets[seq*b.T+t])
			if tgt < 0 {
				continue
			}
			logits := linear(rmsnorm(xs[t], w("output_norm.weight")), out)
			mx := math.Inf(-1)
			for _, v := range logits {
				mx = max(mx, v)
			}
			var z float64
			for _, v := range logits {
				z += math.Exp(v - mx)
			}
			total += math.Log(z) + mx - logits[tgt]
			count++
		}
	}
	return total / float64(count)
}
