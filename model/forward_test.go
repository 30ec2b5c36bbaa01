package model_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

type greedyOracle struct {
	Prompt         string `json:"prompt"`
	Steps          int    `json:"steps"`
	PromptTokens   []int  `json:"prompt_tokens"`
	SequenceTokens []int  `json:"sequence_tokens"`
	StdoutText     string `json:"stdout_text"`
}

func loadOracle(t *testing.T) greedyOracle {
	t.Helper()
	b, err := os.ReadFile(modeltest.Path(t, modeltest.GreedyOracle))
	if err != nil {
		t.Fatal(err)
	}
	var o greedyOracle
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func load(t *testing.T, path, tok string) *model.Model {
	t.Helper()
	m, err := model.Load(path, tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// greedy runs run.c's loop: feed the prompt one token at a time, then the
// argmax, for steps positions; it returns the tokens and every position's
// logits.
func greedy(t *testing.T, m *model.Model, prompt []int, steps int) ([]int, [][]float32) {
	t.Helper()
	kv, err := m.NewCache(steps+1, 16, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := m.NewRunner(kv)
	seq := kv.NewSeq()
	defer kv.Free(seq)
	toks := append([]int(nil), prompt[0])
	var logits [][]float32
	for pos := 0; pos < steps; pos++ {
		out, err := r.Forward([]model.Row{{Seq: seq, Token: toks[pos]}})
		if err != nil {
			t.Fatal(err)
		}
		l := out.Logits(0)
		logits = append(logits, append([]float32(nil), l...))
		if pos+1 < len(prompt) {
			toks = append(toks, prompt[pos+1])
		} else {
			toks = append(toks, argmax(l))
		}
	}
	return toks, logits
}

func TestStories260KMatchesRunC(t *testing.T) {
	o := loadOracle(t)
	want := modeltest.OracleLogits(t)
	m := load(t, modeltest.Path(t, modeltest.Stories260KBin), modeltest.Path(t, modeltest.Tok512))

	prompt := m.Tokenizer.Encode(o.Prompt, true)
	if !equal(prompt, o.PromptTokens) {
		t.Fatalf("prompt tokens %v, want %v", prompt, o.PromptTokens)
	}
	toks, logits := greedy(t, m, prompt, o.Steps)
	if !equal(toks, o.SequenceTokens) {
		t.Errorf("greedy tokens\n got %v\nwant %v", toks, o.SequenceTokens)
	}
	if len(want) != len(logits) {
		t.Fatalf("oracle has %d positions, we ran %d", len(want), len(logits))
	}
	worst := 0.0
	for p := range want {
		for i := range want[p] {
			worst = max(worst, math.Abs(float64(want[p][i]-logits[p][i])))
		}
	}
	if worst > 1e-4 {
		t.Errorf("logits differ from run.c by up to %g (want <= 1e-4)", worst)
	}
	t.Logf("max |logit - run.c| over 64 positions x 512: %.2g", worst)
	if got := m.Tokenizer.Decode(toks) + "\n"; got != o.StdoutText {
		t.Errorf("text\n got %q\nwant %q", got, o.StdoutText)
	}
}

func TestStories260KGGUFGreedy(t *testing.T) {
	o := loadOracle(t)
	m := load(t, modeltest.Path(t, modeltest.Stories260KGGUF), "")
	prompt := m.Tokenizer.Encode(o.Prompt, true)
	if !equal(prompt, o.PromptTokens) {
		t.Fatalf("prompt tokens from the GGUF tokenizer %v, want %v", prompt, o.PromptTokens)
	}
	toks, _ := greedy(t, m, prompt, o.Steps)
	if !equal(toks, o.SequenceTokens) {
		t.Errorf("greedy tokens\n got %v\nwant %v", toks, o.SequenceTokens)
	}
}

// A prompt run as one causal batch gives the same logits as one token at a
// time.
func TestPrefillBatchMatchesSequential(t *testing.T) {
	o := loadOracle(t)
	m := load(t, modeltest.Path(t, modeltest.Stories260KBin), modeltest.Path(t, modeltest.Tok512))
	toks := o.SequenceTokens[:40]
	_, seqLogits := greedy(t, m, toks, len(toks))

	kv, err := m.NewCache(64, 16, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := m.NewRunner(kv)
	seq := kv.NewSeq()
	rows := make([]model.Row, len(toks))
	for i, tok := range toks {
		rows[i] = model.Row{Seq: seq, Token: tok}
	}
	out, err := r.Forward(rows, m.Config.Layers-1)
	if err != nil {
		t.Fatal(err)
	}
	for p := range toks {
		if d := maxDiff(out.Logits(p), seqLogits[p]); d > 1e-5 {
			t.Fatalf("position %d: batched prefill differs by %g", p, d)
		}
		a := out.Attention(p, 0)
		if a.Heads != m.Config.Heads || a.Len != p+1 {
			t.Fatalf("position %d: attention %dx%d", p, a.Heads, a.Len)
		}
		for h := 0; h < a.Heads; h++ {
			var sum float64
			for _, v := range a.Probs[h*a.Len : (h+1)*a.Len] {
				sum += float64(v)
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("position %d head %d: probabilities sum to %v", p, h, sum)
			}
		}
	}
	kv.Free(seq)
	if s := kv.Stats(); s.BlocksInUse != 0 {
		t.Fatalf("%d blocks still in use after Free", s.BlocksInUse)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
