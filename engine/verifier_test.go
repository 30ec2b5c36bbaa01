package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
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
	if id, ok := s.verifiedVote(leaves, false); !ok || id != a2 {
		t.Errorf("weighted vote chose %v (%v), want %v: answer 1 has 0.85, answer 2 0.7", id, ok, a2)
	}
	s.opts.Mode = BestOfN
	s.e.ver = nil // verifyLeaves does nothing: the verdicts are scripted
	if id, ok := s.verifiedChoice(leaves); !ok || id != b {
		t.Errorf("best-of-N chose %v (%v), want %v", id, ok, b)
	}
	s.verified = map[tree.ID]float64{c: 0.1}
	if id, ok := s.verifiedVote(leaves, false); !ok || id != c {
		t.Errorf("the only judged path: chose %v (%v), want %v", id, ok, c)
	}
	// Weighed by probability too, a less probable path needs a better
	// verdict.
	s.t.Node(b).CumLogProb, s.t.Node(a1).CumLogProb, s.t.Node(a2).CumLogProb = math.Log(0.5), math.Log(0.3), math.Log(0.1)
	s.verified = map[tree.ID]float64{a1: 0.4, a2: 0.45, b: 0.4}
	if id, ok := s.verifiedVote(leaves, true); !ok || id != b {
		t.Errorf("probability-weighted vote chose %v (%v), want %v: answer 2 weighs 0.5 × 0.4, answer 1 0.3 × 0.4 + 0.1 × 0.45", id, ok, b)
	}
	s.verified = nil
	if _, ok := s.verifiedVote(leaves, false); ok {
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
