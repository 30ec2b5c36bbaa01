package train_test

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/train"
)

// The gorgonia oracle: the model's loss as a float64 gorgonia expression
// graph, every parameter an input node, differentiated by gorgonia.Grad and
// run on a TapeMachine.
//
// The B sequences are stacked into one N = B*T row matrix, so that every
// linear layer is one matrix product. Only a handful of gorgonia ops are
// used: Mul (matrix product), Transpose, Add, Sub, HadamardProd, Square,
// Exp, Log, Sqrt, Inverse, Sigmoid and a full Sum to a scalar. Everything
// else (lookups, broadcasts, per-head slicing, masks, reductions along an
// axis) is a matrix product with a constant matrix built here, which keeps
// clear of the corners of gorgonia's broadcasting, slicing and SoftMax-axis
// semantics:
//
//   - embedding lookup: X = OneHot(N x Vocab) * token_embd
//   - row reduction of A (n x m): A * ones(m x 1); row broadcast of a column
//     c (n x 1) to n x m: c * ones(1 x m); a norm weight w (1 x m) to every
//     row: ones(n x 1) * w
//   - RMSNorm: x ⊙ ((Inverse(Sqrt(Square(x) * (1/D)(D x 1) + eps))) * ones(1 x D)) ⊙ (ones * w)
//   - y = x W^T: Mul(x, Transpose(W))
//   - RoPE: q ⊙ Cos + (q * R) ⊙ Sin, with Cos, Sin (N x width) holding the
//     angle of each (row position, pair) and R the pairwise rotation
//     (R[2i+1][2i] = -1, R[2i][2i+1] = 1), so (q R)[2i] = -q[2i+1] and
//     (q R)[2i+1] = q[2i]
//   - head hq: q * SelQ_hq (width x hd, scaled by 1/sqrt(hd)); its kv head
//     g = hq / (Heads/KVHeads): k * Sel_g, v * Sel_g; the heads' outputs are
//     concatenated as sum over hq of o_hq * Sel_hq^T
//   - causal softmax: E = Exp(q_h k_h^T) ⊙ Mask, Mask (N x N) one where the
//     rows are in the same sequence and the key's position <= the query's,
//     zero elsewhere (also between sequences); P = E ⊙ (Inverse(E * ones) *
//     ones^T). No max is subtracted: in float64, with these small models,
//     the exponents stay far from overflow.
//   - SiLU: z ⊙ Sigmoid(z)
//   - cross-entropy: lse = Log(Exp(L) * ones(V x 1)); loss = Sum(wcol ⊙ lse)
//     - Sum(Y ⊙ L), with wcol[i] = 1/count and Y[i][target_i] = 1/count on
//     the scored rows, zero on the others.

// oracleGraph is a built graph: the loss node and a node per parameter.
type oracleGraph struct {
	g      *G.ExprGraph
	loss   *G.Node
	params []*G.Node // in the order of the parameters given
}

// buildOracleGraph builds the loss graph for parameters ps (as oracleSpecs
// lists them, with values) on batch b.
func buildOracleGraph(s synth.Shape, ps []*oracleParam, b *train.Batch) (og *oracleGraph, err error) {
	defer func() {
		// G.Must panics on a graph construction error.
		if r := recover(); r != nil {
			og, err = nil, fmt.Errorf("oracle graph: %v", r)
		}
	}()
	if s.Heads%s.KVHeads != 0 || s.Dim%s.Heads != 0 || s.HeadDim()%2 != 0 {
		return nil, fmt.Errorf("oracle graph: unsupported shape %+v", s)
	}
	if len(b.Tokens) != b.B*b.T || len(b.Targets) != b.B*b.T {
		return nil, fmt.Errorf("oracle graph: batch of %d tokens, %d targets for B=%d T=%d", len(b.Tokens), len(b.Targets), b.B, b.T)
	}
	g := G.NewGraph()
	og = &oracleGraph{g: g}
	P := make(map[string]*G.Node, len(ps))
	for _, p := range ps {
		if len(p.W) != p.Rows*p.Cols {
			return nil, fmt.Errorf("oracle graph: %s has %d values, want %d", p.Name, len(p.W), p.Rows*p.Cols)
		}
		v := tensor.New(tensor.WithShape(p.Rows, p.Cols), tensor.WithBacking(append([]float64(nil), p.W...)))
		n := G.NewMatrix(g, tensor.Float64, G.WithShape(p.Rows, p.Cols), G.WithName(p.Name), G.WithValue(v))
		P[p.Name] = n
		og.params = append(og.params, n)
	}
	param := func(name string) *G.Node {
		n, ok := P[name]
		if !ok {
			panic("missing parameter " + name)
		}
		return n
	}

	// Constant matrices. They are input nodes that are not differentiated,
	// not gorgonia constants (NewConstant): the graph merges constant nodes
	// whose values print alike, and a tensor's printout elides the middle
	// rows of a tall matrix, so that, say, the selection matrices of two
	// heads would silently become one node. An input node is identified by
	// its name, which is unique here.
	nconst := 0
	constant := func(rows, cols int, fill func(r, c int) float64) *G.Node {
		data := make([]float64, rows*cols)
		for r := range rows {
			for c := range cols {
				data[r*cols+c] = fill(r, c)
			}
		}
		nconst++
		return G.NewMatrix(g, tensor.Float64, G.WithShape(rows, cols), G.WithName(fmt.Sprintf("oracle.const.%d", nconst)),
			G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data))))
	}
	value := func(v float64) func(r, c int) float64 { return func(int, int) float64 { return v } }
	ones := func(rows, cols int) *G.Node { return constant(rows, cols, value(1)) }

	N, D, V := b.B*b.T, s.Dim, s.Vocab
	hd := s.HeadDim()
	qw, kvw := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	pos := func(row int) int { return row % b.T }

	mul := func(a, c *G.Node) *G.Node { return G.Must(G.Mul(a, c)) }
	had := func(a, c *G.Node) *G.Node { return G.Must(G.HadamardProd(a, c)) }
	add := func(a, c *G.Node) *G.Node { return G.Must(G.Add(a, c)) }
	linear := func(x, w *G.Node) *G.Node { return mul(x, G.Must(G.Transpose(w))) }

	onesN1, ones1N := ones(N, 1), ones(1, N)
	meanD := constant(D, 1, value(1/float64(D)))
	epsN1 := constant(N, 1, value(float64(s.NormEps)))
	ones1D := ones(1, D)
	rmsnorm := func(x, w *G.Node) *G.Node {
		ms := mul(G.Must(G.Square(x)), meanD) // N x 1
		inv := G.Must(G.Inverse(G.Must(G.Sqrt(add(ms, epsN1)))))
		return had(had(x, mul(inv, ones1D)), mul(onesN1, w))
	}

	// RoPE constants for a width of whole heads.
	angle := func(row, col int) float64 {
		i := (col % hd) / 2
		return float64(pos(row)) * math.Pow(s.RopeTheta, -2*float64(i)/float64(hd))
	}
	rot := func(width int) *G.Node {
		return constant(width, width, func(r, c int) float64 {
			switch {
			case r%2 == 1 && c == r-1:
				return -1
			case r%2 == 0 && c == r+1:
				return 1
			}
			return 0
		})
	}
	cosQ := constant(N, qw, func(r, c int) float64 { return math.Cos(angle(r, c)) })
	sinQ := constant(N, qw, func(r, c int) float64 { return math.Sin(angle(r, c)) })
	cosK := constant(N, kvw, func(r, c int) float64 { return math.Cos(angle(r, c)) })
	sinK := constant(N, kvw, func(r, c int) float64 { return math.Sin(angle(r, c)) })
	rotQ, rotK := rot(qw), rot(kvw)
	rope := func(x, cos, sin, r *G.Node) *G.Node { return add(had(x, cos), had(mul(x, r), sin)) }

	// Head selection.
	sel := func(width, h int, scale float64) *G.Node {
		return constant(width, hd, func(r, c int) float64 {
			if r == h*hd+c {
				return scale
			}
			return 0
		})
	}
	selQ := make([]*G.Node, s.Heads)   // scaled by 1/sqrt(hd)
	placeQ := make([]*G.Node, s.Heads) // hd x qw: head output into its columns
	for h := range s.Heads {
		selQ[h] = sel(qw, h, 1/math.Sqrt(float64(hd)))
		placeQ[h] = G.Must(G.Transpose(sel(qw, h, 1)))
	}
	selKV := make([]*G.Node, s.KVHeads)
	for g := range s.KVHeads {
		selKV[g] = sel(kvw, g, 1)
	}
	mask := constant(N, N, func(r, c int) float64 {
		if r/b.T == c/b.T && pos(c) <= pos(r) {
			return 1
		}
		return 0
	})

	// Embedding.
	x := mul(constant(N, V, func(r, c int) float64 {
		if int(b.Tokens[r]) == c {
			return 1
		}
		return 0
	}), param("token_embd.weight"))

	for l := range s.Layers {
		pre := fmt.Sprintf("blk.%d.", l)
		h := rmsnorm(x, param(pre+"attn_norm.weight"))
		q := rope(linear(h, param(pre+"attn_q.weight")), cosQ, sinQ, rotQ)
		k := rope(linear(h, param(pre+"attn_k.weight")), cosK, sinK, rotK)
		v := linear(h, param(pre+"attn_v.weight"))
		var o *G.Node
		for hq := range s.Heads {
			kvh := hq / group
			qh, kh, vh := mul(q, selQ[hq]), mul(k, selKV[kvh]), mul(v, selKV[kvh])
			e := had(G.Must(G.Exp(linear(qh, kh))), mask) // N x N
			p := had(e, mul(G.Must(G.Inverse(mul(e, onesN1))), ones1N))
			oh := mul(mul(p, vh), placeQ[hq]) // N x qw
			if o == nil {
				o = oh
			} else {
				o = add(o, oh)
			}
		}
		x = add(x, linear(o, param(pre+"attn_output.weight")))

		h = rmsnorm(x, param(pre+"ffn_norm.weight"))
		a := linear(h, param(pre+"ffn_gate.weight"))
		u := linear(h, param(pre+"ffn_up.weight"))
		x = add(x, linear(had(had(a, G.Must(G.Sigmoid(a))), u), param(pre+"ffn_down.weight")))
	}

	out := "output.weight"
	if s.Tied {
		out = "token_embd.weight"
	}
	logits := linear(rmsnorm(x, param("output_norm.weight")), param(out)) // N x V

	count := 0
	for _, t := range b.Targets {
		if t >= 0 {
			if int(t) >= V {
				return nil, fmt.Errorf("oracle graph: target %d out of vocabulary %d", t, V)
			}
			count++
		}
	}
	if count == 0 {
		return nil, fmt.Errorf("oracle graph: no targets")
	}
	wt := 1 / float64(count)
	wcol := constant(N, 1, func(r, _ int) float64 {
		if b.Targets[r] >= 0 {
			return wt
		}
		return 0
	})
	y := constant(N, V, func(r, c int) float64 {
		if int(b.Targets[r]) == c {
			return wt
		}
		return 0
	})
	lse := G.Must(G.Log(mul(G.Must(G.Exp(logits)), ones(V, 1)))) // N x 1
	og.loss = G.Must(G.Sub(G.Must(G.Sum(had(wcol, lse))), G.Must(G.Sum(had(y, logits)))))
	return og, nil
}

// oracleForward is the graph compiled once for the forward pass alone,
// for finite differences: one parameter at a time is replaced and the loss
// recomputed.
type oracleForward struct {
	og *oracleGraph
	m  G.VM
	ps []*oracleParam
}

func newOracleForward(s synth.Shape, ps []*oracleParam, b *train.Batch) (*oracleForward, error) {
	og, err := buildOracleGraph(s, ps, b)
	if err != nil {
		return nil, err
	}
	return &oracleForward{og: og, m: G.NewTapeMachine(og.g), ps: ps}, nil
}

func (f *oracleForward) Close() { f.m.Close() }

// loss returns the loss with parameter i's values replaced by w (nil:
// unchanged); parameter i keeps its values of ps afterwards.
func (f *oracleForward) loss(i int, w []float64) (float64, error) {
	let := func(w []float64) error {
		p := f.ps[i]
		return G.Let(f.og.params[i], tensor.New(tensor.WithShape(p.Rows, p.Cols), tensor.WithBacking(append([]float64(nil), w...))))
	}
	if w != nil {
		if err := let(w); err != nil {
			return 0, fmt.Errorf("oracle forward: %w", err)
		}
		defer let(f.ps[i].W)
	}
	f.m.Reset()
	if err := f.m.RunAll(); err != nil {
		return 0, fmt.Errorf("oracle forward: %w", err)
	}
	return oracleScalar(f.og.loss.Value())
}

// oracleLossGrad returns the loss and gorgonia's gradient of it with
// respect to every parameter (row-major, in the order of ps).
func oracleLossGrad(s synth.Shape, ps []*oracleParam, b *train.Batch) (float64, [][]float64, error) {
	og, err := buildOracleGraph(s, ps, b)
	if err != nil {
		return 0, nil, err
	}
	if _, err := G.Grad(og.loss, og.params...); err != nil {
		return 0, nil, fmt.Errorf("oracle grad: %w", err)
	}
	m := G.NewTapeMachine(og.g, G.BindDualValues(og.params...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return 0, nil, fmt.Errorf("oracle forward/backward: %w", err)
	}
	loss, err := oracleScalar(og.loss.Value())
	if err != nil {
		return 0, nil, err
	}
	grads := make([][]float64, len(ps))
	for i, n := range og.params {
		gv, err := n.Grad()
		if err != nil {
			return 0, nil, fmt.Errorf("oracle grad of %s: %w", ps[i].Name, err)
		}
		d, ok := gv.Data().([]float64)
		if !ok || len(d) != ps[i].Rows*ps[i].Cols {
			return 0, nil, fmt.Errorf("oracle grad of %s: got %T of %d values", ps[i].Name, gv.Data(), len(d))
		}
		grads[i] = append([]float64(nil), d...)
	}
	return loss, grads, nil
}

func oracleScalar(v G.Value) (float64, error) {
	if v == nil {
		return 0, fmt.Errorf("oracle: loss has no value")
	}
	f, ok := v.Data().(float64)
	if !ok {
		return 0, fmt.Errorf("oracle: loss is %T, not float64", v.Data())
	}
	return f, nil
}
