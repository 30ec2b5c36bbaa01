package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// loadStories loads stories260K: the shared llama2.c checkpoint, or the
// bundled GGUF (the same logits) when ../shared is absent.
func loadStories(t testing.TB) *model.Model {
	t.Helper()
	m, err := model.Load(modeltest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newEngine(t testing.TB, m *model.Model, opts ...Option) *Engine {
	t.Helper()
	e, err := New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func runSearch(t testing.TB, e *Engine, prompt string, b Budget) *Result {
	t.Helper()
	res, err := e.Search(context.Background(), prompt, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%v: %d KV blocks still in use after Search", e.opts.Mode, n)
	}
	return res
}

// forking returns thresholds under which stories260K forks often: its
// own calibration puts LEHV at high varentropy with moderate entropy.
func forking() policy.Thresholds {
	th := policy.EntropixV1
	th.Name = "test-forking"
	th.HighVarentropy = 1.0
	th.HighEntropy = 6
	th.LowEntropy = 0.05
	th.LowVarentropy = 0.05
	th.BranchEntropy = 6
	return th
}

func treeJSON(t testing.TB, tr *tree.Tree) []byte {
	t.Helper()
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Must-show 1: a fixed seed gives the same output in every mode.
func TestDeterministic(t *testing.T) {
	m := loadStories(t)
	for _, mode := range Modes() {
		t.Run(mode.String(), func(t *testing.T) {
			b := Budget{MaxTokens: 40, MaxRows: 200}
			opts := []Option{WithMode(mode), WithSeed(7), WithThresholds(forking())}
			r1 := runSearch(t, newEngine(t, m, opts...), "Once upon a time", b)
			r2 := runSearch(t, newEngine(t, m, opts...), "Once upon a time", b)
			if r1.Text != r2.Text || !slices.Equal(r1.Tokens, r2.Tokens) {
				t.Fatalf("two runs differ:\n%q\n%q", r1.Text, r2.Text)
			}
			if !bytes.Equal(treeJSON(t, r1.Tree), treeJSON(t, r2.Tree)) {
				t.Fatal("two runs built different trees")
			}
			if len(r1.Tokens) == 0 || r1.Stats.Rows > b.MaxRows {
				t.Fatalf("tokens %d, rows %d (budget %d)", len(r1.Tokens), r1.Stats.Rows, b.MaxRows)
			}
		})
	}
}

// Must-show 2: the KV pool is back to empty after every kind of ending.
func TestNoLeakedBlocks(t *testing.T) {
	m := loadStories(t)
	for _, mode := range Modes() {
		e := newEngine(t, m, WithMode(mode), WithSeed(1), WithThresholds(forking()))
		check := func(how string) {
			if n := e.Cache().Stats().BlocksInUse; n != 0 {
				t.Errorf("%v, %s: %d KV blocks leaked", mode, how, n)
			}
		}
		// Normal end and budget exhaustion.
		runSearch(t, e, "Once upon a time", Budget{MaxTokens: 30})
		res := runSearch(t, e, "Once upon a time", Budget{MaxTokens: 200, MaxRows: 25})
		if mode != Greedy && mode != Sample && mode != Entropix && !res.BudgetExhausted {
			t.Errorf("%v: 25 rows for 200 tokens did not exhaust the budget (stopped %q)", mode, res.Stopped)
		}
		// Cancellation mid-search.
		ctx, cancel := context.WithCancel(context.Background())
		e.stepHook = func(step int) error {
			if step == 7 {
				cancel()
			}
			return nil
		}
		res, err := e.Search(ctx, "Once upon a time", Budget{MaxTokens: 100})
		if !errors.Is(err, context.Canceled) || res == nil || res.Stopped != "canceled" {
			t.Errorf("%v: canceled search returned %v, %v", mode, res, err)
		}
		check("canceled")
		// An error injected in the middle of a step.
		boom := errors.New("injected")
		e.stepHook = func(step int) error {
			if step == 5 {
				return boom
			}
			return nil
		}
		if _, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 100}); !errors.Is(err, boom) {
			t.Errorf("%v: injected error: %v", mode, err)
		}
		e.stepHook = nil
		check("injected error")
	}
}

// Must-show 3: a search forced to fork at every step stays within its
// width, terminates, and spends no more rows than its budget.
func TestForcedForks(t *testing.T) {
	m := loadStories(t)
	th := policy.EntropixV1
	th.Name = "always-fork"
	th.LowEntropy, th.LowVarentropy = 0, 0
	th.HighEntropy, th.HighVarentropy = 1e9, 0
	th.BranchEntropy = 1e9
	cfg := policy.DefaultConfig()
	cfg.Thresholds = th
	cfg.Fork.MinPHigh, cfg.Fork.MinPLow = 1e-6, 1e-6
	cfg.Fork.MaxWidth = 8
	for _, b := range []Budget{
		{MaxTokens: 64, MaxRows: 300, MaxWidth: 4},
		{MaxTokens: 64, MaxRows: 97, MaxWidth: 8},
		{MaxTokens: 20, MaxWidth: 3},
	} {
		e := newEngine(t, m, WithMode(BeamAdaptive), WithPolicy(cfg), WithSeed(3))
		res := runSearch(t, e, "Once upon a time", b)
		st := res.Stats
		if st.MaxLive > b.MaxWidth {
			t.Errorf("%+v: %d live branches, width budget %d", b, st.MaxLive, b.MaxWidth)
		}
		if b.MaxRows > 0 && st.Rows > b.MaxRows {
			t.Errorf("%+v: spent %d rows", b, st.Rows)
		}
		if st.Forks == 0 || offPath(res) == 0 {
			t.Errorf("%+v: %d forks, %d tokens explored off the result's path: the forced fork did not happen", b, st.Forks, offPath(res))
		}
		if len(res.Tokens) == 0 || len(res.Tokens) > b.MaxTokens {
			t.Errorf("%+v: %d tokens", b, len(res.Tokens))
		}
		t.Logf("%+v: stopped %s, %d tokens, %+v", b, res.Stopped, len(res.Tokens), st)
	}
}

// offPath counts the tokens a search fed to the model off its result's
// path (alternatives it explored).
func offPath(res *Result) int {
	n := 0
	for id, node := range res.Tree.All() {
		if id != tree.Root && !node.Committed && node.Step < res.Stats.ForwardPasses && len(node.Children) > 0 {
			n++
		}
	}
	return n
}

// Must-show 4: beam-adaptive on stories260K makes a tree with forks,
// prunes and a committed path; Graphviz accepts its DOT and its JSON
// round-trips.
func TestAdaptiveTree(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, WithMode(BeamAdaptive), WithThresholds(forking()), WithSeed(11))
	res := runSearch(t, e, "Once upon a time", Budget{MaxTokens: 80})
	st := res.Stats
	if st.Forks == 0 || offPath(res) == 0 || len(res.Tokens) == 0 {
		t.Fatalf("forks %d, explored off the path %d, tokens %d", st.Forks, offPath(res), len(res.Tokens))
	}
	tr := res.Tree
	var committed []int
	for id, n := range tr.All() {
		if n.Committed && id != tree.Root {
			committed = append(committed, n.Token)
		}
	}
	if !slices.Equal(committed, res.Tokens) && !slices.Equal(committed, append(slices.Clone(res.Tokens), m.Tokenizer.EOS())) {
		t.Fatalf("committed path %v, result tokens %v", committed, res.Tokens)
	}
	var dot bytes.Buffer
	if err := tr.WriteDOT(&dot, tree.DOTOptions{}); err != nil {
		t.Fatal(err)
	}
	if path, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(path, "-Tsvg")
		cmd.Stdin = bytes.NewReader(dot.Bytes())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || !bytes.Contains(out, []byte("<svg")) {
			t.Fatalf("dot -Tsvg rejected the tree: %v\n%s", err, stderr.String())
		}
	} else {
		t.Log("Graphviz dot not installed: DOT not checked by Graphviz")
	}
	js := treeJSON(t, tr)
	var back tree.Tree
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if again := treeJSON(t, &back); !bytes.Equal(js, again) {
		t.Fatal("tree JSON does not round-trip")
	}
	t.Logf("%d nodes, %+v\n%s", tr.Len(), st, res.Text)
}

// Must-show 5: width-1 equivalences.
func TestWidthOneEquivalences(t *testing.T) {
	m := loadStories(t)
	for _, prompt := range []string{"Once upon a time", "The little dog", "Lily wanted to"} {
		b := Budget{MaxTokens: 50}
		greedy := runSearch(t, newEngine(t, m, WithMode(Greedy)), prompt, b)
		beam1 := runSearch(t, newEngine(t, m, WithMode(Beam), WithWidth(1)), prompt, b)
		if !slices.Equal(greedy.Tokens, beam1.Tokens) {
			t.Errorf("%q: beam width 1 %q != greedy %q", prompt, beam1.Text, greedy.Text)
		}
		b1 := b
		b1.MaxWidth = 1
		for seed := range uint64(3) {
			ent := runSearch(t, newEngine(t, m, WithMode(Entropix), WithSeed(seed)), prompt, b)
			ada := runSearch(t, newEngine(t, m, WithMode(BeamAdaptive), WithSeed(seed)), prompt, b1)
			if !slices.Equal(ent.Tokens, ada.Tokens) {
				t.Errorf("%q seed %d: beam-adaptive without branching %q != entropix %q", prompt, seed, ada.Text, ent.Text)
			}
		}
	}
}

func TestTopK(t *testing.T) {
	logits := []float32{0.5, 3, -1, 3, 2, 7, 0.5, -9}
	for k := 1; k <= len(logits); k++ {
		got := topK(logits, k, nil)
		want := []int{5, 1, 3, 4, 0, 6, 2, 7}[:k]
		if !slices.Equal(got, want) {
			t.Errorf("k=%d: %v, want %v", k, got, want)
		}
	}
}

// topK agrees with a stable sort on long rows with many ties, through
// the vectorized scan.
func TestTopKSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 9, 100, 4000} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.IntN(50)) // ties everywhere
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
		for _, k := range []int{1, 2, 4, 16, 64} {
			if got, want := topK(logits, k, nil), idx[:min(k, n)]; !slices.Equal(got, want) {
				t.Fatalf("n=%d k=%d: %v, want %v", n, k, got, want)
			}
		}
	}
}

// A full KV pool prunes the worst branches instead of failing.
func TestKVFullPrunes(t *testing.T) {
	m := loadStories(t)
	th := forking()
	th.HighVarentropy = 0.2
	// Room for the prompt and a few branches only: 6 blocks of 16 positions.
	e := newEngine(t, m, WithMode(BeamAdaptive), WithThresholds(th), WithSeed(5), WithCacheTokens(96))
	res, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 60, MaxWidth: 8})
	if err != nil {
		t.Fatal(err)
	}
	kvPrunes := 0
	for _, n := range res.Tree.All() {
		if n.Status == tree.Pruned && n.Reason == "kv-full" {
			kvPrunes++
		}
	}
	if kvPrunes == 0 || len(res.Tokens) == 0 {
		t.Fatalf("no kv-full prunes (stopped %q, %d tokens, %+v)", res.Stopped, len(res.Tokens), res.Stats)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks leaked", n)
	}
	t.Logf("stopped %q after %d tokens, %d kv-full prunes, peak %d blocks", res.Stopped, len(res.Tokens), kvPrunes, res.Stats.KVBlocksPeak)
}

// Every mode survives a full KV pool (regression: a mode without waiting
// branches once recursed forever looking for one to drop).
func TestKVFullEveryMode(t *testing.T) {
	m := loadStories(t)
	for _, mode := range Modes() {
		e := newEngine(t, m, WithMode(mode), WithSeed(5), WithWidth(8), WithCacheTokens(96))
		res, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 60})
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if len(res.Tokens) == 0 {
			t.Errorf("%v: no tokens (stopped %q)", mode, res.Stopped)
		}
		if n := e.Cache().Stats().BlocksInUse; n != 0 {
			t.Fatalf("%v: %d blocks leaked", mode, n)
		}
	}
}

func TestGreedySearch(t *testing.T) {
	m := loadStories(t)
	var streamed strings.Builder
	e, err := New(m, WithMode(Greedy), WithStream(func(s string) { streamed.WriteString(s) }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 60})
	if err != nil {
		t.Fatal(err)
	}
	want := ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily"
	if res.Text != want || streamed.String() != want {
		t.Fatalf("text %q, streamed %q, want %q", res.Text, streamed.String(), want)
	}
	if res.Stopped != "max-tokens" || res.Stats.Generated != 60 || res.Stats.PromptRows != 5 {
		t.Fatalf("stopped %q, stats %+v", res.Stopped, res.Stats)
	}
	// The prompt is one batch; then one row per generated token but the last.
	if res.Stats.ForwardPasses != 60 || res.Stats.Rows != 59 {
		t.Fatalf("stats %+v", res.Stats)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d KV blocks leaked", n)
	}
}

func TestSearchBadInput(t *testing.T) {
	m := loadStories(t)
	e, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Search(context.Background(), "", Budget{MaxTokens: 5}); !errors.Is(err, ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
	if _, err := e.Search(context.Background(), "hi", Budget{}); err == nil {
		t.Error("zero budget accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := e.Search(ctx, "Once upon a time", Budget{MaxTokens: 50})
	if !errors.Is(err, context.Canceled) || res == nil || res.Stopped != "canceled" {
		t.Errorf("canceled search: res %+v, err %v", res, err)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d KV blocks leaked", n)
	}
}

// Regression: when the last exploring branch of a fork is lost (HEHV), it
// must go on with a token, not become a trunk with nothing to run. The
// prompt is the second question of the GSM8K test set (MIT licence; see
// ../shared/data/gsm8k), which first showed it.
func TestLastBranchLost(t *testing.T) {
	m := loadStories(t)
	const question = "A robe takes 2 bolts of blue fiber and half that much white fiber.  How many bolts in total does it take?"
	th, ok := policy.Preset("entropix-main")
	if !ok {
		t.Fatal("no entropix-main preset")
	}
	e := newEngine(t, m, WithMode(BeamAdaptive), WithThresholds(th), WithSeed(2))
	res := runSearch(t, e, "Q: "+question+"\nA:", Budget{MaxTokens: 8, MaxRows: 24, MaxWidth: 3})
	if len(res.Tokens) == 0 {
		t.Fatalf("no tokens (stopped %q)", res.Stopped)
	}
}

// Beam-adaptive's Backspace, forced on stories260K (every row HEHV, every
// token below BackspaceBelow): each taken-back token is pruned as
// "backspace" and its position chosen again, from the row that chose it,
// with that token banned, so the next child of its parent is another
// token.
func TestAdaptiveBackspace(t *testing.T) {
	m := loadStories(t)
	cfg := policy.DefaultConfig()
	th := cfg.Thresholds
	th.Name = "test-backspace"
	th.LowEntropy, th.LowVarentropy, th.HighEntropy, th.HighVarentropy = 0, 0, 0, 0
	th.BranchEntropy, th.LostEntropy = 0, 0
	cfg.Thresholds = th
	cfg.Backspace, cfg.MaxBackspaces, cfg.BackspaceBelow = true, 3, 0.999
	e := newEngine(t, m, WithMode(BeamAdaptive), WithPolicy(cfg), WithSeed(5))
	res := runSearch(t, e, "Once upon a time", Budget{MaxTokens: 24, MaxWidth: 2})
	backs := 0
	for _, node := range res.Tree.All() {
		for i, c := range node.Children {
			k := res.Tree.Node(c)
			if k.Reason != "backspace" {
				continue
			}
			backs++
			if i+1 < len(node.Children) && res.Tree.Node(node.Children[i+1]).Token == k.Token {
				t.Errorf("token %d taken back and chosen again in its place", k.Token)
			}
		}
	}
	if backs == 0 {
		t.Fatalf("no backspace: %+v", res.Stats)
	}
	t.Logf("%d backspaces, %d tokens", backs, len(res.Tokens))
}
