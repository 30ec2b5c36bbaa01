package model_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
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

// loadStories loads stories260K: the shared llama2.c checkpoint, or the
// bundled GGUF when ../shared is absent.
func loadStories(t *testing.T) *model.Model {
	t.Helper()
	path, tok := modeltest.Stories260K(t)
	return load(t, path, tok)
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
	r := cpu.NewRunner(m, cpu.NewCache(kv))
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
// time. The prompt is 40 tokens of the model's own greedy story (the
// oracle's sequence, which TestStories260KMatchesRunC checks).
func TestPrefillBatchMatchesSequential(t *testing.T) {
	m := loadStories(t)
	story, _ := greedy(t, m, m.Tokenizer.Encode("Once upon a time", true), 40)
	toks := story[:40]
	_, seqLogits := greedy(t, m, toks, len(toks))

	kv, err := m.NewCache(64, 16, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
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

// The bundled GGUF (bench/models) is the shared llama2.c checkpoint in
// another format: the same configuration, vocabulary and special tokens,
// the same tokens for a prompt, and the same logits bit for bit, so tests
// may fall back to it when ../shared is absent.
func TestBundledGGUFMatchesCheckpoint(t *testing.T) {
	bin := load(t, modeltest.Path(t, modeltest.Stories260KBin), modeltest.Path(t, modeltest.Tok512))
	gg := load(t, modeltest.BundledStories260K(), "")
	a, b := bin.Config, gg.Config
	// The GGUF declares llama.cpp's context of 2048 and stores the
	// classifier as a tensor of its own.
	b.ContextLen, b.Tied = a.ContextLen, a.Tied
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("config\n checkpoint %+v\n GGUF       %+v", bin.Config, gg.Config)
	}
	if gg.Config.ContextLen < bin.Config.ContextLen {
		t.Errorf("GGUF context %d, checkpoint %d", gg.Config.ContextLen, bin.Config.ContextLen)
	}
	ta, tb := bin.Tokenizer, gg.Tokenizer
	if ta.VocabSize() != tb.VocabSize() || ta.BOS() != tb.BOS() || ta.EOS() != tb.EOS() {
		t.Fatalf("tokenizers: vocab %d/%d, BOS %d/%d, EOS %d/%d", ta.VocabSize(), tb.VocabSize(), ta.BOS(), tb.BOS(), ta.EOS(), tb.EOS())
	}
	if ta.AddBOS() != tb.AddBOS() || ta.AddSpacePrefix() != tb.AddSpacePrefix() {
		t.Fatalf("tokenizers: AddBOS %v/%v, AddSpacePrefix %v/%v", ta.AddBOS(), tb.AddBOS(), ta.AddSpacePrefix(), tb.AddSpacePrefix())
	}
	for i := range ta.VocabSize() {
		if ta.Piece(i) != tb.Piece(i) || ta.IsControl(i) != tb.IsControl(i) {
			t.Fatalf("token %d: %q (control %v) in tok512.bin, %q (control %v) in the GGUF", i, ta.Piece(i), ta.IsControl(i), tb.Piece(i), tb.IsControl(i))
		}
	}
	for _, text := range []string{"Once upon a time", "Lily wanted to", " a  b\n\tc", "Héllo, wörld! 17*23=391 ✓", "<s></s>"} {
		if x, y := ta.Encode(text, true), tb.Encode(text, true); !equal(x, y) {
			t.Errorf("%q: tokens %v from tok512.bin, %v from the GGUF", text, x, y)
		}
	}
	prompt := ta.Encode("Once upon a time", true)
	toksA, logitsA := greedy(t, bin, prompt, 200)
	toksB, logitsB := greedy(t, gg, prompt, 200)
	if !equal(toksA, toksB) {
		t.Fatalf("greedy tokens differ:\n checkpoint %v\n GGUF       %v", toksA, toksB)
	}
	for p := range logitsA {
		if d := maxDiff(logitsA[p], logitsB[p]); d != 0 {
			t.Fatalf("position %d: logits differ by %g", p, d)
		}
	}
}
