package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
)

// Traffic is what a forward step reads from memory at the least: every
// weight once (the token embedding only where it is also the classifier:
// otherwise a step gathers a few of its rows), and the keys and values of
// every position a row attends to, a prefix shared by several rows once.
type Traffic struct {
	WeightBytes     int64 `json:"weight_bytes"`
	KVBytesPerToken int64 `json:"kv_bytes_per_token"` // one position's keys and values over all layers
}

// TrafficOf reads the weights' sizes from a GGUF file and sizes a KV
// cache of type kv for cfg.
func TrafficOf(path string, cfg model.Config, kv kvcache.ElemType) (Traffic, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Traffic{}, err
	}
	defer f.Close()
	_, untied := f.Tensor("output.weight")
	var t Traffic
	for _, ti := range f.Tensors {
		if ti.Name == "token_embd.weight" && untied {
			continue
		}
		t.WeightBytes += int64(ti.Size)
	}
	elem := int64(4)
	if kv == kvcache.F16 {
		elem = 2
	}
	t.KVBytesPerToken = int64(cfg.Layers) * 2 * int64(cfg.KVDim()) * elem
	return t, nil
}

// decode is the bytes one decode step reads on average over tokens steps
// from position 0.
func (t Traffic) decode(tokens int) float64 {
	return float64(t.WeightBytes) + float64(t.KVBytesPerToken)*float64(tokens+1)/2
}

// step is the bytes a step of b branches of a prefix-token prefix reads,
// on average over steps steps.
func (t Traffic) step(b, prefix, steps int) float64 {
	return float64(t.WeightBytes) + float64(t.KVBytesPerToken)*(float64(prefix)+float64(b)*float64(steps+1)/2)
}

// prefill is the bytes a prefill of n tokens reads and writes.
func (t Traffic) prefill(n int) float64 {
	return float64(t.WeightBytes) + float64(t.KVBytesPerToken)*float64(n)
}

// SearchTiming is a search's time outside the forward pass, from the
// engine's own accounting, averaged over the searches run.
type SearchTiming struct {
	Mode     string        `json:"mode"`
	Tokens   int           `json:"tokens"` // Budget.MaxTokens
	Searches int           `json:"searches"`
	Passes   int           `json:"passes"` // forward passes per search
	Rows     int           `json:"rows"`   // rows per search
	Wall     time.Duration `json:"wall_ns"`
	Forward  time.Duration `json:"forward_ns"`
	// Share is the share of the wall time outside the forward pass;
	// VsStep the time outside per pass over the forward time per pass.
	Share  float64 `json:"share"`
	VsStep float64 `json:"vs_step"`
}

// searchPrompts are the prompts of MeasureSearchTime, one a search.
var searchPrompts = []string{"Once upon a time", "Lily wanted to", "The little dog", "Tom and his mom"}

// MeasureSearchTime runs beam-adaptive on eng, one warm-up and then
// rounds searches of tokens tokens, and reports their time outside the
// forward pass.
func MeasureSearchTime(ctx context.Context, eng *engine.Engine, tokens, rounds int) (*SearchTiming, error) {
	if tokens < 1 || rounds < 1 {
		return nil, fmt.Errorf("bench: search time: %d tokens, %d rounds: want both > 0", tokens, rounds)
	}
	r := &SearchTiming{Mode: engine.BeamAdaptive.String(), Tokens: tokens}
	for i := range rounds + 1 {
		out, err := eng.SearchWith(ctx, searchPrompts[i%len(searchPrompts)], engine.Budget{MaxTokens: tokens},
			engine.WithMode(engine.BeamAdaptive), engine.WithSeed(1))
		if err != nil {
			return nil, fmt.Errorf("bench: search time: %w", err)
		}
		if i == 0 {
			continue // warm-up
		}
		r.Searches++
		r.Passes += out.Stats.ForwardPasses
		r.Rows += out.Stats.Rows
		r.Wall += out.Stats.Wall
		r.Forward += out.Stats.ForwardTime
	}
	if r.Wall > 0 {
		r.Share = 1 - float64(r.Forward)/float64(r.Wall)
	}
	if r.Forward > 0 {
		r.VsStep = float64(r.Wall-r.Forward) / float64(r.Forward)
	}
	r.Passes /= r.Searches
	r.Rows /= r.Searches
	r.Wall /= time.Duration(r.Searches)
	r.Forward /= time.Duration(r.Searches)
	return r, nil
}

// ServerPoint is a server's throughput with Clients clients, each sending
// one request after another for the point's duration.
type ServerPoint struct {
	Clients        int           `json:"clients"`
	Requests       int           `json:"requests"` // completed
	Tokens         int           `json:"tokens"`   // completion tokens returned
	Errors         int           `json:"errors"`
	Seconds        float64       `json:"seconds"`
	TokensPerSec   float64       `json:"tokens_per_sec"`
	RequestsPerSec float64       `json:"requests_per_sec"`
	P50            time.Duration `json:"p50_ns"`
	// Passes and Rows are the engine's forward passes in the measurement
	// and their rows; Graphs, when the backend counts them, its graphs.
	Passes int64        `json:"passes,omitempty"`
	Rows   int64        `json:"rows,omitempty"`
	Graphs *GraphCounts `json:"graphs,omitempty"`
	// Restarts and RestartRows are the searches the engine ran again for
	// want of KV blocks and the rows thrown away (engine.Stats).
	Restarts    int `json:"restarts,omitempty"`
	RestartRows int `json:"restart_rows,omitempty"`
}

// GraphCounts are a graph backend's graphs over a measurement: those
// built (and the host's time building them), those run again, their
// nodes summed over the passes, and the most pieces a graph was cut into
// (more than one: ops the device lacks ran on the CPU).
type GraphCounts struct {
	Built     int           `json:"built"`
	Reused    int           `json:"reused"`
	BuildTime time.Duration `json:"build_ns"`
	Nodes     int64         `json:"nodes"`
	MaxSplits int           `json:"max_splits,omitempty"`
}

// passes describes p's forward passes and graphs, or "".
func (p ServerPoint) passes() string {
	if p.Passes == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d passes, %.1f rows each", p.Passes, float64(p.Rows)/float64(p.Passes))
	if p.Restarts > 0 {
		s += fmt.Sprintf(" (%d searches run again for want of KV blocks, %d rows thrown away)", p.Restarts, p.RestartRows)
	}
	if g := p.Graphs; g != nil {
		s += fmt.Sprintf(", %d graphs built (%s each), %d run again, %.0f nodes a pass", g.Built, us(g.BuildTime/time.Duration(max(g.Built, 1))), g.Reused, float64(g.Nodes)/float64(p.Passes))
		if g.MaxSplits > 1 {
			s += fmt.Sprintf(", up to %d pieces a graph (ops the device lacks ran on the CPU)", g.MaxSplits)
		}
	}
	return s
}

// ServerTiming is a server's throughput with one client and with many.
type ServerTiming struct {
	Mode      string      `json:"mode"`
	MaxTokens int         `json:"max_tokens"`
	One       ServerPoint `json:"one"`
	Many      ServerPoint `json:"many"`
	// Ratio is Many's tokens/s over One's.
	Ratio float64 `json:"ratio"`
}

// BackendTiming is one backend's speed on a model. A measurement that
// failed is left zero and its error is in Errors.
type BackendTiming struct {
	Backend string         `json:"backend"`
	Device  string         `json:"device,omitempty"`
	Config  SpeedConfig    `json:"config"`
	Decode  *DecodeResult  `json:"decode,omitempty"`
	Steps   []StepResult   `json:"steps,omitempty"`
	Prefill *PrefillResult `json:"prefill,omitempty"`
	Search  *SearchTiming  `json:"search,omitempty"`
	Server  *ServerTiming  `json:"server,omitempty"`
	// Bare is decode and the branch steps again without the rows'
	// statistics, for a backend that computes them with the step.
	Bare   *BareTiming `json:"bare,omitempty"`
	Errors []string    `json:"errors,omitempty"`
}

// BareTiming is a backend's forward pass alone: decode and the branch
// steps without the rows' statistics.
type BareTiming struct {
	Decode *DecodeResult `json:"decode,omitempty"`
	Steps  []StepResult  `json:"steps,omitempty"`
}

// note records a failed measurement.
func (t *BackendTiming) note(what string, err error) {
	t.Errors = append(t.Errors, fmt.Sprintf("%s: %v", what, err))
}

// MeasureBackendTiming measures backend name on m: decode at one row,
// the branch steps of c.Branches (forks of one prefilled prefix), the
// prefill of c.PromptTokens tokens, and, on eng (an engine of m on the
// same backend; nil: skipped), the time beam-adaptive spends outside the
// forward pass over searchTokens tokens (0: skipped). Each measurement
// that fails is noted and the others still run, but a cancelled ctx stops
// them. It fails only when the backend cannot be made.
func MeasureBackendTiming(ctx context.Context, m *model.Model, name string, c SpeedConfig, eng *engine.Engine, searchTokens, searchRounds int) (*BackendTiming, error) {
	c.Backend = name
	c = c.withDefaults()
	t := &BackendTiming{Backend: name, Config: c}
	be, err := c.backend(m, c.BlockSize)
	if err != nil {
		return nil, err
	}
	t.Device = deviceName(be)
	_, stats := be.(rowStatser) // then timed without them too
	be.Close()
	if d, err := MeasureDecode(m, c); err != nil {
		t.note("decode", err)
	} else {
		t.Decode = &d
	}
	if err := ctx.Err(); err != nil {
		return t, err
	}
	if s, err := MeasureBranchSteps(m, c); err != nil {
		t.note("branch steps", err)
	} else {
		t.Steps = s
	}
	if err := ctx.Err(); err != nil {
		return t, err
	}
	if p, err := MeasurePrefill(m, c); err != nil {
		t.note("prefill", err)
	} else {
		t.Prefill = &p
	}
	if stats && ctx.Err() == nil {
		bare := c
		bare.NoStats, t.Bare = true, &BareTiming{}
		if d, err := MeasureDecode(m, bare); err != nil {
			t.note("decode without statistics", err)
		} else {
			t.Bare.Decode = &d
		}
		if s, err := MeasureBranchSteps(m, bare); err != nil {
			t.note("branch steps without statistics", err)
		} else {
			t.Bare.Steps = s
		}
	}
	if searchTokens > 0 && eng != nil {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		if s, err := MeasureSearchTime(ctx, eng, searchTokens, max(searchRounds, 1)); err != nil {
			t.note("search", err)
		} else {
			t.Search = s
		}
	}
	return t, ctx.Err()
}

// deviceName asks a backend which device it runs on, when it says.
func deviceName(be model.Backend) string {
	if d, ok := be.(interface{ DeviceName() string }); ok {
		return d.DeviceName()
	}
	return ""
}

// BackendCheck is one model's comparison of backend B against backend A:
// how far B's outputs are, and how fast each backend runs.
type BackendCheck struct {
	Model   string           `json:"model"` // shape and weight type, or file name
	Params  int64            `json:"params"`
	KVType  kvcache.ElemType `json:"kv_type"`
	A       string           `json:"a"`
	B       string           `json:"b"`
	Traffic Traffic          `json:"traffic"`
	// BandwidthGBps is the memory bandwidth the fractions are of (0:
	// none given).
	BandwidthGBps  float64          `json:"bandwidth_gbps,omitempty"`
	Agreement      *Agreement       `json:"agreement,omitempty"`
	AgreementError string           `json:"agreement_error,omitempty"`
	Timings        []*BackendTiming `json:"timings,omitempty"`
	Wall           time.Duration    `json:"wall_ns"`
}

// bw formats the share of the bandwidth bytes per d use.
func (r *BackendCheck) bw(bytes float64, d time.Duration) string {
	if r.BandwidthGBps <= 0 || bytes <= 0 || d <= 0 {
		return ""
	}
	return fmt.Sprintf(", %.0f%% of %.0f GB/s", 100*bytes/d.Seconds()/(r.BandwidthGBps*1e9), r.BandwidthGBps)
}

// Markdown writes the check as markdown tables.
func (r *BackendCheck) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s (%.1fM parameters, %v KV cache): %s against %s\n\n", r.Model, float64(r.Params)/1e6, r.KVType, r.B, r.A)
	if r.AgreementError != "" {
		fmt.Fprintf(&b, "Agreement not measured: %s\n\n", oneLine(r.AgreementError))
	}
	if a := r.Agreement; a != nil {
		c := a.Config
		fmt.Fprintf(&b, "Agreement of %s with %s on one token stream: a prefill of %d tokens (logits at every position), %d decode steps of one row, %d forks stepped twice in one batch. Relative error: a row's largest |b-a| over its largest |a|; entropy in nats.\n\n",
			a.B, a.A, c.Prompt, c.Decode, c.Branches)
		fmt.Fprintf(&b, "| phase | rows | logits max abs | mean abs | max rel | mean rel | entropy max / mean | varentropy max / mean | top-%d overlap min / mean | same argmax |\n", c.TopK)
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, p := range a.Phases {
			fmt.Fprintf(&b, "| %s | %d | %.3g | %.3g | %.3g | %.3g | %.3g / %.3g | %.3g / %.3g | %.2f / %.3f | %.1f%% |\n", p.Phase, p.Rows,
				p.MaxAbs, p.MeanAbs, p.MaxRel, p.MeanRel, p.MaxEntropy, p.MeanEntropy, p.MaxVarentropy, p.MeanVarentropy, p.MinTopK, p.MeanTopK, 100*p.Argmax)
		}
		for _, p := range a.Phases {
			if p.NonFinite > 0 {
				fmt.Fprintf(&b, "\n%s: %d rows had a NaN or infinite logit on one side, left out of the figures.\n", p.Phase, p.NonFinite)
			}
		}
		if st := a.Stats; st != nil {
			fmt.Fprintf(&b, "\n%s's own row statistics (computed where its rows live) against those of its rows: on %d rows, log-normalizer within %.3g, entropy within %.3g, varentropy within %.3g; the same argmax in %.1f%% and the same top %d in %.1f%% of the rows.\n",
				a.B, st.Rows, st.MaxNormalizer, st.MaxEntropy, st.MaxVarentropy, 100*st.Argmax, st.K, 100*st.TopK)
		}
		if at := a.Attention; at != nil {
			how := "its scores and probabilities read back"
			if at.Sums {
				how = "made of the sums on the device"
			}
			fmt.Fprintf(&b, "\nThe last layer's attention metrics (entropix's), %s's %s: on %d rows within %.3g (entropy), %.3g (varentropy), %.3g (agreement) and %.3g (interaction) of %s's, relative.\n",
				a.B, how, at.Rows, at.Entropy, at.Varentropy, at.Agreement, at.Interaction, a.A)
		}
		g := a.Greedy
		if g.Same == g.Steps {
			fmt.Fprintf(&b, "\nGreedy decoding, each backend on its own from the stream's first tokens: all %d tokens identical.\n\n", g.Steps)
		} else {
			fmt.Fprintf(&b, "\nGreedy decoding, each backend on its own from the stream's first tokens: the first %d of %d tokens identical; at token %d the gap between the two largest logits was %.3g (%s) and %.3g (%s).\n\n",
				g.Same, g.Steps, g.Same+1, g.MarginA, a.A, g.MarginB, a.B)
		}
	}
	if len(r.Timings) > 0 {
		r.timingMarkdown(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine makes s fit a markdown line or table cell.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "|", "/").Replace(strings.TrimSpace(s))
}

func (r *BackendCheck) timingMarkdown(b *strings.Builder) {
	c := r.Timings[0].Config
	b.WriteString("Speed (medians of the rounds; tokens/s counts every row a step computes")
	if r.BandwidthGBps > 0 {
		fmt.Fprintf(b, "; memory bandwidth used: at the least every weight (%s) and each attended position's keys and values (%s a token, a shared prefix once) per step, over the step's time", mib(r.Traffic.WeightBytes), kib(r.Traffic.KVBytesPerToken))
	}
	b.WriteString(")\n\n| measure |")
	for _, t := range r.Timings {
		name := t.Backend
		if t.Device != "" {
			name += " (" + t.Device + ")"
		}
		fmt.Fprintf(b, " %s |", name)
	}
	b.WriteString("\n| --- |")
	for range r.Timings {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	row := func(label string, cell func(t *BackendTiming) string) {
		fmt.Fprintf(b, "| %s |", label)
		for _, t := range r.Timings {
			s := cell(t)
			if s == "" {
				s = "-"
			}
			fmt.Fprintf(b, " %s |", s)
		}
		b.WriteString("\n")
	}
	row(fmt.Sprintf("decode, 1 row (%d tokens from position 0)", c.DecodeTokens), func(t *BackendTiming) string {
		if t.Decode == nil {
			return ""
		}
		return fmt.Sprintf("%.1f tokens/s (%s)%s", t.Decode.TokensPerSec, ms(t.Decode.PerToken), r.bw(r.Traffic.decode(t.Decode.Tokens), t.Decode.PerToken))
	})
	for i, nb := range c.Branches {
		if nb == 1 && i == 0 && len(c.Branches) > 1 {
			continue // the reference of "vs 1", the decode row's twin
		}
		row(fmt.Sprintf("%d-branch step (forks of a %d-token prefix)", nb, c.Prefix), func(t *BackendTiming) string {
			for _, s := range t.Steps {
				if s.Branches == nb {
					return fmt.Sprintf("%s, %.1f tokens/s, %.2fx the 1-branch step%s", ms(s.Step), s.TokensPerSec, s.VsOne, r.bw(r.Traffic.step(nb, c.Prefix, c.Steps), s.Step))
				}
			}
			return ""
		})
	}
	row("the same without the rows' statistics (the forward pass alone, as llama.cpp's benchmarks): decode; each branch step", func(t *BackendTiming) string {
		if t.Bare == nil || t.Bare.Decode == nil {
			return ""
		}
		s := fmt.Sprintf("%.1f tokens/s (%s)", t.Bare.Decode.TokensPerSec, ms(t.Bare.Decode.PerToken))
		for _, st := range t.Bare.Steps {
			if st.Branches > 1 {
				s += fmt.Sprintf("; %d: %s, %.1f tokens/s", st.Branches, ms(st.Step), st.TokensPerSec)
			}
		}
		return s
	})
	row(fmt.Sprintf("prefill of %d tokens, one batch", c.PromptTokens), func(t *BackendTiming) string {
		if t.Prefill == nil {
			return ""
		}
		return fmt.Sprintf("%s, %.1f tokens/s%s", ms(t.Prefill.Time), t.Prefill.TokensPerSec, r.bw(r.Traffic.prefill(t.Prefill.Tokens), t.Prefill.Time))
	})
	row("search outside the forward pass (beam-adaptive; share of its wall time; per step, vs the step)", func(t *BackendTiming) string {
		s := t.Search
		if s == nil {
			return ""
		}
		per := time.Duration(0)
		if s.Passes > 0 {
			per = (s.Wall - s.Forward) / time.Duration(s.Passes)
		}
		return fmt.Sprintf("%.1f%% of %s (%d steps, %d rows); %s a step, %.1f%% of a step", 100*s.Share, ms(s.Wall), s.Passes, s.Rows, us(per), 100*s.VsStep)
	})
	row("server, 1 client (beam-adaptive requests one after another)", func(t *BackendTiming) string {
		if t.Server == nil {
			return ""
		}
		p := t.Server.One
		return fmt.Sprintf("%.1f tokens/s (%d requests in %.1f s, p50 %s%s)", p.TokensPerSec, p.Requests, p.Seconds, ms(p.P50), p.passes())
	})
	manyLabel := "server, concurrent clients"
	for _, t := range r.Timings {
		if t.Server != nil {
			manyLabel = fmt.Sprintf("server, %d concurrent clients, against 1", t.Server.Many.Clients)
			break
		}
	}
	row(manyLabel, func(t *BackendTiming) string {
		if t.Server == nil {
			return ""
		}
		p := t.Server.Many
		errs := ""
		if n := p.Errors + t.Server.One.Errors; n > 0 {
			errs = fmt.Sprintf(", %d errors", n)
		}
		return fmt.Sprintf("%.1f tokens/s, **%.2fx** (%d requests in %.1f s, p50 %s%s%s)", p.TokensPerSec, t.Server.Ratio, p.Requests, p.Seconds, ms(p.P50), errs, p.passes())
	})
	b.WriteString("\n")
	for _, t := range r.Timings {
		for _, e := range t.Errors {
			fmt.Fprintf(b, "- %s: %s\n", t.Backend, oneLine(e))
		}
	}
	if len(r.Timings) > 0 {
		b.WriteString("\n")
	}
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }
