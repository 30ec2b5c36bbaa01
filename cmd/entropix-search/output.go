package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/entropix-search/entropix-search/cmd/internal/outfile"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// report is what --json writes: the run's inputs and its whole result,
// search tree included. The README's "JSON output" documents it; Schema
// changes when a field changes meaning or goes away.
type report struct {
	Schema  int            `json:"schema"`
	Version string         `json:"version"`
	Model   string         `json:"model"`
	Prompt  string         `json:"prompt"`
	Seed    uint64         `json:"seed"`
	Result  *engine.Result `json:"result"`
}

// reportSchema is the version of --json's format.
const reportSchema = 1

// writeOutputs writes the --dot, --json and --svg files (also after an
// interrupt, for the partial tree), each atomically (package outfile: a
// failure leaves whatever was at the path as it was). ctx stops Graphviz.
func writeOutputs(ctx context.Context, c *config, m *model.Model, prompt string, res *engine.Result, thresholds policy.Thresholds, stdout io.Writer) error {
	if res == nil {
		return nil
	}
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		return outfile.Write(path, stdout, fn)
	}
	title := fmt.Sprintf("%s · %s", c.mode, m.Source)
	opt := tree.DOTOptions{Title: title, HidePruned: c.dotHidePruned, MaxDepth: c.dotMaxDepth}
	return errors.Join(
		write(c.dot, func(w io.Writer) error { return res.Tree.WriteDOT(w, opt) }),
		write(c.svg, func(w io.Writer) error { return res.Tree.WriteSVGContext(ctx, w, opt) }),
		write(c.html, func(w io.Writer) error {
			return res.Tree.WriteHTML(w, tree.HTMLOptions{Title: title, Thresholds: thresholds, TokenText: m.Tokenizer.Piece})
		}),
		write(c.json, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", " ")
			return enc.Encode(report{Schema: reportSchema, Version: version, Model: m.Source, Prompt: prompt, Seed: c.seed, Result: res})
		}),
	)
}

// checkOutputs tells, before the model is loaded, whether every output
// can be written: its folder exists and is writable, and Graphviz is
// installed for --svg.
func checkOutputs(c *config) error {
	var errs []error
	for _, o := range []struct{ flag, path string }{{"--dot", c.dot}, {"--json", c.json}, {"--svg", c.svg}, {"--html", c.html}} {
		if o.path == "" {
			continue
		}
		if err := outfile.Check(o.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.flag, err))
		}
	}
	if c.svg != "" {
		if _, err := exec.LookPath("dot"); err != nil {
			errs = append(errs, errors.New("--svg needs Graphviz's dot on the PATH (or write --dot and render it elsewhere)"))
		}
	}
	return errors.Join(errs...)
}

// printProbs prints, for each token of the result's path, its probability
// and the most probable tokens of its distribution (--n-probs).
func printProbs(w io.Writer, m *model.Model, res *engine.Result) {
	if res == nil || res.Tree == nil {
		return
	}
	for id, n := range res.Tree.All() {
		if id == tree.Root || !n.Committed {
			continue
		}
		var alts []string
		for _, c := range n.Top {
			alts = append(alts, fmt.Sprintf("%q %.3f", m.Tokenizer.Piece(c.Token), math.Exp(c.LogProb)))
		}
		fmt.Fprintf(w, "%-16q p=%.3f  [%s]\n", n.Text, math.Exp(n.LogProb), strings.Join(alts, ", "))
	}
}

// summary prints the run's numbers on stderr.
func summary(w io.Writer, term bool, c *config, res *engine.Result) {
	if res == nil {
		return
	}
	st := res.Stats
	tps := 0.0
	if st.Wall > 0 {
		tps = float64(st.TokensExplored+st.PromptRows) / st.Wall.Seconds()
	}
	cut := ""
	if res.BudgetExhausted {
		cut = ", budget exhausted"
	}
	if !term {
		fmt.Fprintf(w, "entropix-search: mode %s, %d tokens (stopped: %s%s), %d rows in %d forward passes, %d forks, %d prunes, KV peak %d blocks, %.2fs\n",
			c.mode, st.Generated, res.Stopped, cut, st.Rows, st.ForwardPasses, st.Forks, st.Prunes, st.KVBlocksPeak, st.Wall.Seconds())
		return
	}
	bold, plain := "\x1b[1m", "\x1b[0m"
	if os.Getenv("NO_COLOR") != "" { // https://no-color.org
		bold, plain = "", ""
	}
	fmt.Fprintf(w, "\n%s%s%s  %d tokens, stopped: %s%s\n", bold, c.mode, plain, st.Generated, res.Stopped, cut)
	fmt.Fprintf(w, "  compute   %d rows (+%d prompt) in %d forward passes, %.1f rows/s\n", st.Rows, st.PromptRows, st.ForwardPasses, tps)
	fmt.Fprintf(w, "  search    %d forks, %d prunes, at most %d live branches, %d nodes\n", st.Forks, st.Prunes, st.MaxLive, res.Tree.Len())
	fmt.Fprintf(w, "  memory    KV peak %d blocks\n", st.KVBlocksPeak)
	fmt.Fprintf(w, "  time      %.2fs (%.0f%% in the forward pass)\n", st.Wall.Seconds(), 100*st.ForwardTime.Seconds()/max(st.Wall.Seconds(), 1e-9))
}

// progress shows a live status line on a terminal's stderr.
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	last time.Time
	on   bool
}

func (p *progress) update(pr engine.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	st := pr.Stats
	budget := ""
	if pr.Budget.MaxRows > 0 {
		budget = fmt.Sprintf(" (%.0f%% of budget)", 100*float64(st.Rows)/float64(pr.Budget.MaxRows))
	}
	rate := float64(st.Rows) / max(st.Wall.Seconds(), 1e-9)
	dim, plain := "\x1b[2m", "\x1b[0m"
	if os.Getenv("NO_COLOR") != "" {
		dim, plain = "", ""
	}
	fmt.Fprintf(p.w, "\r\x1b[2K%s%d/%d tokens · %d live · %d forks · %d prunes · %d rows%s · %.0f rows/s%s", dim,
		max(pr.Committed, pr.Deepest), pr.Budget.MaxTokens, pr.Live, st.Forks, st.Prunes, st.Rows, budget, rate, plain)
	p.on = true
}

func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}

// calibrate prints thresholds calibrated for the model: the single-path
// entropix sampler continues each prompt of the file, and the percentiles
// of the (entropy, varentropy) it met give the quadrant cuts.
func calibrate(ctx context.Context, c *config, m *model.Model, st engine.Settings, stdout, stderr io.Writer) error {
	data, err := readSmallFile(c.calibrate, maxPromptBytes)
	if err != nil {
		return usageError{fmt.Errorf("--calibrate: %w", err)}
	}
	var prompts []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if !c.noEscape {
				l = unescape(l)
			}
			prompts = append(prompts, l)
		}
	}
	if len(prompts) == 0 {
		return usageError{fmt.Errorf("--calibrate: %s holds no prompts (one a line)", c.calibrate)}
	}
	var obs []policy.Observation
	// Calibration fits beam-adaptive's own rows: the flags' settings in
	// that mode, reading marked answers.
	st.Mode, st.Answer = engine.BeamAdaptive, "marked"
	eng, err := engine.New(m, append(st.Options(), c.backendOpt, engine.WithObserver(func(o policy.Observation) { obs = append(obs, o) }))...)
	if err != nil {
		return err
	}
	defer eng.Close()
	pf := st.File
	for _, p := range prompts {
		if _, err := eng.Search(ctx, p, st.Budget()); err != nil {
			return err
		}
	}
	if len(obs) == 0 {
		return fmt.Errorf("--calibrate: the search made no decision over %d prompts", len(prompts))
	}
	f, err := policy.CalibrateSearch(obs, pf, policy.DefaultSearchTargets())
	if err != nil {
		return err
	}
	f.Thresholds.Name = "calibrated:" + m.Source
	if !c.quiet {
		ms := make([]policy.Metrics, len(obs))
		for i, o := range obs {
			ms[i] = o.Metrics
		}
		fmt.Fprintf(stderr, "entropix-search: calibrated over %d rows of beam-adaptive search on %d prompts: %v; fork min-p %.3g..%.3g over V %.3g..%.3g bits², backspace below p %.3g\n",
			len(obs), len(prompts), policy.Count(ms, f.Thresholds), f.Fork.MinPHigh, f.Fork.MinPLow, f.Fork.VarLow, f.Fork.VarHigh, f.BackspaceBelow)
	}
	return f.Write(stdout)
}
