package arith_test

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/bench/arith"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu" // the CPU backend
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestShippedModel checks bench/models/arith.gguf: its embedded tokenizer
// is this package's vocabulary, and greedy decoding of a test problem
// gives a worked answer that ends in "#### N" at the end of text.
func TestShippedModel(t *testing.T) {
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v, err := arith.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	if m.Tokenizer.VocabSize() != len(v.Tokens) {
		t.Fatalf("the model's vocabulary has %d tokens, the task's %d", m.Tokenizer.VocabSize(), len(v.Tokens))
	}
	tok, _ := arith.Tokenizer()
	prompt := arith.Prompt("Ben has 31 cards. Then Ben doubles the cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?")
	if a, b := m.Tokenizer.Encode(prompt, true), tok.Encode(prompt, true); !slices.Equal(a, b) {
		t.Fatalf("the embedded tokenizer encodes the prompt as %v, the task's as %v", a, b)
	}
	e, err := engine.New(m, engine.WithMode(engine.Greedy))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Search(context.Background(), prompt, engine.Budget{MaxTokens: 192})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s%s", prompt, res.Text)
	if res.Stopped != "eos" || !regexp.MustCompile(`^ Ben has 2 \* 31 = 62 cards\.\n(.|\n)*\n#### \d+$`).MatchString(res.Text) {
		t.Errorf("greedy answer (stopped: %s):\n%q", res.Stopped, res.Text)
	}
}
