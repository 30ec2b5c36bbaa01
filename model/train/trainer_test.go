package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// examples returns n random sequences of 6..20 tokens with prompts of 3.
func examples(r *rand.Rand, vocab, n int) []Example {
	ex := make([]Example, n)
	for i := range ex {
		ex[i] = Example{Tokens: make([]int32, 6+r.IntN(15)), PromptLen: 3}
		for j := range ex[i].Tokens {
			ex[i].Tokens[j] = int32(r.IntN(vocab))
		}
	}
	return ex
}

func newTrainer(t *testing.T, steps int, ckpt string) *Trainer {
	t.Helper()
	s := tinyShape(true)
	m, err := New(s, 11)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoader(examples(rand.New(rand.NewPCG(1, 1)), s.Vocab, 40), 6, 32, 5)
	if err != nil {
		t.Fatal(err)
	}
	run := Run{Steps: steps, Warmup: 2, LR: 1e-2, MinLR: 1e-3, WeightDecay: 0.1, Clip: 1, Seed: 5, PerStep: 6, RowLen: 32}
	return &Trainer{Model: m, Opt: NewAdamW(m.Tensors(), run.WeightDecay), Data: l, Run: run, Checkpoint: ckpt}
}

func sameWeights(t *testing.T, a, b *Model) {
	t.Helper()
	for i, ta := range a.Tensors() {
		tb := b.Tensors()[i]
		for j := range ta.W {
			if ta.W[j] != tb.W[j] {
				t.Fatalf("%s[%d]: %g and %g", ta.Name, j, ta.W[j], tb.W[j])
			}
		}
	}
}

// TestTrainLossFalls checks that a few steps on a fixed batch learn it.
func TestTrainLossFalls(t *testing.T) {
	tr := newTrainer(t, 30, "")
	var first, last float64
	tr.OnStep = func(st StepStats) {
		if st.Step == 1 {
			first = st.Loss
		}
		last = st.Loss
	}
	if err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !(last < first-0.5) {
		t.Errorf("loss went from %.3f to %.3f in 30 steps", first, last)
	}
}

// TestResumeIsExact interrupts a run, resumes it from its checkpoint and
// checks that it ends with exactly the weights of an uninterrupted run.
func TestResumeIsExact(t *testing.T) {
	dir := t.TempDir()
	whole := newTrainer(t, 8, "")
	if err := whole.Train(context.Background()); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "run.ckpt")
	part := newTrainer(t, 8, path)
	ctx, cancel := context.WithCancel(context.Background())
	part.OnStep = func(st StepStats) {
		if st.Step == 3 {
			cancel()
		}
	}
	if err := part.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	m, o, h, err := LoadCheckpoint(path, part.Run.WeightDecay)
	if err != nil {
		t.Fatal(err)
	}
	if h.Step != 3 {
		t.Fatalf("checkpoint at step %d, want 3", h.Step)
	}
	rest := newTrainer(t, 8, path)
	rest.Model, rest.Opt, rest.Step = m, o, h.Step
	if err := rest.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameWeights(t, whole.Model, rest.Model)
}

// TestNaNStops poisons a weight and checks that training stops with
// ErrNaN, keeping the last good checkpoint as it was.
func TestNaNStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	tr := newTrainer(t, 10, path)
	tr.OnStep = func(st StepStats) {
		if st.Step == 2 {
			if err := SaveCheckpoint(path, tr.Model, tr.Opt, 2, tr.Run); err != nil {
				t.Fatal(err)
			}
			tr.Model.Tensors()[3].W[0] = float32(math.NaN())
		}
	}
	err := tr.Train(context.Background())
	if !errors.Is(err, ErrNaN) || !strings.Contains(err.Error(), "step 3") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want ErrNaN at step 3 naming the checkpoint", err)
	}
	if _, _, h, err := LoadCheckpoint(path, 0.1); err != nil || h.Step != 2 {
		t.Fatalf("the last good checkpoint: %v, %+v", err, h)
	}
}

// TestCheckpointCorrupt checks that damaged checkpoints are refused with
// a clear error and never half-loaded.
func TestCheckpointCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ok.ckpt")
	tr := newTrainer(t, 1, "")
	if err := SaveCheckpoint(path, tr.Model, tr.Opt, 1, tr.Run); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	m, _, _, err := LoadCheckpoint(path, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, tr.Model, m)
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("NOTACKPT"), good[8:]...),
		"truncated": good[:len(good)-100],
		"longer":    append(append([]byte(nil), good...), 0),
		"flipped":   func() []byte { b := append([]byte(nil), good...); b[len(b)-50] ^= 1; return b }(),
		"header": func() []byte {
			b := append([]byte(nil), good...)
			b[8], b[9], b[10], b[11] = 0xff, 0xff, 0xff, 0x7f
			return b
		}(),
	}
	for name, b := range cases {
		p := filepath.Join(dir, name+".ckpt")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := LoadCheckpoint(p, 0.1); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want an error naming the file", name, err)
		}
	}
	if _, _, _, err := LoadCheckpoint(dir, 0.1); err == nil {
		t.Error("a directory loaded as a checkpoint")
	}
}

// TestLoaderDeterministic checks that a batch depends only on the step,
// that packed rows keep every example whole, and the targets.
func TestLoaderDeterministic(t *testing.T) {
	ex := examples(rand.New(rand.NewPCG(2, 2)), 300, 50)
	a, _ := NewLoader(ex, 7, 40, 3)
	b, _ := NewLoader(ex, 7, 40, 3)
	b.Batch(20) // moves b to another epoch first
	for _, s := range []int{0, 9, 3} {
		x, y := a.Batch(s), b.Batch(s)
		if x.B != y.B || x.T != y.T || !slices.Equal(x.Tokens, y.Tokens) || !slices.Equal(x.Targets, y.Targets) {
			t.Fatalf("step %d: batches differ", s)
		}
		if err := x.check(300, 40); err != nil {
			t.Fatal(err)
		}
		targets := 0
		for _, v := range x.Targets {
			if v >= 0 {
				targets++
			}
		}
		want := 0
		for k := s * 7; k < (s+1)*7; k++ {
			e := a.example(k)
			want += len(e.Tokens) - e.PromptLen
		}
		if targets != want {
			t.Fatalf("step %d: %d targets, want %d", s, targets, want)
		}
	}
	if _, err := NewLoader([]Example{{Tokens: make([]int32, 50), PromptLen: 2}}, 1, 40, 1); err == nil {
		t.Error("an example longer than a row was accepted")
	}
}
