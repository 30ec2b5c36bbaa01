package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
)

// AgreeConfig says what CompareBackends runs. The zero value of a field
// means its default (DefaultAgreeConfig).
type AgreeConfig struct {
	Prompt    int `json:"prompt"`     // tokens of the prefill, one Forward with logits at every position
	Decode    int `json:"decode"`     // tokens fed next, one Forward of one row each
	Branches  int `json:"branches"`   // forks of that sequence, stepped twice in one batch
	Greedy    int `json:"greedy"`     // tokens each backend then chooses greedily on its own
	TopK      int `json:"top_k"`      // the top-K tokens whose overlap is counted
	BlockSize int `json:"block_size"` // KV cache block size
	// KVType is the KV cache's element type, the same for both backends.
	KVType kvcache.ElemType `json:"kv_type"`
	Seed   uint64           `json:"seed"` // of the token stream
}

// DefaultAgreeConfig is the comparison the GPU check runs.
func DefaultAgreeConfig() AgreeConfig {
	return AgreeConfig{Prompt: 64, Decode: 32, Branches: 16, Greedy: 32, TopK: 10, BlockSize: kvcache.DefaultBlockSize, Seed: 1}
}

func (c AgreeConfig) withDefaults() AgreeConfig {
	d := DefaultAgreeConfig()
	set := func(x *int, def int) {
		if *x <= 0 {
			*x = def
		}
	}
	set(&c.Prompt, d.Prompt)
	set(&c.Decode, d.Decode)
	set(&c.Branches, d.Branches)
	set(&c.Greedy, d.Greedy)
	set(&c.TopK, d.TopK)
	set(&c.BlockSize, d.BlockSize)
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	return c
}

// PhaseAgreement is how far backend B's logits are from backend A's over
// the rows of one phase of the comparison. The relative error of a row is
// its largest absolute difference over the largest magnitude of A's row
// (elementwise ratios blow up at logits near zero). Entropy and
// varentropy are of the softmax of each row, in nats (nats squared).
type PhaseAgreement struct {
	Phase string `json:"phase"` // "prefill", "decode" or "branches"
	Rows  int    `json:"rows"`
	// MaxAbs and MeanAbs are over every logit of every row.
	MaxAbs  float64 `json:"max_abs"`
	MeanAbs float64 `json:"mean_abs"`
	// MaxRel and MeanRel are over the rows' relative errors.
	MaxRel  float64 `json:"max_rel"`
	MeanRel float64 `json:"mean_rel"`
	// Entropy and varentropy: |B - A| per row, largest and mean.
	MaxEntropy     float64 `json:"max_entropy"`
	MeanEntropy    float64 `json:"mean_entropy"`
	MaxVarentropy  float64 `json:"max_varentropy"`
	MeanVarentropy float64 `json:"mean_varentropy"`
	// MinTopK and MeanTopK are the shares of A's top-K tokens among B's.
	MinTopK  float64 `json:"min_topk"`
	MeanTopK float64 `json:"mean_topk"`
	// Argmax is the share of rows whose most likely token is the same.
	Argmax float64 `json:"argmax"`
	// NonFinite counts the rows where either side had a NaN or an
	// infinite logit: left out of the figures above.
	NonFinite int `json:"non_finite,omitempty"`

	sumAbs             float64
	logits             int64
	sumRel, sumH, sumV float64
	sumTop             float64
	sameArgmax         int
}

// add accounts one row pair.
func (p *PhaseAgreement) add(a, b []float32, k int) {
	if !finite(a) || !finite(b) {
		p.NonFinite++
		return
	}
	if p.Rows == 0 {
		p.MinTopK = 1
	}
	p.Rows++
	var maxAbs, maxA float64
	for i := range a {
		d := math.Abs(float64(b[i]) - float64(a[i]))
		maxAbs = max(maxAbs, d)
		maxA = max(maxA, math.Abs(float64(a[i])))
		p.sumAbs += d
	}
	p.logits += int64(len(a))
	p.MaxAbs = max(p.MaxAbs, maxAbs)
	rel := maxAbs / max(maxA, 1e-30)
	p.MaxRel = max(p.MaxRel, rel)
	p.sumRel += rel
	ha, va := EntropyVarentropy(a)
	hb, vb := EntropyVarentropy(b)
	dh, dv := math.Abs(hb-ha), math.Abs(vb-va)
	p.MaxEntropy, p.MaxVarentropy = max(p.MaxEntropy, dh), max(p.MaxVarentropy, dv)
	p.sumH += dh
	p.sumV += dv
	ta, tb := TopK(a, k), TopK(b, k)
	common := 0
	for _, t := range ta {
		if slices.Contains(tb, t) {
			common++
		}
	}
	share := float64(common) / float64(max(len(ta), 1))
	p.MinTopK = min(p.MinTopK, share)
	p.sumTop += share
	if len(ta) > 0 && len(tb) > 0 && ta[0] == tb[0] {
		p.sameArgmax++
	}
	n := float64(p.Rows)
	p.MeanAbs = p.sumAbs / float64(p.logits)
	p.MeanRel, p.MeanEntropy, p.MeanVarentropy = p.sumRel/n, p.sumH/n, p.sumV/n
	p.MeanTopK, p.Argmax = p.sumTop/n, float64(p.sameArgmax)/n
}

// finite reports whether every value of x is a number.
func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// GreedyAgreement compares the tokens two backends choose greedily, each
// on its own, from the same prompt.
type GreedyAgreement struct {
	Steps int `json:"steps"`
	// Same is the number of leading tokens both chose alike (Steps when
	// all were).
	Same int `json:"same"`
	// MarginA and MarginB are, at the first token they chose apart, the
	// gap between the two largest logits of A and of B: a near tie (a gap
	// within the logits error) explains a divergence.
	MarginA float64 `json:"margin_a,omitempty"`
	MarginB float64 `json:"margin_b,omitempty"`
	TokensA []int   `json:"tokens_a"`
	TokensB []int   `json:"tokens_b"`
}

// StatsAgreement compares the row statistics a backend computes itself
// (model.Output.Stats: a GPU's, so that a row need not cross to the host)
// with model.RowStatsOf of the same backend's rows: the figures the search
// decides on against their definition.
type StatsAgreement struct {
	Rows int `json:"rows"` // rows that had statistics
	// MaxEntropy and MaxVarentropy are the largest differences of the
	// entropy and varentropy the statistics give; MaxNormalizer that of
	// log Σ exp(logit).
	MaxEntropy    float64 `json:"max_entropy"`
	MaxVarentropy float64 `json:"max_varentropy"`
	MaxNormalizer float64 `json:"max_normalizer"`
	// Argmax and TopK are the shares of rows with the same argmax, and the
	// same top tokens in the same order; K is the backend's.
	Argmax float64 `json:"argmax"`
	TopK   float64 `json:"topk"`
	K      int     `json:"k"`

	sameArg, sameTop int
}

// statsFigures returns the log-normalizer, entropy and varentropy a row's
// statistics give.
func statsFigures(s *model.RowStats) (logZ, h, v float64) {
	if s.Z <= 0 {
		return math.Inf(-1), 0, 0
	}
	a, b := s.A/s.Z, s.B/s.Z
	return float64(s.Max) + math.Log(s.Z), math.Log(s.Z) - a, b - a*a
}

// add accounts one row: got are the backend's statistics, row its logits.
func (s *StatsAgreement) add(got *model.RowStats, row []float32) {
	var want model.RowStats
	model.RowStatsOf(row, len(got.Top), &want)
	if want.NonFinite || got.NonFinite {
		return
	}
	s.Rows++
	s.K = max(s.K, len(got.Top))
	gz, gh, gv := statsFigures(got)
	wz, wh, wv := statsFigures(&want)
	s.MaxNormalizer = max(s.MaxNormalizer, math.Abs(gz-wz))
	s.MaxEntropy = max(s.MaxEntropy, math.Abs(gh-wh))
	s.MaxVarentropy = max(s.MaxVarentropy, math.Abs(gv-wv))
	if got.Arg == want.Arg {
		s.sameArg++
	}
	if slices.Equal(got.Top, want.Top) {
		s.sameTop++
	}
	s.Argmax, s.TopK = float64(s.sameArg)/float64(s.Rows), float64(s.sameTop)/float64(s.Rows)
}

// Agreement is the result of CompareBackends.
type Agreement struct {
	A      string           `json:"a"`
	B      string           `json:"b"`
	Config AgreeConfig      `json:"config"`
	Phases []PhaseAgreement `json:"phases"`
	Greedy GreedyAgreement  `json:"greedy"`
	// Stats compares B's own row statistics with its rows, when B gives
	// statistics (nil otherwise).
	Stats *StatsAgreement `json:"stats,omitempty"`
	// Attention compares the two backends' attention metrics of the last
	// layer over every phase's rows (nil when neither gave attention).
	Attention *AttentionAgreement `json:"attention,omitempty"`
}

// AttentionAgreement is how far backend B's attention metrics (entropix's:
// policy.AttentionMetrics of the last layer) are from A's, each as the
// largest |B - A| over |A| (at least 1e-3) over the rows.
type AttentionAgreement struct {
	Rows int `json:"rows"`
	// Sums says B gave the attention's sums (made where it computes, a
	// GPU: model.AttentionSums) rather than its scores and probabilities.
	Sums        bool    `json:"sums"`
	Entropy     float64 `json:"entropy"`
	Varentropy  float64 `json:"varentropy"`
	Agreement   float64 `json:"agreement"`
	Interaction float64 `json:"interaction"`
}

// attentionMetrics measures row r's attention in out's first layer asked
// for, from its sums or its scores and probabilities, and says whether
// out had it and which.
func attentionMetrics(out *model.Output, r int) (m policy.AttentionMetrics, ok, sums bool, err error) {
	if s, ok := out.AttentionSums(r, 0); ok {
		m, err = policy.MeasureAttentionSums(policy.AttentionSums{Heads: s.Heads, Len: s.Len, Entropy: s.Entropy, AbsScores: s.AbsScores, Disagreement: s.Disagreement})
		return m, true, true, err
	}
	a := out.Attention(r, 0)
	if a.Heads == 0 {
		return m, false, false, nil
	}
	m, err = policy.MeasureAttention(policy.Attention{Heads: a.Heads, Len: a.Len, Scores: a.Scores, Probs: a.Probs})
	return m, true, false, err
}

// add accounts one row's metrics on each side.
func (g *AttentionAgreement) add(a, b policy.AttentionMetrics) {
	rel := func(b, a float64) float64 { return math.Abs(b-a) / max(1e-3, math.Abs(a)) }
	g.Rows++
	g.Entropy = max(g.Entropy, rel(b.Entropy, a.Entropy))
	g.Varentropy = max(g.Varentropy, rel(b.Varentropy, a.Varentropy))
	g.Agreement = max(g.Agreement, rel(b.Agreement, a.Agreement))
	g.Interaction = max(g.Interaction, rel(b.Interaction, a.Interaction))
}

// EntropyVarentropy returns the entropy of softmax(logits) and the
// variance of its surprisal, in nats, computed in float64.
func EntropyVarentropy(logits []float32) (h, v float64) {
	if len(logits) == 0 {
		return 0, 0
	}
	mx := math.Inf(-1)
	for _, x := range logits {
		mx = max(mx, float64(x))
	}
	var z float64
	for _, x := range logits {
		z += math.Exp(float64(x) - mx)
	}
	logZ := mx + math.Log(z)
	var s1, s2 float64
	for _, x := range logits {
		lp := float64(x) - logZ
		p := math.Exp(lp)
		s1 += p * lp
		s2 += p * lp * lp
	}
	h = -s1
	return h, max(s2-s1*s1, 0)
}

// TopK returns the indices of the k largest logits, largest first (the
// lower index first among equals).
func TopK(logits []float32, k int) []int {
	k = min(k, len(logits))
	idx := make([]int, 0, k+1)
	for i, x := range logits {
		if len(idx) == k && !(x > logits[idx[k-1]]) {
			continue
		}
		j, _ := slices.BinarySearchFunc(idx, x, func(e int, x float32) int {
			// Descending; an equal value goes after the ones already there.
			if logits[e] >= x {
				return -1
			}
			return 1
		})
		idx = slices.Insert(idx, j, i)
		if len(idx) > k {
			idx = idx[:k]
		}
	}
	return idx
}

// margin returns the gap between the two largest logits.
func margin(logits []float32) float64 {
	t := TopK(logits, 2)
	if len(t) < 2 {
		return 0
	}
	return float64(logits[t[0]]) - float64(logits[t[1]])
}

// CompareBackends runs backends a and b (names model.RegisterBackend
// knows) on m over the same token stream and reports how far b's logits
// are from a's: a prefill of c.Prompt tokens with logits at every
// position; c.Decode tokens one row at a time; c.Branches forks of that
// sequence stepped twice in one batch (a partial block copied on write,
// the prefix shared); then each backend chooses c.Greedy tokens greedily
// on its own from the first 16 tokens of the stream.
func CompareBackends(m *model.Model, a, b string, c AgreeConfig) (*Agreement, error) {
	c = c.withDefaults()
	ctx := m.Config.ContextLen
	greedyPrompt := min(16, c.Prompt)
	if c.Prompt+c.Decode+2 > ctx || greedyPrompt+c.Greedy > ctx {
		return nil, fmt.Errorf("bench: compare: %d prompt + %d decode tokens, or %d + %d greedy ones, exceed the context of %d",
			c.Prompt, c.Decode, greedyPrompt, c.Greedy, ctx)
	}
	capacity := c.Prompt + c.Decode + c.Branches*(2+c.BlockSize) + greedyPrompt + c.Greedy + 2*c.BlockSize
	open := func(name string) (model.Backend, error) {
		be, err := model.NewBackend(name, m, model.CacheConfig{Tokens: capacity, BlockSize: c.BlockSize, DType: c.KVType})
		if err != nil {
			return nil, fmt.Errorf("bench: backend %s: %w", name, err)
		}
		return be, nil
	}
	ba, err := open(a)
	if err != nil {
		return nil, err
	}
	defer ba.Close()
	bb, err := open(b)
	if err != nil {
		return nil, err
	}
	defer bb.Close()
	rng := rand.New(rand.NewPCG(c.Seed, 4))
	stream := tokens(rng, c.Prompt+c.Decode, m.Config.Vocab)
	res := &Agreement{A: a, B: b, Config: c}
	var stats StatsAgreement
	var att AttentionAgreement
	attn := []int{m.Config.Layers - 1} // the layer the search asks for

	// both runs one step on each backend, the rows built per pool, and
	// accounts the logits of every row that has them.
	both := func(ph *PhaseAgreement, rows func(kv *kvcache.Pool, side int) []model.Row) error {
		ra := rows(ba.Cache(), 0)
		oa, err := ba.Forward(ra, attn...)
		if err != nil {
			return fmt.Errorf("bench: %s, %s: %w", ph.Phase, a, err)
		}
		la := make([][]float32, len(ra))
		for i := range ra {
			if l := oa.Logits(i); l != nil {
				la[i] = slices.Clone(l)
			}
		}
		rb := rows(bb.Cache(), 1)
		ob, err := bb.Forward(rb, attn...)
		if err != nil {
			return fmt.Errorf("bench: %s, %s: %w", ph.Phase, b, err)
		}
		for i := range rb {
			ma, oka, _, erra := attentionMetrics(oa, i)
			mb, okb, sums, errb := attentionMetrics(ob, i)
			if err := cmp.Or(erra, errb); err != nil {
				return fmt.Errorf("bench: %s, row %d: %w", ph.Phase, i, err)
			}
			if oka && okb {
				att.add(ma, mb)
				att.Sums = att.Sums || sums
			}
		}
		for i := range rb {
			lb := ob.Logits(i)
			if (la[i] == nil) != (lb == nil) {
				return fmt.Errorf("bench: %s, row %d: one backend gave logits, the other none", ph.Phase, i)
			}
			if lb == nil {
				continue
			}
			if len(lb) != len(la[i]) {
				return fmt.Errorf("bench: %s, row %d: %d logits against %d", ph.Phase, i, len(lb), len(la[i]))
			}
			ph.add(la[i], lb, c.TopK)
			if st := ob.Stats(i); st != nil {
				stats.add(st, lb)
			}
		}
		return nil
	}

	seqs := [2]*kvcache.Seq{ba.Cache().NewSeq(), bb.Cache().NewSeq()}
	pre := PhaseAgreement{Phase: "prefill"}
	if err := both(&pre, func(kv *kvcache.Pool, side int) []model.Row {
		rows := make([]model.Row, c.Prompt)
		for i, t := range stream[:c.Prompt] {
			rows[i] = model.Row{Seq: seqs[side], Token: t}
		}
		return rows
	}); err != nil {
		return nil, err
	}
	dec := PhaseAgreement{Phase: "decode"}
	for _, t := range stream[c.Prompt:] {
		if err := both(&dec, func(kv *kvcache.Pool, side int) []model.Row {
			return []model.Row{{Seq: seqs[side], Token: t}}
		}); err != nil {
			return nil, err
		}
	}
	br := PhaseAgreement{Phase: "branches"}
	forks := [2][]*kvcache.Seq{}
	for side, be := range []model.Backend{ba, bb} {
		for range c.Branches {
			forks[side] = append(forks[side], be.Cache().Fork(seqs[side]))
		}
	}
	for range 2 {
		toks := tokens(rng, c.Branches, m.Config.Vocab)
		if err := both(&br, func(kv *kvcache.Pool, side int) []model.Row {
			rows := make([]model.Row, c.Branches)
			for i, t := range toks {
				rows[i] = model.Row{Seq: forks[side][i], Token: t}
			}
			return rows
		}); err != nil {
			return nil, err
		}
	}
	for side, be := range []model.Backend{ba, bb} {
		for _, s := range forks[side] {
			be.Cache().Free(s)
		}
		be.Cache().Free(seqs[side])
	}
	res.Phases = []PhaseAgreement{pre, dec, br}
	if stats.Rows > 0 {
		res.Stats = &stats
	}
	if att.Rows > 0 {
		res.Attention = &att
	}

	g := GreedyAgreement{Steps: c.Greedy}
	margins := [2][]float64{}
	for side, be := range []model.Backend{ba, bb} {
		kv := be.Cache()
		seq := kv.NewSeq()
		rows := make([]model.Row, greedyPrompt)
		for i, t := range stream[:greedyPrompt] {
			rows[i] = model.Row{Seq: seq, Token: t, NoLogits: i < greedyPrompt-1}
		}
		var toks []int
		for range c.Greedy {
			out, err := be.Forward(rows)
			if err != nil {
				return nil, fmt.Errorf("bench: greedy, %s: %w", []string{a, b}[side], err)
			}
			l := out.Logits(len(rows) - 1)
			if l == nil {
				return nil, errors.New("bench: greedy: no logits for the last row")
			}
			t := TopK(l, 1)[0]
			toks = append(toks, t)
			margins[side] = append(margins[side], margin(l))
			rows = []model.Row{{Seq: seq, Token: t}}
		}
		kv.Free(seq)
		if side == 0 {
			g.TokensA = toks
		} else {
			g.TokensB = toks
		}
	}
	g.Same = len(g.TokensA)
	for i := range g.TokensA {
		if g.TokensA[i] != g.TokensB[i] {
			g.Same = i
			g.MarginA, g.MarginB = margins[0][i], margins[1][i]
			break
		}
	}
	res.Greedy = g
	return res, nil
}

// Worst returns the phase with the largest relative logits error.
func (r *Agreement) Worst() PhaseAgreement {
	return slices.MaxFunc(r.Phases, func(x, y PhaseAgreement) int { return cmp.Compare(x.MaxRel, y.MaxRel) })
}
