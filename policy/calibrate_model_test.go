package policy_test

import (
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
)

// stories260KForward, when set, runs the stories260K forward pass (on the
// files modeltest.Stories260K names, skipping tb when there are none): it
// encodes prompt (BOS first), feeds positions 0..steps-1, appends after the
// prompt the token next picks from each row, and returns the logits row of
// every position. It is nil here because policy must not import the model; a
// test file of package policy_test, which may import model/, sets it in an
// init function.
var stories260KForward func(tb testing.TB, prompt string, steps int, next func(logits []float32) int) ([][]float32, error)

func measureRows(t *testing.T, rows [][]float32) []policy.Metrics {
	t.Helper()
	obs := make([]policy.Metrics, len(rows))
	for i, row := range rows {
		m, err := policy.Measure(row, 0)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		obs[i] = m
	}
	return obs
}

func holdout(t *testing.T, train, held []policy.Metrics, tg policy.Targets, tol float64) {
	t.Helper()
	th, err := policy.Calibrate(train, tg)
	if err != nil {
		t.Fatal(err)
	}
	ct, ch := policy.Count(train, th), policy.Count(held, th)
	t.Logf("stories260K thresholds: H %.4f/%.4f/%.4f V %.4f/%.4f",
		th.LowEntropy, th.HighEntropy, th.BranchEntropy, th.LowVarentropy, th.HighVarentropy)
	t.Logf("train (%d rows)    %v", len(train), ct)
	t.Logf("held-out (%d rows) %v", len(held), ch)
	for q := range policy.Quadrant(policy.NumQuadrants) {
		if got, want := ch.Share(q), tg.Share(q); math.Abs(got-want) > tol {
			t.Errorf("held-out %v share %.3f, want %.3f ± %.3f", q, got, want, tol)
		}
	}
}

// TestCalibrateStories260KOracle calibrates on the real stories260K logits
// of the oracle run (one prompt, 64 positions): even positions train, odd
// ones are held out. With 32 rows a side the tolerance is loose; the
// multi-prompt test below is the real check.
func TestCalibrateStories260KOracle(t *testing.T) {
	rows := modeltest.OracleLogits(t)
	obs := measureRows(t, rows)
	var train, held []policy.Metrics
	for i, m := range obs {
		if i%2 == 0 {
			train = append(train, m)
		} else {
			held = append(held, m)
		}
		t.Logf("pos %2d: %v", i, m)
	}
	holdout(t, train, held, policy.Targets{LELV: 0.3, HELV: 0.1, LEHV: 0.2, HEHV: 0.1}, 0.2)
}

// TestCalibrateStories260K is must-show 3: thresholds from stories260K's
// real distribution over five prompts, and quadrant shares on three
// held-out prompts close to the targets. Tokens are drawn by the
// single-path entropix policy with a fixed seed per prompt (greedy decoding
// falls into loops whose rows are not representative).
func TestCalibrateStories260K(t *testing.T) {
	if stories260KForward == nil {
		t.Skip("needs model forward pass (hooked up in engine tests): set stories260KForward")
	}
	if testing.Short() {
		t.Skip("2048 forward steps: skipped in -short mode")
	}
	trainPrompts := []string{"Once upon a time", "The little dog", "Lily wanted to", "One day, a boy", "The sun was"}
	heldPrompts := []string{"Tom and his mom", "There was a big", "The cat saw a"}
	const steps = 256
	collect := func(prompts []string, seed uint64) []policy.Metrics {
		var obs []policy.Metrics
		for i, p := range prompts {
			tr, err := policy.NewDecider(policy.DefaultConfig(), seed+uint64(i), 0)
			if err != nil {
				t.Fatal(err)
			}
			next := func(logits []float32) int {
				d, err := tr.Decide(policy.Step{Logits: logits})
				if err != nil {
					t.Fatalf("%q: %v", p, err)
				}
				tr.Accept(d.Token)
				return d.Token
			}
			rows, err := stories260KForward(t, p, steps, next)
			if err != nil {
				t.Fatalf("forward pass on %q: %v", p, err)
			}
			obs = append(obs, measureRows(t, rows)...)
		}
		return obs
	}
	holdout(t, collect(trainPrompts, 0), collect(heldPrompts, 100), policy.DefaultTargets(), 0.05)
}
