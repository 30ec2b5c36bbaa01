package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/policy/rowstat"
)

// scripted is a model.Backend with no model behind it: the logits of a row
// are a fixed function of the row's position and token (scriptLogits), and
// its attention is uniform. It drives the engine through the seam alone:
// the block manager's appends, forks and frees, the copies it queues, the
// Output's logits rows and attention, as a GPU backend would see them.
type scripted struct {
	vocab, heads, eos int
	kv                *kvcache.Pool
	out               model.Output
	ctx               int
	passes, rows      int
	copied            int // copies on write the manager queued
	copies            []kvcache.Copy
	closes            int // Close calls

	// As a GPU backend: with statsK > 0 the Output holds every row's
	// statistics with the top statsK (exact: model.RowStatsOf; else the
	// sums the CPU's policy takes, so that the decisions are the same to
	// the bit), and its rows are fetched on first use from the backend's
	// own two buffers (this step's and the last one's), fetches counting
	// them. confident makes every row's favourite sure.
	statsK    int
	exact     bool
	confident bool
	dev       [2][]float32
	fetches   int
}

func init() {
	model.RegisterBackend("scripted", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
		kv, err := m.NewCache(c.Tokens, c.BlockSize, c.DType)
		if err != nil {
			return nil, err
		}
		b := &scripted{vocab: m.Config.Vocab, heads: m.Config.Heads, eos: m.Tokenizer.EOS(), kv: kv, ctx: m.Config.ContextLen}
		lastScripted = b
		madeScripted = append(madeScripted, b)
		return b, nil
	})
}

// lastScripted is the backend the last engine made (the tests run one
// engine at a time), madeScripted every one made, in order.
var (
	lastScripted *scripted
	madeScripted []*scripted
)

func (b *scripted) Cache() *kvcache.Pool { return b.kv }
func (b *scripted) Close() error         { b.closes++; return nil }

func (b *scripted) Forward(rows []model.Row, attnLayers ...int) (*model.Output, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var err error
	b.out.Pos, err = model.AppendRows(b.kv, rows, b.ctx, b.out.Pos)
	b.copies = b.kv.TakeCopies(b.copies[:0]) // nothing to copy: no storage
	b.copied += len(b.copies)
	if err != nil {
		return nil, err
	}
	b.passes++
	b.rows += len(rows)
	b.out.Prepare(rows, b.vocab, b.heads, attnLayers)
	logits := b.out.LogitsBuffer()
	if b.statsK > 0 { // the rows stay "on the device"
		b.dev[0], b.dev[1] = b.dev[1], slices.Grow(b.dev[0][:0], len(logits))[:len(logits)]
		logits = b.dev[1]
	}
	nl := 0
	for i, row := range rows {
		if row.NoLogits {
			continue
		}
		scriptLogits(logits[nl*b.vocab:(nl+1)*b.vocab], b.out.Pos[i], row.Token, b.eos)
		if b.confident {
			l := logits[nl*b.vocab : (nl+1)*b.vocab]
			l[slices.Index(l, slices.Max(l))] += 12
		}
		nl++
		for l := range attnLayers {
			off := b.out.AttentionOffset(i, l)
			n := b.out.Pos[i] + 1
			att := b.out.AttentionBuffer()[off : off+2*b.heads*n]
			for j := range att[:b.heads*n] {
				att[j] = 0 // scores
			}
			for j := range att[b.heads*n:] {
				att[b.heads*n+j] = 1 / float32(n) // probabilities
			}
		}
	}
	if b.statsK > 0 {
		b.fillStats(logits)
	}
	return &b.out, nil
}

// fillStats gives the step's statistics of its rows, logits, and fetches
// the rows from there on first use.
func (b *scripted) fillStats(logits []float32) {
	stats := b.out.StatsBuffer(b.statsK)
	for i := range stats {
		st := &stats[i]
		row := logits[i*b.vocab : (i+1)*b.vocab]
		if b.exact {
			model.RowStatsOf(row, b.statsK, st)
			continue
		}
		st.Max, st.Arg, st.Second = rowstat.Top2(row)
		st.Z, st.A, st.B = rowstat.LogitMoments(row, st.Max)
		st.NonFinite = !rowstat.Finite(row)
		for j, t := range policy.TopTokens(row, b.statsK, -1, nil) {
			st.Top[j], st.TopLogits[j] = int32(t), row[t]
		}
	}
	b.out.FetchLogits(func(i int, dst []float32) {
		b.fetches++
		copy(dst, logits[i*b.vocab:(i+1)*b.vocab])
	})
}

// scriptLogits writes the script's logits for token tok at position pos:
// mostly a clear favourite among a few candidates, every fifth position a
// near tie among several (where the branching modes fork), and the end of
// text likely from position 40.
func scriptLogits(out []float32, pos, tok, eos int) {
	h := uint64(pos)*0x9e3779b97f4a7c15 ^ uint64(tok)*0xbf58476d1ce4e5b9
	next := func() uint64 {
		h ^= h >> 31
		h *= 0x94d049bb133111eb
		h ^= h >> 29
		return h
	}
	for j := range out {
		out[j] = -8 - float32(next()%1000)/1000
	}
	cands, spread := 3, float32(4)
	if pos%5 == 0 {
		cands, spread = 8, 0.5
	}
	for c := range cands {
		j := 3 + int(next()%uint64(len(out)-3)) // not BOS/EOS/unknown
		out[j] = spread * float32(cands-c) / float32(cands)
	}
	if pos >= 40 {
		out[eos] = spread + 1
	}
}

// TestScriptedBackendEveryMode runs every mode over the scripted backend:
// each finishes, frees every block, and gives the same result twice;
// greedy follows the script's argmax exactly.
func TestScriptedBackendEveryMode(t *testing.T) {
	m := loadStories(t)
	prompt := "Once upon a time"
	for mode := range Mode(len(modeNames)) {
		t.Run(mode.String(), func(t *testing.T) {
			var texts []string
			for range 2 {
				e := newEngine(t, m, WithBackend("scripted"), WithMode(mode), WithWidth(3), WithSeed(7))
				b := lastScripted
				res := runSearch(t, e, prompt, Budget{MaxTokens: 48})
				if b.passes == 0 || len(res.Tokens) == 0 || res.Tree == nil || res.Tree.Len() < 2 {
					t.Fatalf("%d passes, %d tokens, tree %v", b.passes, len(res.Tokens), res.Tree != nil)
				}
				if res.Stats.ForwardPasses != b.passes || res.Stats.Rows+res.Stats.PromptRows != b.rows {
					t.Errorf("stats %+v, backend %d passes of %d rows", res.Stats, b.passes, b.rows)
				}
				texts = append(texts, res.Text)
				if mode == Greedy {
					toks := m.Tokenizer.Encode(prompt, true)
					logits := make([]float32, m.Config.Vocab)
					var want []int
					for range res.Tokens {
						scriptLogits(logits, len(toks)-1, toks[len(toks)-1], m.Tokenizer.EOS())
						best := 0
						for j, f := range logits {
							if f > logits[best] {
								best = j
							}
						}
						want = append(want, best)
						toks = append(toks, best)
					}
					if !slices.Equal(res.Tokens, want) {
						t.Errorf("greedy tokens %v, the script's argmax %v", res.Tokens, want)
					}
				}
				t.Logf("%s: %d tokens, %d passes, %d rows, %d copies on write, %d nodes, stopped %q", mode, len(res.Tokens), b.passes, b.rows, b.copied, res.Tree.Len(), res.Stopped)
			}
			if texts[0] != texts[1] {
				t.Errorf("two runs differ: %q, %q", texts[0], texts[1])
			}
		})
	}
	if _, err := New(m, WithBackend("nonesuch")); err == nil {
		t.Error("an unregistered backend made an engine")
	}
}

// TestScriptedStatistics runs every mode over the scripted backend as a
// GPU backend would serve it (the rows' statistics, the rows fetched on
// first use): the result and the tree are those of the rows, byte for
// byte, and only the modes that draw fetch rows (and beam-adaptive where
// the policy must read a row: a clarify test, a loop's ban, a backspace).
func TestScriptedStatistics(t *testing.T) {
	m := loadStories(t)
	prompt := "Once upon a time"
	type run struct {
		name string
		opts []Option
		// confident makes every row sure; exact takes model.RowStatsOf's
		// float64 sums (then the tree must have the same nodes, whose
		// numbers agree to the sums' rounding).
		confident, exact bool
		// noFetch are the modes that read no row; the others read some.
		noFetch []Mode
		// event is a node reason or action that must be in
		// beam-adaptive's tree (the run's point).
		event string
	}
	// The script's rows are of two kinds: most with H = 1.02 bits, V =
	// 1.6 bits², the top token's p 0.75; every fifth a near tie, H = 3.1,
	// V = 1.6. Under clarifying, the ties are HELV and call for the
	// clarify text; under backspacing, they are HEHV and take back the
	// token before (a fork's min-p of 0.9 makes the other rows greedy).
	clarifying := policy.DefaultConfig()
	clarifying.ClarifyMinP = 0
	clarifying.Thresholds = policy.Thresholds{LowEntropy: 2, LowVarentropy: 2, HighEntropy: 2.5, HighVarentropy: 2, BranchEntropy: 2, LostEntropy: 2.5}
	backspacing := policy.DefaultConfig()
	backspacing.BackspaceBelow = 0.9
	backspacing.Fork.MinPHigh, backspacing.Fork.MinPLow = 0.9, 0.9
	backspacing.Thresholds = policy.Thresholds{LowEntropy: 0.5, LowVarentropy: 1, HighEntropy: 2.5, HighVarentropy: 1, BranchEntropy: 2, LostEntropy: 2.5}
	noDraw := []Mode{Greedy, Beam, CoTDecoding, BeamAdaptive}
	runs := []run{{name: "script", noFetch: noDraw, event: "branch"},
		{name: "confident", confident: true, noFetch: append(noDraw, Entropix), event: "greedy"},
		{name: "clarifying", opts: []Option{WithPolicy(clarifying)}, noFetch: noDraw[:3], event: "clarify"},
		{name: "backspacing", opts: []Option{WithPolicy(backspacing)}, noFetch: noDraw[:3], event: "backspace"},
		{name: "n-probs and group score", opts: []Option{WithTopProbs(5), WithScore(policy.ScoreGroup)}, noFetch: noDraw, event: "branch"},
		{name: "n-probs past the top", opts: []Option{WithTopProbs(80)}, event: "branch"},
		{name: "exact sums", exact: true, noFetch: noDraw, event: "branch"}}
	for _, r := range runs {
		for mode := range Mode(len(modeNames)) {
			search := func(statsK int) (*Result, int) {
				e := newEngine(t, m, append([]Option{WithBackend("scripted"), WithMode(mode), WithWidth(4), WithSeed(7)}, r.opts...)...)
				b := lastScripted
				b.statsK, b.exact, b.confident = statsK, r.exact, r.confident
				res := runSearch(t, e, prompt, Budget{MaxTokens: 48})
				res.Stats.Wall, res.Stats.ForwardTime = 0, 0
				return res, b.fetches
			}
			want, _ := search(0)
			got, fetches := search(64)
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			switch {
			case r.exact && treeShape(got) != treeShape(want):
				t.Errorf("%s, %s: the trees differ:\nstatistics %s\nrows       %s", r.name, mode, treeShape(got), treeShape(want))
			case !r.exact && string(gj) != string(wj):
				t.Errorf("%s, %s: the results differ:\nstatistics %s\nrows       %s", r.name, mode, gj, wj)
			}
			if (fetches == 0) != slices.Contains(r.noFetch, mode) {
				t.Errorf("%s, %s: %d rows fetched", r.name, mode, fetches)
			}
			if mode == BeamAdaptive && !strings.Contains(treeShape(got), " "+r.event+" ") {
				t.Errorf("%s, %s: no %s in the tree %s", r.name, mode, r.event, treeShape(got))
			}
			t.Logf("%s, %s: %d rows fetched, %d decided, %d tokens", r.name, mode, fetches, got.Stats.Rows+1, len(got.Tokens))
		}
	}
}

// treeShape is a result's text and its tree without the numbers: every
// node's parent, token, action, quadrant, status and place on the chosen
// path.
func treeShape(r *Result) string {
	b := []byte(r.Text + "|" + r.Stopped + "|")
	for id, n := range r.Tree.All() {
		b = fmt.Appendf(b, "%d<%d:%d %s %s %v %s %v;", id, n.Parent, n.Token, n.Action, n.Quadrant, n.Status, cmp.Or(n.Reason, "-"), n.Committed)
	}
	return string(b)
}
