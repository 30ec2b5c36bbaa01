package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/policy"
)

// corruptModel is a stories260K-shaped model with random weights and the
// real tokenizer, with corrupt applied to its tensors first.
func corruptModel(t *testing.T, corrupt func(map[string][]float32)) *model.Model {
	t.Helper()
	shape, err := synth.Lookup("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := synth.Init(shape, 7)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]float32{}
	for _, x := range ts {
		byName[x.Name] = x.Values
	}
	corrupt(byName)
	m, err := synth.FromTensors(shape, ts, loadStories(t).Tokenizer, "corrupt")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Every mode fails with ErrNonFinite on logits holding a NaN: one NaN
// among finite logits, and a row of NaN alone; with the policy's noise
// floor on too (its pass skips what its comparison cannot order).
func TestNonFiniteLogits(t *testing.T) {
	nan := float32(math.NaN())
	cases := map[string]func(map[string][]float32){
		"one NaN logit": func(w map[string][]float32) {
			// The tied classifier's row of a token no prompt here feeds.
			w["token_embd.weight"][300*64] = nan
		},
		"every logit NaN": func(w map[string][]float32) { w["output_norm.weight"][0] = nan },
	}
	for name, corrupt := range cases {
		m := corruptModel(t, corrupt)
		for _, floor := range []float64{0, 1e-4} {
			cfg := policy.DefaultConfig()
			cfg.NoiseFloor = floor
			for _, mode := range Modes() {
				t.Run(fmt.Sprintf("%s/floor=%g/%s", name, floor, mode), func(t *testing.T) {
					e := newEngine(t, m, WithMode(mode), WithWidth(4), WithPolicy(cfg))
					_, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 8})
					if !errors.Is(err, ErrNonFinite) {
						t.Fatalf("error %v, want ErrNonFinite", err)
					}
					if n := e.Cache().Stats().BlocksInUse; n != 0 {
						t.Errorf("%d KV blocks still in use", n)
					}
				})
			}
		}
	}
}
