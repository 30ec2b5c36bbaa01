package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu" // the CPU backend
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// Search continues a prompt with the product's mode, beam-adaptive, within
// a budget of 40 new tokens and 80 forward rows. (The example runs on the
// stories260K GGUF bundled with the repository, bench/models; a llama2.c
// checkpoint loads as model.Load("stories260K.bin", "tok512.bin").)
func ExampleEngine_Search() {
	m, err := model.Load(modeltest.BundledStories260K(), "")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	e, err := engine.New(m, engine.WithMode(engine.BeamAdaptive), engine.WithSeed(42))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close() // before the model: its backend's cache goes
	res, err := e.Search(context.Background(), "Lily wanted to", engine.Budget{MaxTokens: 40, MaxRows: 80})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Lily wanted to%s\n", res.Text)
	fmt.Printf("%d tokens, %d forks, %d prunes, within %d rows: %v\n",
		res.Stats.Generated, res.Stats.Forks, res.Stats.Prunes, 80, res.Stats.Rows <= 80)
	// Output:
	// Lily wanted to go on a walk. She saw a big box with a big box. She wanted to see what was inside. She want
	// 40 tokens, 45 forks, 0 prunes, within 80 rows: true
}
