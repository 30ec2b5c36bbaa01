package engine

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/tree"
)

// testVerifier is the arith task model read as a verifier (its verdict
// tokens "Y" and "N"): untrained for it, but of the right vocabulary, so
// that the mechanics can be checked.
func testVerifier(t *testing.T, m *model.Model) *Verifier {
	t.Helper()
	v, err := NewVerifier(m, "Y", "N")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVerifierFormatCheck refuses, with one clear error, a verifier of
// another vocabulary and a file that is not a verifier.
func TestVerifierFormatCheck(t *testing.T) {
	m := loadArith(t)
	stories, err := model.Load(modeltest.BundledStories260K(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer stories.Close()
	v, err := NewVerifier(stories, "Y", "N")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(m, WithVerifier(v))
	if !errors.Is(err, ErrVerifierMismatch) || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("a stories260K verifier for the arith model: %v", err)
	}
	if _, err := NewVerifier(m, "Y", "no such token"); !errors.Is(err, ErrVerifierMismatch) {
		t.Errorf("a verdict token outside the vocabulary: %v", err)
	}
	if _, err := LoadVerifier(modeltest.RepoRoot() + "/bench/models/arith.gguf"); !errors.Is(err, ErrVerifierMismatch) || !strings.Contains(err.Error(), "not a verifier") {
		t.Errorf("the task model loaded as a verifier: %v", err)
	}
	e, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SearchWith(context.Background(), "Question: x\nAnswer:", Budget{MaxTokens: 4}, WithVerifier(testVerifier(t, m))); err == nil {
		t.Error("a search's own verifier on an engine without one: no error")
	}
}

// TestVerifyPrefixSharing checks that judging paths that share prefixes
// through forked, cut-back caches gives the verdicts of judging each path
// alone, for the rows verifyCost predicts.
func TestVerifyPrefixSharing(t *testing.T) {
	m := loadArith(t)
	v := testVerifier(t, m)
	prompt := m.Tokenizer.Encode(arithPrompt, true)
	enc := func(s string) []int { return m.Tokenizer.EncodeContinuation(s) }
	paths := [][]int{
		enc(" Ben has 2 * 31 = 62 cards.\nBen has 2 * 62 = 124 cards.\n#### 124"),
		enc(" Ben has 2 * 31 = 62 cards.\nBen has 2 * 62 = 134 cards.\n#### 134"),
		enc(" Ben has 2 * 31 = 62 cards.\nBen has 2 * 62 = 124 cards.\n#### 124"), // a duplicate
		enc(" Ben has 2 * 31 = 72 cards.\n#### 72"),
		enc(" Ben has"),
	}
	r, err := newVerifierRun(v, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := r.verify(prompt, paths, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := verifyCost(paths); st.rows != want || st.promptRows != len(prompt) {
		t.Errorf("%d rows after a prompt of %d, want %d after %d", st.rows, st.promptRows, want, len(prompt))
	}
	alone := 0
	for i, p := range paths {
		one, st1, err := r.verify(prompt, [][]int{p}, 0)
		if err != nil {
			t.Fatal(err)
		}
		alone += st1.rows
		if math.Abs(one[0]-got[i]) > 1e-5 || !(got[i] > 0 && got[i] < 1) {
			t.Errorf("path %d: %v shared, %v alone", i, got[i], one[0])
		}
	}
	if st.rows >= alone {
		t.Errorf("shared prefixes cost %d rows, alone %d", st.rows, alone)
	}
	// A row limit judges what it can pay for and leaves the rest NaN.
	lim, st2, err := r.verify(prompt, paths, 40)
	if err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, p := range lim {
		if !math.IsNaN(p) {
			judged++
		}
	}
	if st2.rows > 40 || judged == 0 || judged == len(paths) {
		t.Errorf("a limit of 40 rows: %d rows, %d of %d judged", st2.rows, judged, len(paths))
	}
	if r.kv.Stats().BlocksInUse != 0 {
		t.Errorf("%d KV blocks left in use", r.kv.Stats().BlocksInUse)
	}
}

// TestVerifierFeatures checks the log-probabilities a verifier reads of
// paths sharing prefixes against the model's reference forward pass of
// each whole input, and that a head turns them into the probability.
func TestVerifierFeatures(t *testing.T) {
	m := loadArith(t)
	v := testVerifier(t, m)
	prompt := m.Tokenizer.Encode(arithPrompt, true)
	enc := func(s string) []int { return m.Tokenizer.EncodeContinuation(s) }
	paths := [][]int{
		enc(" Ben has 2 * 31 = 62 cards.\n#### 62"),
		enc(" Ben has 2 * 31 = 72 cards.\n#### 72"),
		enc(" Ben has 2 * 31 = 62 cards.\n#### 62"),
		enc(" Ben"),
	}
	fs, err := v.Features(prompt, paths)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		in := v.Input(prompt, p)
		ref, err := m.Reference(in)
		if err != nil {
			t.Fatal(err)
		}
		sum, least := 0.0, math.Inf(1)
		for j := len(prompt); j < len(in); j++ {
			lp := float64(logSoftmax(nil, ref[j-1])[in[j]])
			sum, least = sum+lp, min(least, lp)
		}
		last := ref[len(in)-1]
		verdict := float64(last[v.yes] - last[v.no])
		if f := fs[i]; math.Abs(f.SumLogProb-sum) > 1e-3 || math.Abs(f.MinLogProb-least) > 1e-3 || math.Abs(f.Verdict-verdict) > 1e-3 {
			t.Errorf("path %d: %+v, the reference %v %v %v", i, f, verdict, least, sum)
		}
	}
	h := VerifierHead{Verdict: 0.5, MinLogProb: 0.25, SumLogProb: 0.125, Bias: -1}
	r, err := newVerifierRun(v.WithHead(&h), "cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer r.run.Close()
	probs, _, err := r.verify(prompt, paths, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if want := h.Prob(f); math.Abs(probs[i]-want) > 1e-6 {
			t.Errorf("path %d: p %v with the head, want %v", i, probs[i], want)
		}
	}
}

// TestVerifierHeadMetadata: a head written with the verifier's metadata
// loads back; a head of the wrong length is one clear error.
func TestVerifierHeadMetadata(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := VerifierHead{Verdict: -4, MinLogProb: 0.25, SumLogProb: 0.125, Bias: 2}
	var out bytes.Buffer
	if err := MarkVerifierHead(&out, b, "Y", "N", &h); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "v.gguf")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Model().Close()
	if got := v.Head(); got == nil || *got != h {
		t.Errorf("head %+v, want %+v", got, h)
	}
	if v.WithHead(nil).Head() != nil || v.Head() == nil {
		t.Error("WithHead(nil) changed the verifier it was called on or kept the head")
	}
	// A head of three numbers.
	f, err := gguf.Parse(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	kv := slices.DeleteFunc(slices.Clone(f.KV), func(x gguf.KV) bool { return x.Key == VerifierHeadKey })
	kv = append(kv, gguf.KV{Key: VerifierHeadKey, Value: gguf.Float32s([]float32{1, 2, 3})})
	ts := make([]gguf.WriteTensor, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		ts[i] = gguf.WriteTensor{Name: t.Name, Dims: t.Dims, Type: t.Type, Data: f.TensorData(t)}
	}
	out.Reset()
	if err := gguf.Write(&out, kv, ts); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadVerifier(bad); !errors.Is(err, ErrVerifierMismatch) || !strings.Contains(err.Error(), VerifierHeadKey) {
		t.Errorf("a head of 3 numbers: %v", err)
	}
}

// TestVerifiedVote scripts the verdicts: the weighted vote takes the
// answer of the largest summed verdicts (not the single best path), its
// best-judged path; best-of-N the best-judged path; an unjudged path has
// no vote.
func TestVerifiedVote(t *testing.T) {
	m := loadArith(t)
	prompt := m.Tokenizer.Encode("Question: x\nAnswer:", true)
	s := &search{t: tree.New("", prompt), prompt: prompt, tok: m.Tokenizer, opts: &Options{Answer: hashAnswer, Verifier: &Verifier{}},
		stops: []int{m.Tokenizer.EOS()}, e: &Engine{}}
	add := func(text string) tree.ID {
		id := tree.Root
		for _, tok := range m.Tokenizer.EncodeContinuation(text) {
			id = s.t.Add(id, tree.Node{Token: tok})
		}
		return s.t.Add(id, tree.Node{Token: m.Tokenizer.EOS(), Status: tree.Finished})
	}
	a1, a2, b, c := add(" x #### 1"), add(" y #### 1"), add(" z #### 2"), add(" w #### 3")
	s.verified = map[tree.ID]float64{a1: 0.4, a2: 0.45, b: 0.7}
	leaves := []tree.ID{a1, a2, b, c}
	if id, ok := s.verifiedVote(leaves); !ok || id != a2 {
		t.Errorf("weighted vote chose %v (%v), want %v: answer 1 has 0.85, answer 2 0.7", id, ok, a2)
	}
	s.opts.Mode = BestOfN
	s.e.ver = nil // verifyLeaves does nothing: the verdicts are scripted
	if id, ok := s.verifiedChoice(leaves); !ok || id != b {
		t.Errorf("best-of-N chose %v (%v), want %v", id, ok, b)
	}
	s.verified = map[tree.ID]float64{c: 0.1}
	if id, ok := s.verifiedVote(leaves); !ok || id != c {
		t.Errorf("the only judged path: chose %v (%v), want %v", id, ok, c)
	}
	s.verified = nil
	if _, ok := s.verifiedVote(leaves); ok {
		t.Error("no judged path: a vote")
	}
}

// TestSearchWithVerifier runs every choosing mode with a verifier: its
// rows count in Stats.Rows within the budget, and the paths carry
// verdicts.
func TestSearchWithVerifier(t *testing.T) {
	m := loadArith(t)
	v := testVerifier(t, m)
	for _, mode := range []Mode{BeamAdaptive, SelfConsistency, BestOfN, Beam} {
		e, err := New(m, WithMode(mode), WithWidth(3), WithSeed(3), WithAnswer(hashAnswer), WithVerifier(v))
		if err != nil {
			t.Fatal(err)
		}
		const budget = 600
		res, err := e.Search(context.Background(), arithPrompt, Budget{MaxTokens: 192, MaxRows: budget})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := e.SearchWith(context.Background(), arithPrompt, Budget{MaxTokens: 192, MaxRows: budget}, WithVerifier(nil))
		if err != nil {
			t.Fatal(err)
		}
		judged := 0
		for _, p := range res.Paths {
			if p.Verified > 0 {
				judged++
			}
		}
		if res.Stats.Rows > budget || judged == 0 {
			t.Errorf("%v: %d rows of %d, %d of %d paths judged", mode, res.Stats.Rows, budget, judged, len(res.Paths))
		}
		for _, p := range plain.Paths {
			if p.Verified != 0 {
				t.Errorf("%v without the verifier: a verdict", mode)
			}
		}
		if mode != BeamAdaptive && res.Stats.Rows <= plain.Stats.Rows {
			t.Errorf("%v: %d rows with the verifier, %d without", mode, res.Stats.Rows, plain.Stats.Rows)
		}
		if e.Cache().Stats().BlocksInUse != 0 || e.ver.kv.Stats().BlocksInUse != 0 {
			t.Errorf("%v: KV blocks left in use", mode)
		}
	}
}
