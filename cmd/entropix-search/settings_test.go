package main

import (
	"io"
	"reflect"
	"testing"

	"github.com/entropix-search/entropix-search/cmd/internal/serve"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/policy"
)

// cliSettings are the settings the command line's flags give.
func cliSettings(t *testing.T, args ...string) engine.Settings {
	t.Helper()
	c, err := parse(append([]string{"-m", "x.gguf", "-p", "x"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.seed = uint64(c.seedFlag)
	pf, err := effectivePolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return c.settings(pf)
}

// TestCLIAndServerSettings checks that the command line's flags and the
// server's request fields give the same search settings, and so the same
// engine options and budget.
func TestCLIAndServerSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		body string
	}{
		{[]string{"--seed", "0"}, `{"prompt": "x"}`},
		{[]string{"--seed", "7", "-n", "64", "--temp", "0.5", "--top-p", "0.9", "--stop", `\n\n`, "-r", "Question:",
			"--self-consistency", "4", "--budget-rows", "300", "--max-width", "6", "--score", "margin"},
			`{"prompt": "x", "seed": 7, "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "stop": ["\n\n", "Question:"],
			  "entropix": {"mode": "self-consistency", "budget_rows": 300, "max_width": 6, "score": "margin"}}`},
		{[]string{"--seed", "1", "--greedy", "--n-probs", "3"}, `{"prompt": "x", "seed": 1, "logprobs": 3, "entropix": {"mode": "greedy"}}`},
		{[]string{"--seed", "2", "--beam-adaptive", "--max-width", "8"}, `{"prompt": "x", "seed": 2, "entropix": {"mode": "beam-adaptive", "max_width": 8}}`},
	} {
		cli := cliSettings(t, c.args...)
		srv, err := serve.CompletionSettings([]byte(c.body), policy.DefaultFile())
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if !reflect.DeepEqual(cli, srv) {
			t.Errorf("%v and %s give different settings:\n cli %+v\n srv %+v", c.args, c.body, cli, srv)
			continue
		}
		apply := func(st engine.Settings) engine.Options {
			var o engine.Options
			for _, f := range st.Options() {
				f(&o)
			}
			return o
		}
		oc, os := apply(cli), apply(srv)
		if (oc.Answer == nil) != (os.Answer == nil) || reflect.ValueOf(oc.Answer).Pointer() != reflect.ValueOf(os.Answer).Pointer() {
			t.Errorf("%v: different answer readers", c.args)
		}
		oc.Answer, os.Answer = nil, nil
		if !reflect.DeepEqual(oc, os) || cli.Budget() != srv.Budget() {
			t.Errorf("%v: different options or budgets", c.args)
		}
	}
}
