package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func newDecider(t testing.TB, cfg Config) *Decider {
	t.Helper()
	tr, err := NewDecider(cfg, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func decide(t testing.TB, tr *Decider, s Step) Decision {
	t.Helper()
	d, err := tr.Decide(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Rows in each quadrant of entropix-v1.
var (
	rowLELV = []float32{10, 0, 0, 0}
	rowHELV = make([]float32, 64) // uniform: H = 6, V = 0
	rowLEHV = headAndTail(.8, 1023)
	rowHEHV = headAndTail(.5, 1023)
	rowMid  = logs(.5, .25, .25)
)

func TestTrunkQuadrantActions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clarify = []int{5, 6}
	tr := newDecider(t, cfg)
	cases := []struct {
		row    []float32
		q      Quadrant
		action Action
	}{
		{rowLELV, LELV, Greedy},
		{rowHELV, HELV, Clarify},
		{rowLEHV, LEHV, Sample},
		{rowHEHV, HEHV, Resample},
		{rowMid, Adaptive, MultiSample},
	}
	for _, c := range cases {
		d := decide(t, tr, Step{Logits: c.row, Attention: []Attention{attentionExample()}, Budget: 4})
		if d.Quadrant != c.q || d.Action != c.action {
			t.Errorf("%v row: %v / %v, want %v / %v", c.q, d.Quadrant, d.Action, c.q, c.action)
		}
		if d.Token < 0 || d.Token >= len(c.row) {
			t.Errorf("%v: token %d", c.q, d.Token)
		}
		if want := st(c.row).logProb(c.row[d.Token]); !near(d.LogProb, want, 1e-9) || !near(d.Score, d.LogProb+d.Confidence, 1e-12) {
			t.Errorf("%v: logprob %v score %v confidence %v", c.q, d.LogProb, d.Score, d.Confidence)
		}
		if !strings.Contains(d.String(), c.q.String()) || !strings.Contains(d.String(), c.action.String()) {
			t.Errorf("String %q lacks the reason", d)
		}
	}
}

func st(logits []float32) *rowStats { s := measureLogits(logits, 0); return &s }

func TestTrunkGreedyAndParams(t *testing.T) {
	tr := newDecider(t, DefaultConfig())
	d := decide(t, tr, Step{Logits: []float32{0, 0, 20, 0, 0}})
	if d.Action != Greedy || d.Token != 2 {
		t.Errorf("LELV: %v", d)
	}
	att := []Attention{attentionExample()}
	d = decide(t, tr, Step{Logits: rowMid, Attention: att})
	want := AdaptiveParams(exampleMetrics(t), DefaultParams())
	if d.Params != want || d.Samples != 5 {
		t.Errorf("adaptive: params %+v samples %d, want %+v, 5", d.Params, d.Samples, want)
	}
	d = decide(t, tr, Step{Logits: rowLEHV, Attention: att})
	if d.Params.TopK != 39 || !near(d.Params.Temperature, 0.955002, 1e-6) {
		t.Errorf("LEHV single-path params %+v", d.Params)
	}
	d = decide(t, tr, Step{Logits: rowHEHV, Attention: att})
	if d.Params.Temperature != 2 || !near(d.Params.TopP, 0.525, 1e-6) {
		t.Errorf("HEHV params %+v", d.Params)
	}
}

func TestTrunkClarifyCooldown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clarify = []int{5, 6}
	cfg.ClarifyCooldown = 4
	tr := newDecider(t, cfg)
	d := decide(t, tr, Step{Logits: rowHELV})
	if d.Action != Clarify || d.Token != 5 || len(d.Tokens) != 2 {
		t.Fatalf("first HELV: %v", d)
	}
	for _, tok := range d.Tokens {
		tr.Accept(tok)
	}
	// Cooling down: sample hotter. (The row after the insertion is surer,
	// H = 5 bits against 6: the insertion helped, more may follow.)
	d = decide(t, tr, Step{Logits: uniformOver(64, 32)})
	if d.Action != Sample || d.Params.Temperature <= cfg.Base.Temperature {
		t.Fatalf("during cooldown: %v", d)
	}
	tr.Accept(d.Token)
	tr.Accept(1)
	d = decide(t, tr, Step{Logits: rowHELV})
	if d.Action != Clarify {
		t.Fatalf("after %d tokens: %v", cfg.ClarifyCooldown, d)
	}
	// No clarify text: always sample.
	tr = newDecider(t, DefaultConfig())
	if d := decide(t, tr, Step{Logits: rowHELV}); d.Action != Sample {
		t.Errorf("no clarify text: %v", d)
	}
	// Clarify ids must fit the vocabulary.
	cfg.Clarify = []int{100}
	tr = newDecider(t, cfg)
	if _, err := tr.Decide(Step{Logits: rowHELV}); err == nil {
		t.Error("clarify id outside the vocabulary accepted")
	}
}

// uniformOver is a row of n logits whose first k tokens are equally likely
// and the others masked: H = log2(k) bits, V = 0 (HELV for k >= 16).
func uniformOver(n, k int) []float32 {
	row := make([]float32, n)
	for i := k; i < n; i++ {
		row[i] = float32(math.Inf(-1))
	}
	return row
}

// TestClarifyGuard: the clarify text goes in only where the model gives
// its first token p >= ClarifyMinP, never again on a path after an
// insertion that left the model as unsure, and at most MaxClarifies times
// a path; in both modes.
func TestClarifyGuard(t *testing.T) {
	for _, mode := range []DecideMode{SinglePath, Search} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode = mode
			cfg.Clarify = []int{40, 41} // outside the 32 likely tokens of a row
			cfg.ClarifyCooldown = 2
			noClarify := Sample
			if mode == Search {
				noClarify = Greedy // uniformly unsure is no fork
			}
			// Unreadable: p(40) = e^-30 relative to the likely tokens.
			row := uniformOver(64, 32)
			row[40] = -30
			tr := newDecider(t, cfg)
			if d := decide(t, tr, Step{Logits: row}); d.Action != noClarify {
				t.Fatalf("clarify text of p %.2g inserted: %v", math.Exp(-30)/32, d)
			}
			// Readable: the clarify token as likely as the others.
			readable := uniformOver(64, 32)
			readable[40] = 0
			if d := decide(t, tr, Step{Logits: readable}); d.Action != Clarify {
				t.Fatalf("a likely clarify text not inserted: %v", d)
			}
			tr.Accept(40)
			tr.Accept(41)
			// The row after it is as unsure (H 5.04 bits, then 5): it did
			// not help, so no more on this path, cooldown or not.
			if d := decide(t, tr, Step{Logits: readable}); d.Action != noClarify {
				t.Fatalf("row after the insertion: %v", d)
			}
			for range 5 {
				tr.Accept(1)
				if d := decide(t, tr, Step{Logits: readable}); d.Action == Clarify {
					t.Fatalf("clarify again after an insertion that did not help: %v", d)
				}
			}
			// Helping insertions go on up to MaxClarifies.
			cfg.MaxClarifies = 2
			tr = newDecider(t, cfg)
			n := 0
			for range 12 {
				d := decide(t, tr, Step{Logits: readable})
				if d.Action == Clarify {
					n++
					tr.Accept(40)
					tr.Accept(41)
					// Surer afterwards: 16 likely tokens instead of 33.
					decide(t, tr, Step{Logits: uniformOver(64, 16)})
				}
				tr.Accept(1)
			}
			if n != cfg.MaxClarifies {
				t.Errorf("%d insertions on a path, want %d", n, cfg.MaxClarifies)
			}
			// A clone carries the path's count.
			if d := decide(t, tr.Clone(), Step{Logits: readable}); d.Action == Clarify {
				t.Errorf("a clone of a path past MaxClarifies inserted: %v", d)
			}
		})
	}
}

func TestTrunkSearchBranch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = Search
	tr := newDecider(t, cfg)
	ps := []float64{.4, .3, .2}
	for range 1000 {
		ps = append(ps, 1e-4)
	}
	row := logs(ps...)
	d := decide(t, tr, Step{Logits: row, Budget: 8})
	if d.Quadrant != LEHV || d.Action != Branch || d.Token != -1 {
		t.Fatalf("search LEHV: %v", d)
	}
	if len(d.Candidates) != 3 || d.Candidates[0].Token != 0 || d.Candidates[1].Token != 1 {
		t.Errorf("candidates %+v", d.Candidates)
	}
	if s := d.CandidateScore(d.Candidates[1]); !near(s.LogProb, math.Log(.3), 1e-6) || s.Confidence != d.Confidence {
		t.Errorf("candidate score %+v", s)
	}
	// Budget below 2: no fork, and search mode does not sample.
	if d := decide(t, tr, Step{Logits: row, Budget: 1}); d.Action != Greedy || d.Token != 0 {
		t.Errorf("no budget: %v", d)
	}
	// A runner-up below the min-p cut is no fork.
	if d := decide(t, tr, Step{Logits: headAndTail(.8, 1023), Budget: 8}); d.Action != Greedy || d.Token != 0 {
		t.Errorf("head and tail: %v", d)
	}
}

func TestTrunkBackspace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = Search
	cfg.MaxBackspaces = 2
	tr := newDecider(t, cfg)
	tr.Prime([]int{1, 2, 3})
	// Nothing generated yet: cannot backspace into the prompt.
	if d := decide(t, tr, Step{Logits: rowHEHV, PrevLogProb: math.Log(.1)}); d.Action != Greedy {
		t.Fatalf("HEHV at the start: %v", d)
	}
	prev := []float32{0, 8, 7.9, 0} // the row that chose token 1, p ≈ 0.5
	tr.Accept(1)
	// A confident token is not taken back.
	if d := decide(t, tr, Step{Logits: rowHEHV, PrevLogProb: math.Log(.9)}); d.Action == Backspace {
		t.Fatalf("HEHV after a confident token: %v", d)
	}
	d := decide(t, tr, Step{Logits: rowHEHV, PrevLogProb: math.Log(.45)})
	if d.Action != Backspace || d.Token != -1 {
		t.Fatalf("HEHV: %v", d)
	}
	tr.Rewind(1)
	for range 20 { // whatever the quadrant, token 1 is not chosen again
		c := tr.Clone()
		c.ban = 1
		if d := decide(t, c, Step{Logits: prev}); d.Token == 1 || d.Action == Backspace {
			t.Fatalf("re-choice: %v", d)
		}
	}
	d = decide(t, tr, Step{Logits: prev})
	if d.Token == 1 {
		t.Fatalf("re-choice picked the banned token: %v", d)
	}
	tr.Accept(d.Token)
	if d := decide(t, tr, Step{Logits: rowHEHV, PrevLogProb: math.Log(.45)}); d.Action != Backspace {
		t.Fatalf("second backspace: %v", d)
	}
	tr.Rewind(d.Token)
	tr.Accept(d.Token)
	if d := decide(t, tr, Step{Logits: rowHEHV, PrevLogProb: math.Log(.45)}); d.Action == Backspace {
		t.Fatalf("past MaxBackspaces: %v", d)
	}
	// Rewind also takes the token out of the penalty history.
	cfg.Penalties = Penalties{Presence: 50}
	tr = newDecider(t, cfg)
	tr.Accept(2)
	tr.Rewind(2)
	if len(tr.pen.hist) != 0 {
		t.Errorf("history after rewind: %v", tr.pen.hist)
	}
}

// TestTrunkCloneAndDeterminism: the same seed gives the same decisions; a
// clone continues identically and independently; Split diverges.
func TestTrunkCloneAndDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	rows := make([][]float32, 40)
	for i := range rows {
		rows[i] = randomLogits(r, 300)
	}
	run := func(tr *Decider) []int {
		var out []int
		for _, row := range rows {
			d := decide(t, tr, Step{Logits: row})
			out = append(out, d.Token)
			tr.Accept(d.Token)
		}
		return out
	}
	cfg := DefaultConfig()
	cfg.Penalties = Penalties{Repeat: 1.3}
	a, b := newDecider(t, cfg), newDecider(t, cfg)
	ta, tb := run(a), run(b)
	if fmt.Sprint(ta) != fmt.Sprint(tb) {
		t.Fatal("same seed, different decisions")
	}
	s := a.Split(7) // advances a's generator by one draw
	c := a.Clone()
	tc, tA, tS := run(c), run(a), run(s)
	if fmt.Sprint(tc) != fmt.Sprint(tA) {
		t.Error("clone diverged from its parent on the same rows")
	}
	if fmt.Sprint(tS) == fmt.Sprint(tA) {
		t.Error("split stream replays the parent")
	}
	a.Reset()
	if fmt.Sprint(run(a)) != fmt.Sprint(ta) {
		t.Error("Reset does not replay the sequence")
	}
}

func TestTrunkErrors(t *testing.T) {
	tr := newDecider(t, DefaultConfig())
	nan := float32(math.NaN())
	ninf := float32(math.Inf(-1))
	bad := []Step{
		{},
		{Logits: []float32{0, nan}},
		{Logits: []float32{ninf, ninf}},
		{Logits: []float32{1, 2}, Attention: []Attention{{Heads: 2, Len: 3, Scores: make([]float32, 5)}}},
	}
	for _, s := range bad {
		if d, err := tr.Decide(s); err == nil {
			t.Errorf("%+v: no error, %v", s, d)
		}
	}
	cfgs := []func(*Config){
		func(c *Config) { c.Base.TopP = 0 },
		func(c *Config) { c.AdaptiveSamples = 0 },
		func(c *Config) { c.Clarify = []int{-1} },
		func(c *Config) { c.Thresholds.LowEntropy = -1 },
		func(c *Config) { c.Fork.MaxWidth = 1 },
		func(c *Config) { c.NoiseFloor = 2 },
		func(c *Config) { c.Penalties.Repeat = math.Inf(1) },
		func(c *Config) { c.Mode = 9 },
	}
	for i, f := range cfgs {
		cfg := DefaultConfig()
		f(&cfg)
		if _, err := NewDecider(cfg, 0, 0); err == nil {
			t.Errorf("config %d validated", i)
		}
	}
}

func TestTrunkNoAlloc(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = Search
	cfg.Penalties = Penalties{Frequency: 0.1}
	tr := newDecider(t, cfg)
	att := []Attention{attentionExample()}
	rows := [][]float32{randomLogits(rand.New(rand.NewPCG(1, 1)), 32000), rowLEHV, rowHEHV, rowMid, rowHELV}
	for _, row := range rows {
		decide(t, tr, Step{Logits: row, Attention: att, Budget: 4}) // grow scratch
	}
	for _, row := range rows {
		allocs := testing.AllocsPerRun(10, func() {
			d, err := tr.Decide(Step{Logits: row, Attention: att, Budget: 4})
			if err != nil {
				t.Fatal(err)
			}
			tr.Accept(max(d.Token, 0))
		})
		if allocs != 0 {
			t.Errorf("Decide on a %d-token row allocates %v times", len(row), allocs)
		}
	}
}

// TestJSON: decisions and configurations travel as JSON (the tree shows
// decisions; the command line loads configurations).
func TestJSON(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = Search
	cfg.Clarify = []int{4, 5}
	cfg.Penalties = Penalties{Window: 32, Repeat: 1.1}
	tr := newDecider(t, cfg)
	d := decide(t, tr, Step{Logits: logs(.45, .3, .2, .05), Budget: 3, Attention: []Attention{attentionExample()}})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"action":"branch"`, `"quadrant":"adaptive"`, `"candidates":[{"token":0`, `"attention":{"entropy":1.875`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("decision JSON %s lacks %s", b, want)
		}
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil || back.Action != Branch || back.Quadrant != Adaptive {
		t.Errorf("decision round trip: %+v, %v", back, err)
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cfg2 Config
	if err := json.Unmarshal(cb, &cfg2); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg2) != fmt.Sprint(cfg) {
		t.Errorf("config round trip:\n%+v\n%+v", cfg2, cfg)
	}
}

func TestModeText(t *testing.T) {
	var m DecideMode
	if err := m.UnmarshalText([]byte("search")); err != nil || m != Search {
		t.Errorf("%v %v", m, err)
	}
	if m.UnmarshalText([]byte("beam")) == nil {
		t.Error("unknown mode accepted")
	}
	if b, _ := Branch.MarshalText(); string(b) != "branch" {
		t.Errorf("%s", b)
	}
}

// BenchmarkDecide is the full trunk decision per row, one row per op, in
// the policy's two modes:
//
//	single/greedy    a peaked row: LELV, argmax
//	single/adaptive  three options over a far tail: five adaptive draws
//	single/sample    p0 = .8 and a tail: LEHV, one draw
//	single/flat      a uniform row: HELV, one draw over the whole
//	                 vocabulary (the samplers' worst case: every token
//	                 passes min-p)
//	search/branch    three options over a far tail: a fork into three
//	search/flat      a uniform row: a fork into the budget's four
//	search/lm+attn   a random language-model-like row plus the last
//	                 layer's attention (32 heads x 1024 positions)
func BenchmarkDecide(b *testing.B) {
	att := []Attention{randomAttention(rand.New(rand.NewPCG(7, 8)), 32, 1024)}
	for _, n := range vocabs {
		peaked := make([]float32, n)
		peaked[3] = 40
		options := make([]float32, n)
		for i := range options {
			options[i] = -40
		}
		copy(options, logs(.5, .25, .25))
		cases := []struct {
			name string
			mode DecideMode
			row  []float32
			att  []Attention
			want Action
		}{
			{"single/greedy", SinglePath, peaked, nil, Greedy},
			{"single/adaptive", SinglePath, options, nil, MultiSample},
			{"single/sample", SinglePath, headAndTail(.8, n-1), nil, Sample},
			{"single/flat", SinglePath, make([]float32, n), nil, Sample},
			{"search/branch", Search, options, nil, Branch},
			{"search/flat", Search, make([]float32, n), nil, Branch},
			{"search/lm+attn", Search, randomLogits(rand.New(rand.NewPCG(5, 6)), n), att, 0},
		}
		for _, c := range cases {
			cfg := DefaultConfig()
			cfg.Mode = c.mode
			tr := newDecider(b, cfg)
			b.Run(fmt.Sprintf("vocab=%d/%s", n, c.name), func(b *testing.B) {
				d := decide(b, tr, Step{Logits: c.row, Attention: c.att, Budget: 4})
				if c.want != 0 && d.Action != c.want {
					b.Fatalf("row decides %v, want %v", d, c.want)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tr.Decide(Step{Logits: c.row, Attention: c.att, Budget: 4}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
