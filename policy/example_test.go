package policy_test

import (
	"fmt"
	"math"

	"github.com/entropix-search/entropix-search/policy"
)

func ExampleLogitEntropy() {
	h, v := policy.LogitEntropy([]float32{2, 1, 0, -1})
	fmt.Printf("H=%.6f bits V=%.6f bits²\n", h, v)
	fmt.Println(policy.EntropixV1.Classify(h, v))
	// Output:
	// H=1.367007 bits V=1.283344 bits²
	// adaptive
}

func ExampleDecider() {
	cfg := policy.DefaultConfig()
	cfg.Mode = policy.Search
	cfg.Clarify = []int{7, 8} // the model's tokens for policy.DefaultClarifyText
	tr, err := policy.NewDecider(cfg, 42, 0)
	if err != nil {
		panic(err)
	}
	// Three options and a long tail: low entropy, high varentropy.
	logits := make([]float32, 1003)
	for i := range logits {
		logits[i] = float32(math.Log(1e-4))
	}
	logits[0], logits[1], logits[2] = float32(math.Log(.4)), float32(math.Log(.3)), float32(math.Log(.2))

	d, err := tr.Decide(policy.Step{Logits: logits, Budget: 4})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Quadrant, d.Action, len(d.Candidates))
	for _, c := range d.Candidates {
		child := tr.Split(uint64(c.Token)) // each branch its own state
		child.Accept(c.Token)
		fmt.Printf("branch %d p=%.2f\n", c.Token, math.Exp(c.LogProb))
	}
	// Output:
	// LEHV branch 3
	// branch 0 p=0.40
	// branch 1 p=0.30
	// branch 2 p=0.20
}

func ExampleChain() {
	chain := policy.NewChain(
		&policy.Penalties{Repeat: 1.1},
		policy.Temperature(0.8),
		policy.MinP(0.05),
		policy.TopK(40),
		policy.TopP(0.95),
		policy.NewDist(1, 0),
	)
	var c policy.Candidates
	logits := []float32{5, 1, 0.5, -3}
	tok := chain.Sample(&c, logits)
	chain.Accept(tok)
	fmt.Println(tok, c.Len())
	// Output:
	// 0 1
}
