package train

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/synth"
)

// tinyShape is a model small enough for exhaustive checks, with
// grouped-query attention (4 heads, 2 kv heads).
func tinyShape(tied bool) synth.Shape {
	return synth.Shape{Name: "tiny", Dim: 16, HiddenDim: 24, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 259 + 8, ContextLen: 32, RopeTheta: 10000, NormEps: 1e-5, Tied: tied}
}

// perturb moves every parameter off its initial value (norms off one),
// so that no gradient is trivially symmetric.
func perturb(m *Model, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for _, t := range m.Tensors() {
		for i := range t.W {
			if t.Vec {
				t.W[i] = 1 + 0.3*float32(r.NormFloat64())
			} else {
				t.W[i] += 0.05 * float32(r.NormFloat64())
			}
		}
	}
}

// TestLogitsMatchInference checks that the trainer's forward pass gives
// the logits that package model's inference forward pass gives on the
// exported GGUF file, position by position.
func TestLogitsMatchInference(t *testing.T) {
	for _, tied := range []bool{true, false} {
		s := tinyShape(tied)
		m, err := New(s, 3)
		if err != nil {
			t.Fatal(err)
		}
		perturb(m, 4)
		vocab, err := synth.SyntheticVocab(s.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := synth.WriteTensorsGGUF(&buf, s, "tiny", vocab, m.Values()); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		inf, err := model.Load(path, "")
		if err != nil {
			t.Fatal(err)
		}
		toks := []int32{1, 40, 41, 200, 7, 260, 266, 3, 99, 100, 101, 5, 1, 2}
		got, err := m.Logits(toks)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := inf.NewCache(len(toks), 4, kvcache.F32)
		if err != nil {
			t.Fatal(err)
		}
		run := cpu.NewRunner(inf, cpu.NewCache(kv))
		seq := kv.NewSeq()
		worst := 0.0
		for i, tok := range toks {
			out, err := run.Forward([]model.Row{{Seq: seq, Token: int(tok)}})
			if err != nil {
				t.Fatal(err)
			}
			want := out.Logits(0)
			for j := range want {
				worst = max(worst, math.Abs(float64(got[i][j]-want[j])))
			}
		}
		inf.Close()
		t.Logf("tied %v: largest logit difference %.2g", tied, worst)
		if worst > 1e-4 {
			t.Errorf("tied %v: trainer and inference logits differ by %g", tied, worst)
		}
	}
}

// batch returns a random batch of b rows of n tokens, the first few of
// each row without a target; with packed set, each row holds two
// sequences.
func randBatch(r *rand.Rand, vocab, b, n int, packed bool) *Batch {
	bt := &Batch{B: b, T: n, Tokens: make([]int32, b*n), Targets: make([]int32, b*n)}
	if packed {
		bt.Pos = make([]int32, b*n)
	}
	for i := range bt.Tokens {
		bt.Tokens[i] = int32(r.IntN(vocab))
		bt.Targets[i] = int32(r.IntN(vocab))
		if i%n < 2 || i%n == n-1 {
			bt.Targets[i] = -1
		}
		if packed {
			p := i % n
			if p >= n/2 {
				p -= n / 2
			}
			bt.Pos[i] = int32(p)
		}
	}
	return bt
}

// TestGradientFiniteDifferences checks a few gradient elements of every
// tensor against central differences of the loss (in float32, so the
// bound is loose; the gorgonia oracle is the tight check).
func TestGradientFiniteDifferences(t *testing.T) {
	for _, packed := range []bool{false, true} {
		s := tinyShape(false)
		m, err := New(s, 5)
		if err != nil {
			t.Fatal(err)
		}
		perturb(m, 6)
		r := rand.New(rand.NewPCG(8, 9))
		b := randBatch(r, s.Vocab, 2, 10, packed)
		if _, err := m.ForwardBackward(b); err != nil {
			t.Fatal(err)
		}
		grads := map[string][]float32{}
		for _, tn := range m.Tensors() {
			grads[tn.Name] = append([]float32(nil), tn.G...)
		}
		for _, tn := range m.Tensors() {
			for k := 0; k < 3; k++ {
				// the largest-gradient element, and two random ones
				i := r.IntN(len(tn.W))
				if k == 0 {
					for j, g := range grads[tn.Name] {
						if math.Abs(float64(g)) > math.Abs(float64(grads[tn.Name][i])) {
							i = j
						}
					}
				}
				const h = 1e-2
				w0 := tn.W[i]
				tn.W[i] = w0 + h
				lp, _ := m.ForwardBackward(b)
				tn.W[i] = w0 - h
				lm, _ := m.ForwardBackward(b)
				tn.W[i] = w0
				num := (lp - lm) / (2 * h)
				got := float64(grads[tn.Name][i])
				if math.Abs(num-got) > 2e-3+0.05*math.Abs(num) {
					t.Errorf("packed %v: %s[%d]: gradient %g, finite differences %g", packed, tn.Name, i, got, num)
				}
			}
		}
	}
}
