package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
	"golang.org/x/sync/errgroup"
)

// VerifierPath is one complete answer of a task model to a problem,
// labelled by checking its final number against the gold: a training (or
// test) example of an outcome verifier.
type VerifierPath struct {
	Problem int    `json:"problem"` // index in the problems given
	Source  string `json:"source"`  // the mode that produced it
	Prompt  []int  `json:"-"`       // the problem's prompt tokens
	Tokens  []int  `json:"tokens"`  // after the prompt, stop tokens left out
	Text    string `json:"text"`
	Right   bool   `json:"right"`
}

// VerifierDataConfig says how a task model's answers are drawn: the paths
// a verifier must judge are those of beam-adaptive search (its finished
// paths at AdaptiveRows) and of sampling (Samples samples at Temperature,
// as self-consistency and best-of-N draw them).
type VerifierDataConfig struct {
	MaxTokens    int
	AdaptiveRows int
	Samples      int
	Temperature  float64
	Seed         uint64 // problem i runs with Seed+i
	Parallel     int    // searches at once on one engine (batched)
}

// VerifierPaths runs the task model m on problems (arith prompts) and
// returns their distinct complete paths (per problem, the first of equal
// texts), labelled, in problem order, beam-adaptive's before the
// samples'. The result depends only on m, problems and cfg.
func VerifierPaths(ctx context.Context, m *model.Model, problems []GSM8KProblem, cfg VerifierDataConfig) ([]VerifierPath, error) {
	if cfg.MaxTokens <= 0 || cfg.AdaptiveRows <= 0 || cfg.Samples < 1 {
		return nil, fmt.Errorf("bench: verifier data: %+v", cfg)
	}
	eng, err := engine.New(m, engine.WithAnswer(policy.ExtractAnswer), engine.WithCacheTokens(max(cfg.Parallel, 1)*8*m.Config.ContextLen))
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	per := make([][]VerifierPath, len(problems))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(cfg.Parallel, 1))
	for i, p := range problems {
		g.Go(func() error {
			gold, err := p.Gold()
			if err != nil {
				return fmt.Errorf("bench: verifier data: problem %d: %w", i, err)
			}
			prompt := m.Tokenizer.Encode(NewArithPrompt(p.Question), m.Tokenizer.AddBOS())
			seen := map[string]bool{}
			runs := []struct {
				source string
				b      engine.Budget
				opts   []engine.Option
			}{
				{"beam-adaptive", engine.Budget{MaxTokens: cfg.MaxTokens, MaxRows: cfg.AdaptiveRows, MaxWidth: 4},
					[]engine.Option{engine.WithMode(engine.BeamAdaptive)}},
				{"sample", engine.Budget{MaxTokens: cfg.MaxTokens, MaxWidth: cfg.Samples},
					[]engine.Option{engine.WithMode(engine.SelfConsistency), engine.WithWidth(cfg.Samples),
						engine.WithSampling(samplingAt(cfg.Temperature))}},
			}
			for _, r := range runs {
				res, err := eng.SearchTokensWith(gctx, "", prompt, r.b, append(r.opts, engine.WithSeed(cfg.Seed+uint64(i)))...)
				if err != nil {
					return fmt.Errorf("bench: verifier data: problem %d, %s: %w", i, r.source, err)
				}
				for _, path := range res.Paths {
					if seen[path.Text] {
						continue
					}
					seen[path.Text] = true
					toks := slices.DeleteFunc(res.Tree.Tokens(path.Node), func(t int) bool { return t == m.Tokenizer.EOS() || t == m.Tokenizer.BOS() })
					per[i] = append(per[i], VerifierPath{Problem: i, Source: r.source, Prompt: prompt, Tokens: toks, Text: path.Text,
						Right: ArithCorrect(path.Text, gold)})
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []VerifierPath
	for _, ps := range per {
		out = append(out, ps...)
	}
	return out, nil
}

// samplingAt is the engine's default sampling at temperature t.
func samplingAt(t float64) engine.Sampling {
	s := engine.DefaultSampling()
	s.Temperature = t
	return s
}

// NewArithPrompt is the arith task's prompt for a question.
func NewArithPrompt(question string) string { return "Question: " + question + "\nAnswer:" }
