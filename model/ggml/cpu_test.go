package ggml_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// treeSteps runs the same small tree on a backend: a prompt of 13 tokens
// prefilled (the last row's logits kept), four branches forked from it
// advancing together for 6 steps (the first appends copy the shared
// partial block), two of them truncated back by 3 and advancing again,
// the attention of layers attn asked at every step. It returns each
// step's logits and attention rows.
func treeSteps(t *testing.T, b model.Backend, vocab int, attn []int) (logits [][]float32, att []model.Attention) {
	t.Helper()
	treeWalk(t, b, vocab, attn, func(out *model.Output, rows []model.Row) {
		for i, r := range rows {
			if r.NoLogits {
				continue
			}
			logits = append(logits, append([]float32(nil), out.Logits(i)...))
			for j := range attn {
				a := out.Attention(i, j)
				a.Scores, a.Probs = append([]float32(nil), a.Scores...), append([]float32(nil), a.Probs...)
				att = append(att, a)
			}
		}
	})
	return logits, att
}

// treeWalk runs treeSteps' steps on b, handing each step's output to keep.
func treeWalk(t *testing.T, b model.Backend, vocab int, attn []int, keep func(out *model.Output, rows []model.Row)) {
	t.Helper()
	p := b.Cache()
	root := p.NewSeq()
	var rows []model.Row
	for i := range 13 {
		rows = append(rows, model.Row{Seq: root, Token: (5*i + 1) % vocab, NoLogits: i < 12})
	}
	out, err := b.Forward(rows, attn...)
	if err != nil {
		t.Fatal(err)
	}
	keep(out, rows)
	seqs := []*kvcache.Seq{root, p.Fork(root), p.Fork(root), p.Fork(root)}
	advance := func(seqs []*kvcache.Seq, step int) {
		rows := rows[:0]
		for i, s := range seqs {
			rows = append(rows, model.Row{Seq: s, Token: (7*step + 11*i + 3) % vocab})
		}
		out, err := b.Forward(rows, attn...)
		if err != nil {
			t.Fatal(err)
		}
		keep(out, rows)
	}
	for step := range 6 {
		advance(seqs, step)
	}
	for _, s := range seqs[1:3] {
		if err := p.Truncate(s, s.Len()-3); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 3 {
		advance(seqs, 100+step)
	}
	for _, s := range seqs {
		p.Free(s)
	}
	if st := p.Stats(); st.BlocksInUse != 0 {
		t.Fatalf("%d blocks in use after freeing every sequence", st.BlocksInUse)
	}
}

// TestMatchesCPU runs the same tree on the ggml backend and the CPU
// backend and compares their logits and attention: float models within
// float rounding, a Q8_0 model within the noise of activation
// quantization. Both quantize each 32 activations to int8 with scale
// max/127, ggml rounding the scale to f16 where the CPU backend keeps it
// in f32: one product differs by some 3% of its quantization error, but
// a rounding that goes the other way at one layer moves the next layer's
// inputs across other rounding boundaries, and after a few layers the two
// differ by about as much as each differs from the float product (on
// arith's weights quantized to Q8_0: 0.0057 of the logit spread between
// them, 0.0103 and 0.0080 from the F32 model).
func TestMatchesCPU(t *testing.T) {
	options(t)
	stories := func(t *testing.T) *model.Model {
		m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "stories260K.gguf"), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	gen := func(sh synth.Shape, dt kernels.DType) func(t *testing.T) *model.Model {
		return func(t *testing.T) *model.Model {
			m, err := synth.Generate(sh, dt, 5)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, c := range []struct {
		name string
		m    func(t *testing.T) *model.Model
		dt   kvcache.ElemType
		// Tolerances: logits (of the spread), attention probabilities
		// (absolute) and scores (relative). With an F16 cache ggml's
		// products round the queries and the probabilities to f16 too
		// (the CPU backend widens the keys and values instead).
		tol, ptol, stol float64
	}{
		{"stories260K/kv-f32", stories, kvcache.F32, 1e-4, 1e-5, 1e-5},
		{"stories260K/kv-f16", stories, kvcache.F16, 2e-3, 5e-3, 0.03},
		{"synth-Q8_0/kv-f32", gen(small, kernels.Q8_0), kvcache.F32, 0.02, 2e-3, 0.02},
		{"synth-Q8_0/kv-f16", gen(small, kernels.Q8_0), kvcache.F16, 0.02, 5e-3, 0.02},
		{"synth-Q4_K_M/kv-f32", gen(small, kernels.Q4_K), kvcache.F32, 0.03, 5e-3, 0.03},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.m(t)
			attn := []int{0, m.Config.Layers - 1}
			cfg := model.CacheConfig{Tokens: 256, BlockSize: 4, DType: c.dt}
			cb, err := model.NewBackend("cpu", m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			want, wantAtt := treeSteps(t, cb, m.Config.Vocab, attn)
			for _, way := range attentionWays {
				gb := newBackend(t, m, 256, 4, c.dt)
				ggml.SetAttention(gb, way)
				got, gotAtt := treeSteps(t, gb, m.Config.Vocab, attn)
				worst, pworst, sworst := 0.0, 0.0, 0.0
				for i := range want {
					d := spreadDiff(got[i], want[i])
					if !(d <= c.tol) {
						t.Fatalf("logits row %d: %.3g of the spread from the CPU backend's (tolerance %g)", i, d, c.tol)
					}
					worst = max(worst, d)
				}
				for i, w := range wantAtt {
					g := gotAtt[i]
					if g.Heads != w.Heads || g.Len != w.Len {
						t.Fatalf("attention %d: %d heads x %d positions, want %d x %d", i, g.Heads, g.Len, w.Heads, w.Len)
					}
					for j := range w.Probs {
						dp := math.Abs(float64(g.Probs[j] - w.Probs[j]))
						ds := math.Abs(float64(g.Scores[j]-w.Scores[j])) / max(1, math.Abs(float64(w.Scores[j])))
						if !(dp <= c.ptol) || !(ds <= c.stol) {
							t.Fatalf("attention %d [%d]: score %g prob %g, the CPU's %g %g", i, j, g.Scores[j], g.Probs[j], w.Scores[j], w.Probs[j])
						}
						pworst, sworst = max(pworst, dp), max(sworst, ds)
					}
				}
				t.Logf("attention %s: %d logits rows: largest difference %.2g of the spread; %d attention rows: probabilities within %.2g, scores %.2g",
					way, len(want), worst, len(wantAtt), pworst, sworst)
			}
		})
	}
}

// TestManySearches runs 70 independent sequences (more than the attention
// groups a graph holds, so that neighbouring groups attend together) and
// a forked pair, their rows interleaved across sequences (so that the
// graph reorders them), on the ggml backend and the CPU backend: the
// logits and the attention agree as in TestMatchesCPU.
func TestManySearches(t *testing.T) {
	options(t)
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "stories260K.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	attn := []int{1}
	run := func(b model.Backend) (logits [][]float32, att []model.Attention) {
		p := b.Cache()
		var seqs []*kvcache.Seq
		for range 70 {
			seqs = append(seqs, p.NewSeq())
		}
		for step := range 4 {
			var rows []model.Row
			per := 1
			if step == 0 {
				per = 3 // a prefill of 3 tokens each, interleaved
			}
			for j := range per {
				for i, s := range seqs {
					rows = append(rows, model.Row{Seq: s, Token: (i*31 + step*7 + j*3 + 1) % m.Config.Vocab, NoLogits: (i+step)%3 == 0 || j < per-1})
				}
			}
			out, err := b.Forward(rows, attn...)
			if err != nil {
				t.Fatal(err)
			}
			logits, att = keepOutputs(out, rows, len(attn), logits, att)
			if step == 1 {
				seqs = append(seqs, p.Fork(seqs[5]))
			}
		}
		for _, s := range seqs {
			p.Free(s)
		}
		return logits, att
	}
	cb, err := model.NewBackend("cpu", m, model.CacheConfig{Tokens: 2048, BlockSize: 2, DType: kvcache.F32})
	if err != nil {
		t.Fatal(err)
	}
	want, wantAtt := run(cb)
	for _, way := range attentionWays {
		gb := newBackend(t, m, 2048, 2, kvcache.F32)
		ggml.SetAttention(gb, way)
		got, gotAtt := run(gb)
		worst, pworst := 0.0, 0.0
		for i := range want {
			worst = max(worst, spreadDiff(got[i], want[i]))
		}
		for i, w := range wantAtt {
			if gotAtt[i].Len != w.Len || gotAtt[i].Heads != w.Heads {
				t.Fatalf("attention %d: %d x %d, want %d x %d", i, gotAtt[i].Heads, gotAtt[i].Len, w.Heads, w.Len)
			}
			for j := range w.Probs {
				pworst = max(pworst, math.Abs(float64(gotAtt[i].Probs[j]-w.Probs[j])))
			}
		}
		if !(worst <= 1e-4) || !(pworst <= 1e-5) {
			t.Fatalf("attention %s: logits %.3g of the spread from the CPU backend's, attention probabilities %.3g", way, worst, pworst)
		}
		t.Logf("attention %s: %d logits rows within %.2g of the spread, attention probabilities within %.2g", way, len(want), worst, pworst)
	}
}
