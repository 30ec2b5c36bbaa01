package engine

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/tree"
)

// arithPrompt is a test problem of the arith task (gold 90; the shipped
// model's greedy answer is 80).
const arithPrompt = "Question: Ben has 31 cards. Then Ben doubles the cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\nAnswer:"

var finalAnswer = regexp.MustCompile(`#### (\d+)\s*$`)

func hashAnswer(text string) (string, bool) {
	m := finalAnswer.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

func loadArith(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSelfConsistencyVotes checks that self-consistency draws K samples in
// one batch and commits a sample of the answer most samples reach, and
// that best-of-N commits its most probable sample.
func TestSelfConsistencyVotes(t *testing.T) {
	m := loadArith(t)
	for _, mode := range []Mode{SelfConsistency, BestOfN} {
		e, err := New(m, WithMode(mode), WithSeed(7), WithWidth(6), WithAnswer(hashAnswer))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Search(context.Background(), arithPrompt, Budget{MaxTokens: 192})
		if err != nil {
			t.Fatal(err)
		}
		leaves := res.Tree.Leaves(tree.Finished)
		if len(leaves) != 6 || res.Stats.MaxLive != 6 {
			t.Fatalf("%v: %d finished samples, %d live at most; want 6", mode, len(leaves), res.Stats.MaxLive)
		}
		counts := map[string]int{}
		rows := 0
		best := leaves[0]
		for _, id := range leaves {
			text := ""
			for _, n := range res.Tree.Path(id)[1:] {
				text += res.Tree.Node(n).Text
			}
			a, _ := hashAnswer(text)
			counts[a]++
			rows += res.Tree.Node(id).Depth
			if res.Tree.Node(id).Score > res.Tree.Node(best).Score {
				best = id
			}
		}
		// Every sample's tokens but its end of text were run once, plus
		// the end of text itself was never fed.
		if res.Stats.Rows != rows-6 {
			t.Errorf("%v: %d rows for samples of %d tokens in all", mode, res.Stats.Rows, rows)
		}
		got, ok := hashAnswer(res.Text)
		if !ok {
			t.Fatalf("%v: no answer in %q", mode, res.Text)
		}
		switch mode {
		case SelfConsistency:
			for a, n := range counts {
				if n > counts[got] {
					t.Errorf("self-consistency chose %s (%d votes) over %s (%d votes)", got, counts[got], a, n)
				}
			}
		case BestOfN:
			if !res.Tree.Node(best).Committed {
				t.Errorf("best-of did not commit its most probable sample")
			}
		}
		t.Logf("%v: answer %s, votes %v, %d rows", mode, got, counts, res.Stats.Rows)

		again, err := e.Search(context.Background(), arithPrompt, Budget{MaxTokens: 192})
		if err != nil || again.Text != res.Text {
			t.Errorf("%v: a second search with the same seed differs: %q against %q (%v)", mode, again.Text, res.Text, err)
		}
	}
}

// TestForksCounted checks that every branching mode reports its fork
// points: beam's parents that kept several children, CoT-decoding's and
// the sampling modes' root.
func TestForksCounted(t *testing.T) {
	m := loadArith(t)
	for _, mode := range []Mode{Beam, CoTDecoding, SelfConsistency, BestOfN} {
		e, err := New(m, WithMode(mode), WithWidth(4))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Search(context.Background(), arithPrompt, Budget{MaxTokens: 32})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stats.Forks < 1 {
			t.Errorf("%v: %d forks with 4 branches", mode, res.Stats.Forks)
		}
		if mode == CoTDecoding && res.Stats.Forks != 1 {
			t.Errorf("cot-decoding: %d forks, want 1 (the root)", res.Stats.Forks)
		}
	}
}
