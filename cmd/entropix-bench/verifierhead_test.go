package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/engine"
)

// TestFitVerifierHead draws labels from a known logistic model of the
// features and checks that the fit finds its weights back.
func TestFitVerifierHead(t *testing.T) {
	want := engine.VerifierHead{Verdict: 0.5, MinLogProb: 0.8, SumLogProb: 0.05, Bias: 1}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	fs := make([]engine.PathFeatures, n)
	ps := make([]bench.VerifierPath, n)
	w := make([]float64, n)
	for i := range fs {
		fs[i] = engine.PathFeatures{Verdict: r.NormFloat64() * 2, MinLogProb: -5 * r.Float64(), SumLogProb: -30 * r.Float64()}
		ps[i] = bench.VerifierPath{Problem: i, Right: r.Float64() < want.Prob(fs[i])}
		w[i] = 1
	}
	fs[0].Verdict = math.NaN() // left out
	got := fitVerifierHead(fs, ps, w)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"verdict", got.Verdict, want.Verdict}, {"least", got.MinLogProb, want.MinLogProb}, {"sum", got.SumLogProb, want.SumLogProb}, {"bias", got.Bias, want.Bias}} {
		if math.Abs(c.got-c.want) > 0.15*math.Abs(c.want)+0.05 {
			t.Errorf("%s weight %.3f, want %.3f", c.name, c.got, c.want)
		}
	}
}
