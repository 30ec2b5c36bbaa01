package ggml_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// spanLog collects the attention groups' slots of a backend's steps.
type spanLog struct {
	mu                              sync.Mutex
	span, read, used                []int
	rowSpan, rowRead, rowUsed, seen int64
	groups                          int
}

func (l *spanLog) hook(g ggml.GroupSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.groups++
	l.span, l.read, l.used = append(l.span, g.Span), append(l.read, g.Read), append(l.used, g.Used)
	r := int64(g.Rows)
	l.rowSpan, l.rowRead, l.rowUsed = l.rowSpan+r*int64(g.Span), l.rowRead+r*int64(g.Read), l.rowUsed+r*int64(g.Used)
	l.seen += int64(g.Seen)
}

// summary is the ratios' distribution: per group and step, span/used and
// read/used at the 50th, 90th and 99th percentiles and the largest, and
// the work's ratio (rows x slots summed).
func (l *spanLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	pct := func(x []int) string {
		r := make([]float64, len(x))
		for i := range x {
			r[i] = float64(x[i]) / float64(max(l.used[i], 1))
		}
		slices.Sort(r)
		q := func(p float64) float64 { return r[min(len(r)-1, int(p*float64(len(r))))] }
		return fmt.Sprintf("p50 %.2f p90 %.2f p99 %.2f max %.2f", q(0.5), q(0.9), q(0.99), r[len(r)-1])
	}
	if l.groups == 0 {
		return "no groups"
	}
	return fmt.Sprintf("%d group-steps; span/used %s, work %.2fx; read/used %s, work %.2fx; rows x used / positions seen %.2fx",
		l.groups, pct(l.span), float64(l.rowSpan)/float64(l.rowUsed), pct(l.read), float64(l.rowRead)/float64(l.rowUsed), float64(l.rowUsed)/float64(l.seen))
}

var (
	spanBackends   sync.Once
	spanBackendsMu sync.Mutex
	spanNext       []spanSetup // the next "ggml-spans" backends' settings
)

// spanSetup is a "ggml-spans" backend's hook, padding and gathering,
// and where its Forward's time goes.
type spanSetup struct {
	hook  func(ggml.GroupSpan)
	pad   int
	way   string  // ggml.SetAttention's
	sums  bool    // ggml.SetAttentionSums'
	split float64 // ggml.SetSplit's, when not negative
	timed *timedBackend
}

// timedBackend is a backend whose Forwards are timed.
type timedBackend struct {
	*ggml.Backend
	forward time.Duration
	steps   int
}

func (b *timedBackend) Forward(rows []model.Row, attn ...int) (*model.Output, error) {
	t0 := time.Now()
	out, err := b.Backend.Forward(rows, attn...)
	b.forward += time.Since(t0)
	b.steps++
	return out, err
}

// registerSpans registers the backend "ggml-spans": the ggml backend
// with the defaults, its groups' spans going to the hook queued by
// nextSpanHook.
func registerSpans() {
	spanBackends.Do(func() {
		model.RegisterBackend("ggml-spans", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
			b, err := ggml.New(m, c, ggml.Defaults())
			if err == nil {
				spanBackendsMu.Lock()
				defer spanBackendsMu.Unlock()
				if len(spanNext) > 0 {
					n := spanNext[0]
					spanNext = spanNext[1:]
					ggml.SetSpanHook(b, n.hook)
					ggml.SetPadSlots(b, n.pad)
					if n.way != "" {
						ggml.SetAttention(b, n.way)
					}
					ggml.SetAttentionSums(b, n.sums)
					if n.split >= 0 {
						ggml.SetSplit(b, n.split)
					}
					if n.timed != nil {
						n.timed.Backend = b
						return n.timed, nil
					}
				}
			}
			return b, err
		})
	})
}

// nextSpans sets the next "ggml-spans" backend's settings.
func nextSpans(s spanSetup) {
	spanBackendsMu.Lock()
	spanNext = append(spanNext, s)
	spanBackendsMu.Unlock()
}

// arithPrompts returns n arith test problems' prompts from ../shared (or
// a few of its own when ../shared is absent).
func arithPrompts(t *testing.T, n int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(modeltest.RepoRoot(), "..", "shared", "data", "arith", "test.jsonl"))
	if err != nil {
		t.Logf("arith test problems: %v; using built-in ones", err)
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf("Question: Ben has %d cards. He sells %d cards. Then Ben doubles the cards. How many cards does Ben have now?\nAnswer:", 30+i, 3+i%7))
		}
		return ps
	}
	defer f.Close()
	var ps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(ps) < n {
		var p struct{ Question string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, "Question: "+p.Question+"\nAnswer:")
	}
	return ps
}

// envInt is the positive integer in $name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestSpans measures the slots the attention groups read against the
// slots their blocks hold on realistic runs on arith: beam-adaptive
// searches one after another on one engine (its default cache), the
// 16-branch step, and searches four at once sharing an engine with the
// server's cache (the engine's batching, as the server's), with the CPU's
// spans and a GPU's (padded to 256 slots), and logs the ratios'
// distribution. It is a measurement: it runs with
// ENTROPIX_GGML_SPAN_PROBLEMS=n problems (and
// ENTROPIX_GGML_SPAN_PARALLEL=k searches at once).
func TestSpans(t *testing.T) {
	if os.Getenv("ENTROPIX_GGML_SPAN_PROBLEMS") == "" {
		t.Skip("skipped: a measurement, run with ENTROPIX_GGML_SPAN_PROBLEMS=n")
	}
	m, prompts, parallel := spanModel(t)
	search := func(t *testing.T, cache, parallel, pad int) *spanLog {
		l := &spanLog{}
		nextSpans(spanSetup{hook: l.hook, pad: pad, split: -1})
		e, err := engine.New(m, engine.WithBackend("ggml-spans"), engine.WithMode(engine.BeamAdaptive), engine.WithSeed(1),
			engine.WithKVType(kvcache.F32), engine.WithCacheTokens(cache))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var wg sync.WaitGroup
		errs := make(chan error, parallel)
		for w := range parallel {
			wg.Go(func() {
				for i := w; i < len(prompts); i += parallel {
					if _, err := e.Search(context.Background(), prompts[i], engine.Budget{MaxTokens: 96}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return l
	}
	// pad 0 is the CPU's spans (whole blocks), 256 a GPU's.
	for _, pad := range []int{0, 256} {
		t.Run(fmt.Sprintf("beam-adaptive/pad%d", pad), func(t *testing.T) {
			t.Logf("%d problems: %s", len(prompts), search(t, 0, 1, pad).summary())
		})
		t.Run(fmt.Sprintf("concurrent/pad%d", pad), func(t *testing.T) {
			t.Logf("%d problems, %d at once: %s", len(prompts), parallel, search(t, 16*m.Config.ContextLen, parallel, pad).summary())
		})
		t.Run(fmt.Sprintf("16branches/pad%d", pad), func(t *testing.T) { sixteen(t, m, pad) })
	}
}

// sixteen runs the 16-branch step (BenchmarkDecode's): a prompt of 40
// positions, 16 branches of it decoding together, cut back to the prompt
// every 160 steps.
func sixteen(t *testing.T, m *model.Model, pad int) {
	b := newBackend(t, m, 4096, 16, kvcache.F32)
	ggml.SetPadSlots(b, pad)
	l := &spanLog{}
	ggml.SetSpanHook(b, l.hook)
	seqs, rows := forked(t, b, 40, 16)
	p := b.Cache()
	for i := range 200 {
		rows = rows[:0]
		for j, s := range seqs {
			rows = append(rows, model.Row{Seq: s, Token: (i + j) % 700})
		}
		if _, err := b.Forward(rows); err != nil {
			t.Fatal(err)
		}
		if seqs[0].Len() > 200 {
			for _, s := range seqs {
				p.Truncate(s, 40)
			}
		}
	}
	t.Logf("%s", l.summary())
}

// TestSpanSpeed times the steps of searches on arith with the groups
// reading their spans ("span") and as the backend chooses ("auto"), in
// interleaved rounds: ENTROPIX_GGML_SPAN_SPEED=rounds, the
// problems and searches at once as TestSpans's,
// ENTROPIX_GGML_SPAN_PAD=256 for a GPU's padding,
// ENTROPIX_GGML_SPAN_MODES the ways compared (ggml.SetAttention's, "/r"
// splitting at ratio r: "span,auto/0"), and
// ENTROPIX_GGML_SPAN_ENGINE_MODE and ENTROPIX_GGML_SPAN_WIDTH the search
// (beam-adaptive by default). A measurement.
func TestSpanSpeed(t *testing.T) {
	rounds := envInt("ENTROPIX_GGML_SPAN_SPEED", 0)
	if rounds == 0 {
		t.Skip("skipped: a measurement, run with ENTROPIX_GGML_SPAN_SPEED=rounds")
	}
	m, prompts, parallel := spanModel(t)
	pad, width := envInt("ENTROPIX_GGML_SPAN_PAD", 0), envInt("ENTROPIX_GGML_SPAN_WIDTH", 0)
	emode := engine.BeamAdaptive
	if s := os.Getenv("ENTROPIX_GGML_SPAN_ENGINE_MODE"); s != "" {
		var err error
		if emode, err = engine.ParseMode(s); err != nil {
			t.Fatal(err)
		}
	}
	modes := []string{"span", "auto"}
	if m := os.Getenv("ENTROPIX_GGML_SPAN_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	perStep := map[string][]float64{}
	for r := range rounds {
		for j := range modes {
			mode := modes[(j+r)%len(modes)]
			tb := &timedBackend{}
			l := &spanLog{}
			way, split, cut := strings.Cut(mode, "/") // "auto/4": as the backend chooses, splitting at 4
			sr := -1.0
			if cut {
				var err error
				if sr, err = strconv.ParseFloat(split, 64); err != nil {
					t.Fatal(err)
				}
			}
			nextSpans(spanSetup{hook: l.hook, pad: pad, way: way, split: sr, timed: tb})
			opts := []engine.Option{engine.WithBackend("ggml-spans"), engine.WithMode(emode), engine.WithSeed(1),
				engine.WithKVType(kvcache.F32), engine.WithCacheTokens(16 * m.Config.ContextLen)}
			if width > 0 {
				opts = append(opts, engine.WithWidth(width))
			}
			e, err := engine.New(m, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			var wg sync.WaitGroup
			for w := range parallel {
				wg.Go(func() {
					for i := w; i < len(prompts); i += parallel {
						if _, err := e.Search(context.Background(), prompts[i], engine.Budget{MaxTokens: 96}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			wall := time.Since(t0)
			gs := tb.GraphStats()
			built, reused := gs.Built, gs.Reused
			e.Close()
			us := float64(tb.forward.Microseconds()) / float64(tb.steps)
			perStep[mode] = append(perStep[mode], us)
			t.Logf("round %d %s: %d steps, %.0f µs a step in Forward, wall %v, graphs built %d reused %d (%.0f µs a build), %.0f nodes a step; read/used work %.2fx",
				r, mode, tb.steps, us, wall.Round(time.Millisecond), built, reused, float64(gs.BuildTime.Microseconds())/float64(max(built, 1)), float64(gs.Nodes)/float64(tb.steps), float64(l.rowRead)/float64(l.rowUsed))
		}
	}
	for _, mode := range modes[1:] {
		var ratios []float64
		for r := range perStep[mode] {
			ratios = append(ratios, perStep[mode][r]/perStep[modes[0]][r])
		}
		slices.Sort(ratios)
		t.Logf("%s / %s, time a step: median %.3f, range %.3f-%.3f over %d rounds", mode, modes[0], ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], len(ratios))
	}
}

// spanModel sets the span measurements up: the defaults and the spans'
// backend registered, arith.gguf loaded (closed at the test's end), the
// problems' prompts and how many searches run at once.
func spanModel(t *testing.T) (*model.Model, []string, int) {
	ggml.SetDefaults(options(t))
	registerSpans()
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, arithPrompts(t, envInt("ENTROPIX_GGML_SPAN_PROBLEMS", 8)), envInt("ENTROPIX_GGML_SPAN_PARALLEL", 4)
}
