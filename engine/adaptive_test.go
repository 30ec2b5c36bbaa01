package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// fayPrompt is an arith test problem on which the model doubts (gold 44;
// greedy answers 42, with a token of p 0.35 on the way).
const fayPrompt = "Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\nAnswer:"

// TestAdaptiveVotes checks beam-adaptive's tree search on the arith
// model: the first path is the argmax path, alternatives wait at the forks
// and are re-opened within the row budget, the finished paths vote with
// their probabilities and the result is the most probable path of the
// winning answer.
func TestAdaptiveVotes(t *testing.T) {
	m := loadArith(t)
	cfg := policy.DefaultConfig()
	cfg.Fork.MinPHigh, cfg.Fork.MinPLow = 0.1, 0.02
	e := newEngine(t, m, WithMode(BeamAdaptive), WithAnswer(hashAnswer), WithPolicy(cfg))
	budget := Budget{MaxTokens: 192, MaxRows: 280}
	res := runSearch(t, e, fayPrompt, budget)
	if res.Stats.Rows > budget.MaxRows {
		t.Errorf("spent %d rows of %d", res.Stats.Rows, budget.MaxRows)
	}
	if res.Stats.Forks == 0 {
		t.Fatal("no fork")
	}
	var leaves []tree.ID
	for id, n := range res.Tree.All() {
		if n.IsLeaf() && n.Status == tree.Finished && n.Reason == "eos" {
			leaves = append(leaves, id)
		}
	}
	if len(leaves) < 2 {
		t.Fatalf("%d finished paths (stopped %q)", len(leaves), res.Stopped)
	}
	mass := map[string]float64{}
	for _, id := range leaves {
		a, _ := hashAnswer(res.Tree.Text(id))
		mass[a] += math.Exp(res.Tree.Node(id).CumLogProb)
	}
	got, ok := hashAnswer(res.Text)
	if !ok {
		t.Fatalf("no answer in %q", res.Text)
	}
	for a, w := range mass {
		if w > mass[got] {
			t.Errorf("answer %s has weight %v, above the committed %s's %v", a, w, got, mass[got])
		}
	}
	// The first path is greedy's.
	g := newEngine(t, m, WithMode(Greedy))
	greedy := runSearch(t, g, fayPrompt, Budget{MaxTokens: 192})
	if first := res.Tree.Text(leaves[0]); first != greedy.Text {
		t.Errorf("first path %q, greedy %q", first, greedy.Text)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d KV blocks leaked", n)
	}
}

// TestAdaptiveSettles: with probability weights the search stops once no
// open path could change the vote, and at a budget of one path it is the
// greedy path.
func TestAdaptiveSettles(t *testing.T) {
	m := loadArith(t)
	e := newEngine(t, m, WithMode(BeamAdaptive), WithAnswer(hashAnswer))
	res := runSearch(t, e, arithPrompt, Budget{MaxTokens: 192, MaxRows: 2000})
	if res.Stopped != "settled" || res.Stats.Rows >= 2000 {
		t.Errorf("stopped %q after %d rows", res.Stopped, res.Stats.Rows)
	}
	g := newEngine(t, m, WithMode(Greedy))
	greedy := runSearch(t, g, fayPrompt, Budget{MaxTokens: 192})
	one := runSearch(t, e, fayPrompt, Budget{MaxTokens: 192, MaxRows: greedy.Stats.Rows})
	if one.Text != greedy.Text {
		t.Errorf("at greedy's rows: %q, greedy %q", one.Text, greedy.Text)
	}
	// Other scores weigh the vote; the settled stop needs probabilities.
	for _, k := range policy.ScoreKinds() {
		e := newEngine(t, m, WithMode(BeamAdaptive), WithAnswer(hashAnswer), WithScore(k))
		res := runSearch(t, e, fayPrompt, Budget{MaxTokens: 192, MaxRows: 280})
		if _, ok := hashAnswer(res.Text); !ok || res.Stats.Rows > 280 {
			t.Errorf("score %v: %q after %d rows", k, res.Text, res.Stats.Rows)
		}
	}
}

// TestAdaptiveObserver: every decision row reaches Options.Observe.
func TestAdaptiveObserver(t *testing.T) {
	m := loadArith(t)
	var obs []policy.Observation
	e := newEngine(t, m, WithMode(BeamAdaptive), WithObserver(func(o policy.Observation) { obs = append(obs, o) }))
	res := runSearch(t, e, arithPrompt, Budget{MaxTokens: 192, MaxRows: 150})
	if len(obs) == 0 || len(obs) > res.Stats.Rows+1 {
		t.Fatalf("%d observations for %d rows", len(obs), res.Stats.Rows)
	}
	for _, o := range obs {
		if !(o.Ratio >= 0 && o.Ratio <= 1 && o.PrevP > 0 && o.PrevP <= 1) {
			t.Fatalf("observation %+v", o)
		}
	}
}

// Beam-adaptive streams the text before its first fork as it goes (every
// path shares it), and the rest once the vote is decided; the streamed
// text is the result's.
func TestAdaptiveStreamsTrunk(t *testing.T) {
	m := loadArith(t)
	var streamed strings.Builder
	step, first := 0, -1
	e := newEngine(t, m, WithMode(BeamAdaptive), WithAnswer(hashAnswer),
		WithProgress(func(p Progress) { step = p.Step }),
		WithStream(func(s string) {
			if first < 0 {
				first = step
			}
			streamed.WriteString(s)
		}))
	res := runSearch(t, e, fayPrompt, Budget{MaxTokens: 192, MaxRows: 280})
	if streamed.String() != res.Text {
		t.Errorf("streamed %q, result %q", streamed.String(), res.Text)
	}
	if res.Stats.Forks == 0 || first < 1 || first >= res.Stats.ForwardPasses-2 {
		t.Errorf("first text streamed at step %d of %d (forks %d)", first, res.Stats.ForwardPasses, res.Stats.Forks)
	}
}
