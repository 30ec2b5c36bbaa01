package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// The "perturbed" backend is the CPU backend with perturbScale added to
// every logit whose index is a multiple of 3, and perturbScale/2
// subtracted from the others: a backend with a known error.
const perturbScale = 1e-3

type perturbed struct{ model.Backend }

func (p perturbed) Forward(rows []model.Row, attn ...int) (*model.Output, error) {
	out, err := p.Backend.Forward(rows, attn...)
	if err != nil {
		return nil, err
	}
	for r := range rows {
		for i, l := range out.Logits(r) {
			if i%3 == 0 {
				out.Logits(r)[i] = l + perturbScale
			} else {
				out.Logits(r)[i] = l - perturbScale/2
			}
		}
	}
	return out, nil
}

// The "withstats" backend is the CPU backend giving row statistics, as a
// GPU backend does, with a normalizer statsScale too large.
const statsScale = 1.001

type withStats struct{ model.Backend }

func (w withStats) Forward(rows []model.Row, attn ...int) (*model.Output, error) {
	out, err := w.Backend.Forward(rows, attn...)
	if err != nil {
		return nil, err
	}
	st := out.StatsBuffer(5)
	j := 0
	for r := range rows {
		if l := out.Logits(r); l != nil {
			model.RowStatsOf(l, 5, &st[j])
			st[j].Z *= statsScale
			j++
		}
	}
	return out, nil
}

func init() {
	model.RegisterBackend("withstats", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
		be, err := model.NewBackend("cpu", m, c)
		if err != nil {
			return nil, err
		}
		return withStats{be}, nil
	})
	model.RegisterBackend("perturbed", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
		be, err := model.NewBackend("cpu", m, c)
		if err != nil {
			return nil, err
		}
		return perturbed{be}, nil
	})
}

func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(50)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.IntN(8)) // many ties
		}
		k := 1 + rng.IntN(12)
		got := TopK(x, k)
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(i, j int) bool { return x[want[i]] > x[want[j]] })
		want = want[:min(k, n)]
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: TopK(%v, %d) = %v, want %v", trial, x, k, got, want)
		}
	}
	if got := TopK(nil, 3); len(got) != 0 {
		t.Errorf("TopK(nil) = %v", got)
	}
}

func TestEntropyVarentropy(t *testing.T) {
	h, v := EntropyVarentropy(make([]float32, 8))
	if math.Abs(h-math.Log(8)) > 1e-12 || v > 1e-12 {
		t.Errorf("uniform over 8: %g, %g; want log 8, 0", h, v)
	}
	// p = (0.75, 0.25): H = -Σp log p, V = Σp (log p)^2 - H^2.
	l := []float32{float32(math.Log(3)), 0}
	h, v = EntropyVarentropy(l)
	p := []float64{0.75, 0.25}
	wantH := -(p[0]*math.Log(p[0]) + p[1]*math.Log(p[1]))
	wantV := p[0]*math.Log(p[0])*math.Log(p[0]) + p[1]*math.Log(p[1])*math.Log(p[1]) - wantH*wantH
	if math.Abs(h-wantH) > 1e-6 || math.Abs(v-wantV) > 1e-6 {
		t.Errorf("(3/4, 1/4): %g, %g; want %g, %g", h, v, wantH, wantV)
	}
	// Large logits do not overflow.
	if h, _ := EntropyVarentropy([]float32{1e4, 1e4}); math.Abs(h-math.Log(2)) > 1e-9 {
		t.Errorf("two equal large logits: entropy %g, want log 2", h)
	}
}

func TestPhaseAgreementAdd(t *testing.T) {
	var p PhaseAgreement
	a := []float32{4, 2, 1, 0}
	p.add(a, a, 2)
	b := []float32{4, 2.5, 1, 0} // |Δ| 0.5 at one logit; argmax kept; top-2 kept
	p.add(a, b, 2)
	c := []float32{1, 2, 4, 0} // argmax moved; top-2 {2, 1} against {0, 1}
	p.add(a, c, 2)
	p.add(a, []float32{float32(math.NaN()), 0, 0, 0}, 2)
	if p.Rows != 3 || p.NonFinite != 1 {
		t.Fatalf("rows %d, non-finite %d; want 3, 1", p.Rows, p.NonFinite)
	}
	if p.MaxAbs != 3 || math.Abs(p.MeanAbs-(0.5+6)/12) > 1e-12 {
		t.Errorf("abs: max %g mean %g; want 3, %g", p.MaxAbs, p.MeanAbs, 6.5/12)
	}
	if p.MaxRel != 0.75 || math.Abs(p.MeanRel-(0.125+0.75)/3) > 1e-12 {
		t.Errorf("rel: max %g mean %g", p.MaxRel, p.MeanRel)
	}
	if p.MinTopK != 0.5 || math.Abs(p.MeanTopK-2.5/3) > 1e-12 || math.Abs(p.Argmax-2.0/3) > 1e-12 {
		t.Errorf("top-k min %g mean %g, argmax %g", p.MinTopK, p.MeanTopK, p.Argmax)
	}
	if p.MaxEntropy == 0 || p.MaxEntropy < p.MeanEntropy {
		t.Errorf("entropy error: max %g mean %g", p.MaxEntropy, p.MeanEntropy)
	}
}

// tinyModel is stories260K's shape with random Q8_0 weights.
func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	m, err := synth.Generate(synth.Shapes["stories260K"], kernels.Q8_0, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompareBackends(t *testing.T) {
	m := tinyModel(t)
	c := AgreeConfig{Prompt: 20, Decode: 5, Branches: 3, Greedy: 12, BlockSize: 4, KVType: kvcache.F16}
	same, err := CompareBackends(m, "cpu", "cpu", c)
	if err != nil {
		t.Fatal(err)
	}
	if len(same.Phases) != 3 {
		t.Fatalf("%d phases", len(same.Phases))
	}
	wantRows := map[string]int{"prefill": 20, "decode": 5, "branches": 6}
	for _, p := range same.Phases {
		if p.Rows != wantRows[p.Phase] || p.MaxAbs != 0 || p.MaxEntropy != 0 || p.MinTopK != 1 || p.Argmax != 1 {
			t.Errorf("cpu against cpu, %s: %+v", p.Phase, p)
		}
	}
	if g := same.Greedy; g.Same != 12 || len(g.TokensA) != 12 || !slices.Equal(g.TokensA, g.TokensB) {
		t.Errorf("greedy: %+v", g)
	}

	off, err := CompareBackends(m, "cpu", "perturbed", c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range off.Phases {
		if math.Abs(p.MaxAbs-perturbScale) > 1e-5 || math.Abs(p.MeanAbs-perturbScale*2/3) > 1e-4 || p.MaxRel == 0 {
			t.Errorf("perturbed, %s: max abs %g mean %g rel %g; want %g, %g", p.Phase, p.MaxAbs, p.MeanAbs, p.MaxRel, perturbScale, perturbScale*2/3)
		}
		if p.MaxEntropy == 0 || p.MaxEntropy > 1e-2 {
			t.Errorf("perturbed, %s: entropy error %g", p.Phase, p.MaxEntropy)
		}
	}
	if w := off.Worst(); w.MaxRel == 0 {
		t.Errorf("worst phase %+v", w)
	}
	var sb strings.Builder
	chk := &BackendCheck{Model: "tiny", A: "cpu", B: "perturbed", Agreement: off}
	if err := chk.Markdown(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| prefill | 20 |", "| branches | 6 |", "Greedy decoding"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, sb.String())
		}
	}

	if same.Stats != nil || off.Stats != nil {
		t.Errorf("statistics of a backend that gives none: %+v, %+v", same.Stats, off.Stats)
	}
	ws, err := CompareBackends(m, "cpu", "withstats", c)
	if err != nil {
		t.Fatal(err)
	}
	if st := ws.Stats; st == nil || st.Rows != 31 || st.K != 5 || st.Argmax != 1 || st.TopK != 1 ||
		math.Abs(st.MaxNormalizer-math.Log(statsScale)) > 1e-9 || st.MaxEntropy < 1e-4 {
		t.Errorf("statistics: %+v", st)
	}
	sb.Reset()
	if err := (&BackendCheck{Model: "tiny", A: "cpu", B: "withstats", Agreement: ws}).Markdown(&sb); err != nil || !strings.Contains(sb.String(), "withstats's own row statistics") {
		t.Errorf("markdown: %v\n%s", err, sb.String())
	}

	if _, err := CompareBackends(m, "cpu", "no-such-backend", c); err == nil || !strings.Contains(err.Error(), "no-such-backend") {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := CompareBackends(m, "cpu", "cpu", AgreeConfig{Prompt: 600}); err == nil {
		t.Error("a prompt past the context was accepted")
	}
}

func TestMeasureBackendTiming(t *testing.T) {
	m := tinyModel(t)
	c := tinyConfig()
	c.KVType = kvcache.F16
	eng, err := engine.New(m, engine.WithBackend("perturbed"), engine.WithKVType(kvcache.F16), engine.WithCacheTokens(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	bt, err := MeasureBackendTiming(context.Background(), m, "perturbed", c, eng, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Backend != "perturbed" || bt.Decode == nil || len(bt.Steps) != 3 || bt.Prefill == nil || bt.Search == nil || len(bt.Errors) > 0 {
		t.Fatalf("%+v", bt)
	}
	if s := bt.Search; s.Searches != 1 || s.Passes == 0 || s.Wall < s.Forward || s.Share < 0 || s.Share > 1 {
		t.Errorf("search %+v", s)
	}
	tr := Traffic{WeightBytes: 1000, KVBytesPerToken: 10}
	if got := tr.step(16, 100, 3); got != 1000+10*(100+16*2) {
		t.Errorf("traffic of a 16-branch step: %g", got)
	}
	chk := &BackendCheck{Model: "tiny", A: "cpu", B: "perturbed", Traffic: tr, BandwidthGBps: 1, Timings: []*BackendTiming{bt}}
	var sb strings.Builder
	if err := chk.Markdown(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| decode, 1 row (6 tokens from position 0) |", "| 5-branch step", "of 1 GB/s", "beam-adaptive"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, sb.String())
		}
	}
	if _, err := MeasureBackendTiming(context.Background(), m, "no-such-backend", c, nil, 0, 0); err == nil {
		t.Error("an unknown backend was timed")
	}
}
