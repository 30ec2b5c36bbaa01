package bench

import (
	"context"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/tree"
)

// TestDefaultPolicyKeepsTaskModels is the default search on two small
// models trained here (../shared/models/task-models) that the entropix
// quadrants once wrecked: the clarify text " Wait," inserted where the
// arith model could not read it took beam-adaptive from greedy's 82% to 8%
// and the entropix sampler with it, and forks at flat rows made
// arith-routes' paths loop. With the default policy, beam-adaptive and
// entropix stay within a few points of greedy on the first problems of
// each test set, and no output loops while a path that finished exists.
func TestDefaultPolicyKeepsTaskModels(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates two models on 40 problems each")
	}
	for _, c := range []struct{ model, data string }{
		{"models/task-models/arith-d40-seed2.gguf", "data/arith/test.jsonl"},
		{"models/task-models/arith-routes-d48.gguf", "data/arith-routes/test.jsonl"},
	} {
		t.Run(c.model, func(t *testing.T) {
			m, err := model.Load(modeltest.Path(t, c.model), "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			task := NewArith(modeltest.Path(t, c.data))
			limit, err := task.AnswerTokenLimit(m)
			if err != nil {
				t.Fatal(err)
			}
			cfg := EvalConfig{Modes: []engine.Mode{engine.Greedy, engine.Entropix, engine.BeamAdaptive},
				MaxTokens: limit, Budgets: []int{4 * limit}, Limit: 40, Seed: 1, Loop: DefaultLoopRule()}
			rep, err := Eval(context.Background(), m, task, cfg)
			if err != nil {
				t.Fatal(err)
			}
			correct := map[engine.Mode]int{}
			for _, r := range rep.Results {
				correct[r.Mode] = r.Correct
			}
			t.Logf("correct of %d: greedy %d, entropix %d, beam-adaptive %d", rep.Items,
				correct[engine.Greedy], correct[engine.Entropix], correct[engine.BeamAdaptive])
			for _, mode := range []engine.Mode{engine.Entropix, engine.BeamAdaptive} {
				if correct[mode] < correct[engine.Greedy]-2 { // 5 points of 40
					t.Errorf("%s: %d correct of %d, greedy %d", mode, correct[mode], rep.Items, correct[engine.Greedy])
				}
			}
			for _, o := range rep.Outputs {
				if o.Mode != engine.BeamAdaptive || !o.Loop {
					continue
				}
				res, err := SearchItem(context.Background(), m, task, cfg, o.Item, o.Mode, o.Budget)
				if err != nil {
					t.Fatal(err)
				}
				tr := res.Tree
				for id := range tree.ID(tr.Len()) {
					if n := tr.Node(id); n.Status == tree.Finished && !n.Committed {
						t.Errorf("%s: the result loops (%q) while path %d finished", o.Item, o.Text, id)
						break
					}
				}
			}
		})
	}
}
