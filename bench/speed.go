package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// SpeedConfig says what the speed measurements run. The zero value of a
// field means its default (DefaultSpeedConfig).
type SpeedConfig struct {
	Rounds       int   // repetitions of every timed measurement; the median is kept
	DecodeTokens int   // tokens of the single-stream decode, from position 0
	Prefix       int   // tokens the branches share before they fork
	Steps        int   // timed steps per branch count and round
	Branches     []int // branch counts of the branch-step measurement
	PromptTokens int   // prompt length of the prefill measurement
	ForkPrefixes []int // sequence lengths of the fork-cost measurement
	TreePrefix   int   // shared prefix of the KV-memory measurement
	TreeSteps    int   // tokens each branch adds after the fork there
	BlockSize    int   // KV cache block size
	// KVType is the KV cache's element type (kvcache.F32, the zero value,
	// or kvcache.F16).
	KVType kvcache.ElemType
	// Backend names the model.Backend measured (model.RegisterBackend);
	// "cpu" when empty.
	Backend string
	// NoStats measures a backend that computes each row's statistics
	// with the step (the ggml backend: SetRowStats) without them: the
	// forward pass alone, as llama.cpp's benchmarks time it.
	NoStats bool `json:",omitempty"`
}

// rowStatser is a backend that computes rows' statistics with a step.
type rowStatser interface{ SetRowStats(k int) }

// backend makes the measured backend over a cache of the given capacity
// in token positions.
func (c SpeedConfig) backend(m *model.Model, tokens int) (model.Backend, error) {
	name := c.Backend
	if name == "" {
		name = "cpu"
	}
	be, err := model.NewBackend(name, m, model.CacheConfig{Tokens: tokens, BlockSize: c.BlockSize, DType: c.KVType})
	if rs, ok := be.(rowStatser); ok && c.NoStats {
		rs.SetRowStats(0)
	}
	return be, err
}

// DefaultSpeedConfig is the full measurement: a few minutes for a
// 110M-parameter model on two cores.
func DefaultSpeedConfig() SpeedConfig {
	return SpeedConfig{
		Rounds:       5,
		DecodeTokens: 128,
		Prefix:       64,
		Steps:        16,
		Branches:     []int{1, 2, 4, 8, 16, 32, 64},
		PromptTokens: 128,
		ForkPrefixes: []int{64, 256, 1024, 4096},
		TreePrefix:   512,
		TreeSteps:    32,
		BlockSize:    kvcache.DefaultBlockSize,
	}
}

// QuickSpeedConfig measures the same things with fewer repetitions and
// tokens, in well under a minute for a 110M-parameter model.
func QuickSpeedConfig() SpeedConfig {
	c := DefaultSpeedConfig()
	c.Rounds = 1
	c.DecodeTokens = 32
	c.Steps = 4
	return c
}

func (c SpeedConfig) withDefaults() SpeedConfig {
	d := DefaultSpeedConfig()
	set := func(x *int, def int) {
		if *x <= 0 {
			*x = def
		}
	}
	set(&c.Rounds, d.Rounds)
	set(&c.DecodeTokens, d.DecodeTokens)
	set(&c.Prefix, d.Prefix)
	set(&c.Steps, d.Steps)
	set(&c.PromptTokens, d.PromptTokens)
	set(&c.TreePrefix, d.TreePrefix)
	set(&c.TreeSteps, d.TreeSteps)
	set(&c.BlockSize, d.BlockSize)
	if len(c.Branches) == 0 {
		c.Branches = d.Branches
	}
	if len(c.ForkPrefixes) == 0 {
		c.ForkPrefixes = d.ForkPrefixes
	}
	return c
}

// DecodeResult is the speed of single-stream decoding: one row per Forward.
type DecodeResult struct {
	Tokens       int
	PerToken     time.Duration // median over rounds of the mean time per token
	TokensPerSec float64
}

// StepResult is the time of one Forward advancing Branches forks of one
// prefix by one token each.
type StepResult struct {
	Branches int
	Step     time.Duration // median over rounds of the mean step time
	// VsOne is the median over rounds of the round's step time over the
	// one-branch step time of the same round: a ratio of times taken
	// seconds apart, which a drift of the machine's speed between rounds
	// does not skew.
	VsOne float64
	// TokensPerSec is the rows (tokens) the step computes per second.
	TokensPerSec float64
}

// PrefillResult is the speed of a prompt fed as one batch.
type PrefillResult struct {
	Tokens       int
	Time         time.Duration // median over rounds
	TokensPerSec float64
}

// ForkResult is the cost of forking a sequence of Prefix positions.
type ForkResult struct {
	Prefix int
	Blocks int           // blocks in the sequence's table
	Fork   time.Duration // one kvcache Fork
	// Copy is the time to copy the prefix's keys and values once: what a
	// fork costs a cache that does not share blocks.
	Copy    time.Duration
	KVBytes int64 // bytes of K and V the prefix holds
}

// TreeMemResult is the KV memory of Branches forks of a Prefix-token
// prefix that each added Steps tokens.
type TreeMemResult struct {
	Branches, Prefix, Steps int
	BytesInUse              int64   // blocks really held (kvcache Stats.BytesInUse)
	PrivateBytes            int64   // one private copy per branch (Stats.LogicalBytes)
	Saving                  float64 // PrivateBytes / BytesInUse
}

// median returns the median of ds (the lower middle for an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// tokens returns n pseudo-random token ids below vocab.
func tokens(rng *rand.Rand, n, vocab int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = rng.IntN(vocab)
	}
	return t
}

// MeasureDecode decodes c.DecodeTokens tokens one Forward at a time from
// position 0 of a fresh sequence (as llama-bench's tg test does), after a
// warm-up, c.Rounds times.
func MeasureDecode(m *model.Model, c SpeedConfig) (DecodeResult, error) {
	c = c.withDefaults()
	n := min(c.DecodeTokens, m.Config.ContextLen)
	be, err := c.backend(m, n)
	if err != nil {
		return DecodeResult{}, err
	}
	defer be.Close()
	r, kv := be, be.Cache()
	toks := tokens(rand.New(rand.NewPCG(1, 1)), n, m.Config.Vocab)
	row := []model.Row{{}}
	run := func(k int) (time.Duration, error) {
		seq := kv.NewSeq()
		defer kv.Free(seq)
		start := time.Now()
		for _, tok := range toks[:k] {
			row[0] = model.Row{Seq: seq, Token: tok}
			if _, err := r.Forward(row); err != nil {
				return 0, fmt.Errorf("bench: decode: %w", err)
			}
		}
		return time.Since(start), nil
	}
	if _, err := run(min(n, 4)); err != nil {
		return DecodeResult{}, err
	}
	times := make([]time.Duration, c.Rounds)
	for i := range times {
		d, err := run(n)
		if err != nil {
			return DecodeResult{}, err
		}
		times[i] = d / time.Duration(n)
	}
	per := median(times)
	return DecodeResult{Tokens: n, PerToken: per, TokensPerSec: float64(time.Second) / float64(per)}, nil
}

// MeasureBranchSteps prefills a c.Prefix-token prefix once, then for each
// branch count B forks it B times and times c.Steps Forward calls of B
// rows, one per branch. Before that, untimed, the same steps run on
// other forks of the prefix, which are then freed: the timed steps start
// at the prefix's end with the caches settled for B branches. (A step of
// one branch right after 64 branches' steps is up to a third slower for
// tens of steps: the 64 branches' keys and values have pushed the weights
// out of the last-level cache. Warm-up steps on the timed forks instead
// would lengthen their contexts.) The branch counts are interleaved
// within each of c.Rounds rounds, so that a change of machine load hits
// them alike, in order and in reverse order every other round; VsOne is
// relative to the first branch count, which should be 1.
func MeasureBranchSteps(m *model.Model, c SpeedConfig) ([]StepResult, error) {
	c = c.withDefaults()
	maxB := slices.Max(c.Branches)
	if c.Prefix+c.Steps > m.Config.ContextLen {
		return nil, fmt.Errorf("bench: prefix %d + %d steps exceeds the context of %d", c.Prefix, c.Steps, m.Config.ContextLen)
	}
	// The prefix, plus each branch's steps and a copied partial block.
	be, err := c.backend(m, c.Prefix+c.BlockSize+maxB*(c.Steps+c.BlockSize))
	if err != nil {
		return nil, err
	}
	defer be.Close()
	r, kv := be, be.Cache()
	rng := rand.New(rand.NewPCG(2, 2))
	root := kv.NewSeq()
	rows := make([]model.Row, 0, max(c.Prefix, maxB))
	for i, tok := range tokens(rng, c.Prefix, m.Config.Vocab) {
		rows = append(rows, model.Row{Seq: root, Token: tok, NoLogits: i < c.Prefix-1})
	}
	if _, err := r.Forward(rows); err != nil {
		return nil, fmt.Errorf("bench: prefill of the shared prefix: %w", err)
	}
	toks := tokens(rng, maxB*c.Steps, m.Config.Vocab)
	seqs := make([]*kvcache.Seq, maxB)
	// steps forks b branches and runs c.Steps steps of them.
	steps := func(b int) (time.Duration, error) {
		for i := range b {
			seqs[i] = kv.Fork(root)
		}
		defer func() {
			for i := range b {
				kv.Free(seqs[i])
			}
		}()
		start := time.Now()
		for s := range c.Steps {
			rows = rows[:0]
			for i := range b {
				rows = append(rows, model.Row{Seq: seqs[i], Token: toks[s*maxB+i]})
			}
			if _, err := r.Forward(rows); err != nil {
				return 0, fmt.Errorf("bench: step of %d branches: %w", b, err)
			}
		}
		return time.Since(start) / time.Duration(c.Steps), nil
	}
	run := func(b int) (time.Duration, error) {
		if _, err := steps(b); err != nil { // warm-up
			return 0, err
		}
		return steps(b)
	}
	times := make([][]time.Duration, len(c.Branches))
	for round := range c.Rounds {
		for k := range c.Branches {
			i := k
			if round%2 == 1 { // every other round backwards: B=1 does not always follow B=64
				i = len(c.Branches) - 1 - k
			}
			d, err := run(c.Branches[i])
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], d)
		}
	}
	kv.Free(root)
	res := make([]StepResult, len(c.Branches))
	for i, b := range c.Branches {
		step := median(times[i])
		res[i] = StepResult{Branches: b, Step: step, TokensPerSec: float64(b) * float64(time.Second) / float64(step)}
	}
	for i := range res {
		ratios := make([]float64, len(times[i]))
		for r := range ratios {
			ratios[r] = float64(times[i][r]) / float64(times[0][r])
		}
		res[i].VsOne = medianF(ratios)
	}
	return res, nil
}

// MeasurePrefill feeds a c.PromptTokens-token prompt as one Forward (logits
// for its last row only) into a fresh sequence, c.Rounds times after a
// warm-up.
func MeasurePrefill(m *model.Model, c SpeedConfig) (PrefillResult, error) {
	c = c.withDefaults()
	n := min(c.PromptTokens, m.Config.ContextLen)
	be, err := c.backend(m, n)
	if err != nil {
		return PrefillResult{}, err
	}
	defer be.Close()
	r, kv := be, be.Cache()
	toks := tokens(rand.New(rand.NewPCG(3, 3)), n, m.Config.Vocab)
	rows := make([]model.Row, n)
	run := func() (time.Duration, error) {
		seq := kv.NewSeq()
		defer kv.Free(seq)
		for i, tok := range toks {
			rows[i] = model.Row{Seq: seq, Token: tok, NoLogits: i < n-1}
		}
		start := time.Now()
		if _, err := r.Forward(rows); err != nil {
			return 0, fmt.Errorf("bench: prefill: %w", err)
		}
		return time.Since(start), nil
	}
	if _, err := run(); err != nil {
		return PrefillResult{}, err
	}
	times := make([]time.Duration, c.Rounds)
	for i := range times {
		if times[i], err = run(); err != nil {
			return PrefillResult{}, err
		}
	}
	t := median(times)
	return PrefillResult{Tokens: n, Time: t, TokensPerSec: float64(n) * float64(time.Second) / float64(t)}, nil
}

// forkTarget is the time one fork measurement is repeated for.
const forkTarget = 20 * time.Millisecond

// MeasureForkCost times kvcache Fork on sequences of each length in
// c.ForkPrefixes, in a pool of the given model shape (the keys and values
// are left zero: a fork never reads them), against one copy of that
// prefix's keys and values.
func MeasureForkCost(cfg model.Config, c SpeedConfig) ([]ForkResult, error) {
	c = c.withDefaults()
	res := make([]ForkResult, 0, len(c.ForkPrefixes))
	const batch = 256
	forks := make([]*kvcache.Seq, batch)
	for _, n := range c.ForkPrefixes {
		kv, err := kvcache.New(kvcache.Config{Layers: cfg.Layers, KVDim: cfg.KVDim(), BlockSize: c.BlockSize, DType: c.KVType,
			MaxBlocks: (n + c.BlockSize - 1) / c.BlockSize})
		if err != nil {
			return nil, fmt.Errorf("bench: fork cost: %w", err)
		}
		seq := kv.NewSeq()
		for range n {
			if _, err := kv.Append(seq); err != nil {
				return nil, fmt.Errorf("bench: fork cost, prefix %d: %w", n, err)
			}
		}
		// The pool is hundreds of megabytes at long prefixes: collect now,
		// or the collection its allocation set off runs during the timing
		// (an F32 pool's forks at 4096 tokens took 2.3 µs then, 0.5 after).
		runtime.GC()
		var total time.Duration
		count := 0
		for total < forkTarget || count < batch {
			start := time.Now()
			for i := range forks {
				forks[i] = kv.Fork(seq)
			}
			total += time.Since(start)
			count += batch
			for _, f := range forks {
				kv.Free(f)
			}
		}
		res = append(res, ForkResult{Prefix: n, Blocks: kv.Blocks(seq), Fork: total / time.Duration(count),
			Copy: copyTime(n * cfg.Layers * 2 * cfg.KVDim()), KVBytes: int64(n) * int64(cfg.Layers) * 2 * int64(cfg.KVDim()) * 4})
	}
	return res, nil
}

// copyTime is the best of a few copies of n float32s.
func copyTime(n int) time.Duration {
	src, dst := make([]float32, n), make([]float32, n)
	for i := range src { // touch the pages
		src[i] = 1
	}
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		copy(dst, src)
		best = min(best, time.Since(start))
	}
	return best
}

// MeasureTreeMemory builds, for each branch count B, B forks of a
// c.TreePrefix-token sequence that each append c.TreeSteps positions, in a
// pool of the given model shape, and reports the bytes held against one
// private copy per branch.
func MeasureTreeMemory(cfg model.Config, c SpeedConfig) ([]TreeMemResult, error) {
	c = c.withDefaults()
	res := make([]TreeMemResult, 0, len(c.Branches))
	for _, b := range c.Branches {
		perBranch := (c.TreePrefix+c.TreeSteps)/c.BlockSize + 2
		kv, err := kvcache.New(kvcache.Config{Layers: cfg.Layers, KVDim: cfg.KVDim(), BlockSize: c.BlockSize, DType: c.KVType,
			MaxBlocks: c.TreePrefix/c.BlockSize + 1 + b*perBranch})
		if err != nil {
			return nil, fmt.Errorf("bench: tree memory: %w", err)
		}
		root := kv.NewSeq()
		for range c.TreePrefix {
			if _, err := kv.Append(root); err != nil {
				return nil, fmt.Errorf("bench: tree memory: %w", err)
			}
		}
		for range b {
			s := kv.Fork(root)
			for range c.TreeSteps {
				if _, err := kv.Append(s); err != nil {
					return nil, fmt.Errorf("bench: tree memory, %d branches: %w", b, err)
				}
			}
		}
		kv.Free(root)
		st := kv.Stats()
		res = append(res, TreeMemResult{Branches: b, Prefix: c.TreePrefix, Steps: c.TreeSteps,
			BytesInUse: st.BytesInUse, PrivateBytes: st.LogicalBytes, Saving: float64(st.LogicalBytes) / float64(st.BytesInUse)})
	}
	return res, nil
}

// SpeedReport gathers every speed measurement of one model.
type SpeedReport struct {
	Model   string // shape or file name
	DType   kernels.DType
	Params  int64
	Threads int
	Kernels string // kernels.Implementation()
	Config  SpeedConfig

	Decode  DecodeResult
	Steps   []StepResult
	Prefill PrefillResult
	Forks   []ForkResult
	TreeMem []TreeMemResult
	Llama   *LlamaBenchResult // llama-bench on the same model, when it ran
	Versus  *DecodeComparison // our decode alternating with llama-bench, when it ran
	// VersusPrefill is our prefill alternating with llama-bench's, when
	// it ran; VersusBatched our 16-branch step alternating with
	// llama-batched-bench's 16 sequences, when LLAMA_BATCHED_BENCH named
	// it.
	VersusPrefill *DecodeComparison
	VersusBatched *DecodeComparison
	LlamaErr      error `json:"-"` // why llama-bench did not run, if it was asked to
	// Overhead is the search's time outside the forward pass, mode by
	// mode (MeasureSearchOverhead), when it was measured.
	Overhead []OverheadResult
}

// MaxOverhead returns the largest share of a search's time outside the
// forward pass over the modes measured, and that mode's result.
func (r *SpeedReport) MaxOverhead() (OverheadResult, bool) {
	var worst OverheadResult
	for _, o := range r.Overhead {
		if o.Share >= worst.Share {
			worst = o
		}
	}
	return worst, len(r.Overhead) > 0
}

// MarshalJSON writes the report with LlamaErr as a string.
func (r *SpeedReport) MarshalJSON() ([]byte, error) {
	type plain SpeedReport
	msg := ""
	if r.LlamaErr != nil {
		msg = r.LlamaErr.Error()
	}
	return json.Marshal(struct {
		*plain
		LlamaError string `json:",omitempty"`
	}{(*plain)(r), msg})
}

// MeasureSpeed runs every measurement on m.
func MeasureSpeed(m *model.Model, name string, dtype kernels.DType, params int64, c SpeedConfig) (*SpeedReport, error) {
	c = c.withDefaults()
	rep := &SpeedReport{Model: name, DType: dtype, Params: params, Threads: kernels.Threads(), Kernels: kernels.Implementation(), Config: c}
	var err error
	if rep.Decode, err = MeasureDecode(m, c); err != nil {
		return nil, err
	}
	if rep.Steps, err = MeasureBranchSteps(m, c); err != nil {
		return nil, err
	}
	if rep.Prefill, err = MeasurePrefill(m, c); err != nil {
		return nil, err
	}
	if rep.Forks, err = MeasureForkCost(m.Config, c); err != nil {
		return nil, err
	}
	if rep.TreeMem, err = MeasureTreeMemory(m.Config, c); err != nil {
		return nil, err
	}
	return rep, nil
}

// StepRatio returns the step time of b branches relative to one branch, or
// 0 when b was not measured.
func (r *SpeedReport) StepRatio(b int) float64 {
	for _, s := range r.Steps {
		if s.Branches == b {
			return s.VsOne
		}
	}
	return 0
}

// Markdown writes the report as markdown tables.
func (r *SpeedReport) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s %v (%.1fM parameters), %v KV cache, %d threads, kernels %s\n\n", r.Model, r.DType, float64(r.Params)/1e6, r.Config.KVType, r.Threads, r.Kernels)
	fmt.Fprintf(&b, "| measure | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| single-stream decode (%d tokens from position 0) | %.1f tokens/s (%s/token) |\n", r.Decode.Tokens, r.Decode.TokensPerSec, ms(r.Decode.PerToken))
	switch {
	case r.Versus != nil:
		l := r.Versus
		rs := l.Ratios()
		fmt.Fprintf(&b, "| decode, in %d interleaved pairs with llama.cpp on the same GGUF: ours | median %.1f tokens/s |\n", len(l.Ours), medianF(l.Ours))
		extra := strings.Join(LlamaBenchArgs(), " ")
		if extra != "" {
			extra = " " + extra
		}
		fmt.Fprintf(&b, "| llama.cpp (llama-bench -t %d -p 0 -n %d -r 1%s, %s KV cache, build %s) | median %.1f tokens/s |\n", l.Threads, l.Tokens, extra, l.LlamaKV, l.LlamaBuild, medianF(l.Llama))
		fmt.Fprintf(&b, "| ours / llama.cpp decode, median of the pairs' ratios | **%.2f** (pairs %.2f to %.2f; load average %.2f to %.2f) |\n", l.MedianRatio(), slices.Min(rs), slices.Max(rs), slices.Min(l.Load), slices.Max(l.Load))
	case r.Llama != nil:
		fmt.Fprintf(&b, "| llama.cpp decode, same GGUF (llama-bench -t %d -p 0 -n %d) | %.1f ± %.1f tokens/s |\n", r.Llama.Threads, r.Llama.Tokens, r.Llama.TokensPerSec, r.Llama.StdDev)
		fmt.Fprintf(&b, "| ours / llama.cpp decode | %.2f |\n", r.Decode.TokensPerSec/r.Llama.TokensPerSec)
	case r.LlamaErr != nil:
		fmt.Fprintf(&b, "| llama.cpp decode | not measured: %s |\n", strings.ReplaceAll(r.LlamaErr.Error(), "|", "/"))
	}
	fmt.Fprintf(&b, "| prefill (%d-token prompt, one batch) | %.1f tokens/s (%s) |\n", r.Prefill.Tokens, r.Prefill.TokensPerSec, ms(r.Prefill.Time))
	if l := r.VersusPrefill; l != nil {
		rs := l.Ratios()
		fmt.Fprintf(&b, "| prefill, in %d interleaved pairs with llama.cpp (llama-bench -p %d -n 0): ours / llama.cpp | median %.1f / %.1f tokens/s, median of the pairs' ratios **%.2f** (%.2f to %.2f) |\n",
			len(l.Ours), l.Tokens, medianF(l.Ours), medianF(l.Llama), l.MedianRatio(), slices.Min(rs), slices.Max(rs))
	}
	fmt.Fprintf(&b, "| 16-branch step / 1-branch step | %.2f |\n", r.StepRatio(16))
	if l := r.VersusBatched; l != nil {
		rs := l.Ratios()
		fmt.Fprintf(&b, "| %s, in %d interleaved pairs with llama-batched-bench (-npp %d -ntg 8 -npl %d -pps): ours / llama.cpp | median %.1f / %.1f tokens/s, median of the pairs' ratios **%.2f** (%.2f to %.2f) |\n",
			l.Test, len(l.Ours), r.Config.Prefix, l.Tokens, medianF(l.Ours), medianF(l.Llama), l.MedianRatio(), slices.Min(rs), slices.Max(rs))
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "Branch step: B forks of a %d-token prefix, one row each, one Forward per step (median of %d rounds of %d steps after %[3]d untimed ones; vs B=1: median of the rounds' ratios)\n\n", r.Config.Prefix, r.Config.Rounds, r.Config.Steps)
	fmt.Fprintf(&b, "| B | step | vs B=1 | tokens/s |\n| ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %d | %s | %.2f | %.1f |\n", s.Branches, ms(s.Step), s.VsOne, s.TokensPerSec)
	}
	fmt.Fprintf(&b, "\nFork cost: kvcache Fork of a sequence, against copying its keys and values once\n\n")
	fmt.Fprintf(&b, "| prefix tokens | blocks | fork | KV bytes | copying them |\n| ---: | ---: | ---: | ---: | ---: |\n")
	for _, f := range r.Forks {
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", f.Prefix, f.Blocks, us(f.Fork), mib(f.KVBytes), ms(f.Copy))
	}
	if len(r.TreeMem) > 0 {
		t0 := r.TreeMem[0]
		fmt.Fprintf(&b, "\nKV memory of a tree: B branches forked from a %d-token prefix, %d tokens each after the fork (block size %d)\n\n", t0.Prefix, t0.Steps, r.Config.BlockSize)
		fmt.Fprintf(&b, "| B | in use | one copy per branch | saving |\n| ---: | ---: | ---: | ---: |\n")
		for _, t := range r.TreeMem {
			fmt.Fprintf(&b, "| %d | %s | %s | %.1fx |\n", t.Branches, mib(t.BytesInUse), mib(t.PrivateBytes), t.Saving)
		}
	}
	b.WriteString("\n")
	OverheadMarkdown(&b, r.Overhead)
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond)) }
func mib(n int64) string        { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// LlamaBenchResult is llama.cpp's decode speed on a GGUF file.
type LlamaBenchResult struct {
	Tokens       int // n_gen
	Threads      int
	TokensPerSec float64   // avg_ts
	StdDev       float64   // stddev_ts
	Samples      []float64 // samples_ts: tokens/s of each repetition
	Build        string    // build_commit
	CPU          string    // cpu_info
}

// RunLlamaBench runs llama.cpp's llama-bench binary on a GGUF file:
// decode only (-p 0 -n tokens) on the given number of threads, with
// llama-bench's default 5 repetitions, and returns its result.
func RunLlamaBench(ctx context.Context, bin, gguf string, threads, tokens int) (*LlamaBenchResult, error) {
	return RunLlamaBenchReps(ctx, bin, gguf, threads, tokens, 0, "")
}

// LlamaBenchArgs are the extra llama-bench arguments LLAMA_BENCH_ARGS
// holds, split at spaces (ik_llama.cpp's run-time repacking: "-rtr 1").
func LlamaBenchArgs() []string { return strings.Fields(os.Getenv("LLAMA_BENCH_ARGS")) }

// RunLlamaBenchReps is RunLlamaBench with reps repetitions (llama-bench's
// -r; its default when reps <= 0) and the KV cache type kv (llama-bench's
// -ctk and -ctv, e.g. "f16" or "q8_0"; it takes no "f32"; its default,
// f16, when empty).
func RunLlamaBenchReps(ctx context.Context, bin, gguf string, threads, tokens, reps int, kv string) (*LlamaBenchResult, error) {
	return RunLlamaBenchTest(ctx, bin, gguf, threads, 0, tokens, reps, kv)
}

// RunLlamaBenchTest is RunLlamaBenchReps for any one llama-bench test:
// prompt tokens in one batch (-p; prefill) and gen tokens decoded (-n),
// one of them 0. The result's Tokens is the test's tokens.
func RunLlamaBenchTest(ctx context.Context, bin, gguf string, threads, prompt, gen, reps int, kv string) (*LlamaBenchResult, error) {
	args := []string{"-m", gguf, "-t", fmt.Sprint(threads), "-p", fmt.Sprint(prompt), "-n", fmt.Sprint(gen), "-o", "json"}
	if reps > 0 {
		args = append(args, "-r", fmt.Sprint(reps))
	}
	if kv != "" {
		args = append(args, "-ctk", kv, "-ctv", kv)
	}
	args = append(args, LlamaBenchArgs()...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tail := stderr.String()
		if len(tail) > 500 {
			tail = tail[len(tail)-500:]
		}
		return nil, fmt.Errorf("bench: %s: %w: %s", bin, err, strings.TrimSpace(tail))
	}
	var runs []struct {
		NPrompt   int       `json:"n_prompt"`
		NGen      int       `json:"n_gen"`
		NThreads  int       `json:"n_threads"`
		AvgTS     float64   `json:"avg_ts"`
		StdDevTS  float64   `json:"stddev_ts"`
		SamplesTS []float64 `json:"samples_ts"`
		Build     string    `json:"build_commit"`
		CPU       string    `json:"cpu_info"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &runs); err != nil {
		return nil, fmt.Errorf("bench: %s printed no JSON results: %w", bin, err)
	}
	for _, r := range runs {
		if r.NPrompt == prompt && r.NGen == gen {
			return &LlamaBenchResult{Tokens: prompt + gen, Threads: r.NThreads, TokensPerSec: r.AvgTS, StdDev: r.StdDevTS,
				Samples: r.SamplesTS, Build: r.Build, CPU: r.CPU}, nil
		}
	}
	if prompt > 0 {
		return nil, errors.New("bench: llama-bench reported no prefill test")
	}
	return nil, errors.New("bench: llama-bench reported no decode test")
}

// DecodeComparison is single-stream decode speed, ours and llama.cpp's on
// the same weights, measured in interleaved pairs so that both see the
// same machine load: pair i ran Ours[i] and Llama[i] back to back (ours
// first in even pairs, llama.cpp first in odd ones, so that a drift in
// the load favours neither), with the 1-minute load average Load[i]
// (/proc/loadavg; 0 where it cannot be read) read before it.
type DecodeComparison struct {
	Test            string // "decode" (CompareDecode) or "prefill" (ComparePrefill)
	Tokens, Threads int
	Ours, Llama     []float64 // tokens/s of each pair
	Load            []float64
	LlamaBuild      string
	LlamaKV         string // llama.cpp's KV cache type
}

// CompareDecode runs rounds interleaved pairs of our single-stream decode
// of m (tokens from position 0, after a warm-up) and a llama-bench run of
// one repetition on gguf, which must hold the same model. Ours keeps the
// KV cache as kv, and so does llama.cpp, except that llama-bench takes no
// f32 KV cache: it then keeps its default, f16, which reads half our
// bytes.
func CompareDecode(ctx context.Context, m *model.Model, bin, gguf string, tokens, rounds int, kv kvcache.ElemType) (*DecodeComparison, error) {
	c := DefaultSpeedConfig()
	c.DecodeTokens, c.Rounds, c.KVType = tokens, 1, kv
	return compareWithLlama(ctx, "decode", tokens, rounds, kv, func() (float64, error) {
		d, err := MeasureDecode(m, c)
		return d.TokensPerSec, err
	}, func(ctk string) (*LlamaBenchResult, error) {
		return RunLlamaBenchTest(ctx, bin, gguf, kernels.Threads(), 0, tokens, 1, ctk)
	})
}

// ComparePrefill is CompareDecode for the prefill of a prompt of tokens
// in one batch (ours: MeasurePrefill; llama-bench: -p tokens -n 0).
func ComparePrefill(ctx context.Context, m *model.Model, bin, gguf string, tokens, rounds int, kv kvcache.ElemType) (*DecodeComparison, error) {
	c := DefaultSpeedConfig()
	c.PromptTokens, c.Rounds, c.KVType = tokens, 1, kv
	return compareWithLlama(ctx, "prefill", tokens, rounds, kv, func() (float64, error) {
		p, err := MeasurePrefill(m, c)
		return p.TokensPerSec, err
	}, func(ctk string) (*LlamaBenchResult, error) {
		return RunLlamaBenchTest(ctx, bin, gguf, kernels.Threads(), tokens, 0, 1, ctk)
	})
}

// compareWithLlama runs rounds interleaved pairs of ours and llama.
func compareWithLlama(ctx context.Context, test string, tokens, rounds int, kv kvcache.ElemType, ours func() (float64, error), llama func(ctk string) (*LlamaBenchResult, error)) (*DecodeComparison, error) {
	cmp := &DecodeComparison{Test: test, Tokens: tokens, Threads: kernels.Threads(), LlamaKV: kvcache.F16.String()}
	ctk := ""
	if kv != kvcache.F32 {
		ctk, cmp.LlamaKV = kv.String(), kv.String()
	}
	runOurs := func() error {
		v, err := ours()
		if err == nil {
			cmp.Ours = append(cmp.Ours, v)
		}
		return err
	}
	runLlama := func() error {
		l, err := llama(ctk)
		if err == nil {
			cmp.Llama = append(cmp.Llama, l.TokensPerSec)
			cmp.LlamaBuild = l.Build
		}
		return err
	}
	for i := range max(rounds, 1) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cmp.Load = append(cmp.Load, LoadAverage())
		first, second := runOurs, runLlama
		if i%2 == 1 {
			first, second = runLlama, runOurs
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	return cmp, nil
}

// RunBatchedBench runs llama.cpp's llama-batched-bench (bin) on gguf:
// branches sequences sharing a prompt of prefix tokens (-pps), each then
// decoding gen tokens, one row each per step, and returns the decode
// phase's tokens per second over all sequences (S_TG): the counterpart of
// a step of as many branches. Extra arguments come from
// LLAMA_BATCHED_BENCH_ARGS (e.g. "-rtr" for ik_llama.cpp).
func RunBatchedBench(ctx context.Context, bin, gguf string, threads, prefix, gen, branches int) (float64, error) {
	args := []string{"-m", gguf, "-c", fmt.Sprint(prefix + gen*branches + 64), "-npp", fmt.Sprint(prefix), "-ntg", fmt.Sprint(gen),
		"-npl", fmt.Sprint(branches), "-pps", "-t", fmt.Sprint(threads)}
	args = append(args, strings.Fields(os.Getenv("LLAMA_BATCHED_BENCH_ARGS"))...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 500 {
			tail = tail[len(tail)-500:]
		}
		return 0, fmt.Errorf("bench: %s: %w: %s", bin, err, strings.TrimSpace(tail))
	}
	return parseBatchedBench(string(out), prefix, gen, branches)
}

// parseBatchedBench finds the S_TG column of llama-batched-bench's table
// row for (prefix, gen, branches).
func parseBatchedBench(out string, prefix, gen, branches int) (float64, error) {
	col := -1
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) < 3 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if i := slices.Index(f, "S_TG t/s"); i >= 0 {
			col = i
			continue
		}
		if col < 0 || col >= len(f) || len(f) < 4 || f[1] != fmt.Sprint(prefix) || f[2] != fmt.Sprint(gen) || f[3] != fmt.Sprint(branches) {
			continue
		}
		v, err := strconv.ParseFloat(f[col], 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("bench: llama-batched-bench's S_TG %q", f[col])
		}
		return v, nil
	}
	return 0, errors.New("bench: llama-batched-bench printed no result for the test")
}

// CompareBranchStep is CompareDecode for the step of branches rows, each a
// fork of a prefix-token prompt (ours: MeasureBranchSteps, 8 timed steps
// a round; llama.cpp: RunBatchedBench with the same prefix, 8 tokens a
// sequence), in tokens (rows) per second.
func CompareBranchStep(ctx context.Context, m *model.Model, bin, gguf string, branches, prefix, rounds int, kv kvcache.ElemType) (*DecodeComparison, error) {
	c := DefaultSpeedConfig()
	c.Rounds, c.Steps, c.Branches, c.Prefix, c.KVType = 1, 8, []int{branches}, prefix, kv
	return compareWithLlama(ctx, fmt.Sprintf("%d-branch step", branches), branches, rounds, kv, func() (float64, error) {
		s, err := MeasureBranchSteps(m, c)
		if err != nil {
			return 0, err
		}
		return s[len(s)-1].TokensPerSec, nil
	}, func(string) (*LlamaBenchResult, error) {
		v, err := RunBatchedBench(ctx, bin, gguf, kernels.Threads(), prefix, 8, branches)
		if err != nil {
			return nil, err
		}
		return &LlamaBenchResult{Tokens: branches, Threads: kernels.Threads(), TokensPerSec: v}, nil
	})
}

// LoadAverage returns the 1-minute load average of /proc/loadavg, 0 where
// there is none.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Ratios are the pairs' ours / llama.cpp.
func (c *DecodeComparison) Ratios() []float64 {
	r := make([]float64, min(len(c.Ours), len(c.Llama)))
	for i := range r {
		r[i] = c.Ours[i] / c.Llama[i]
	}
	return r
}

// MedianRatio is the median of the pairs' ratios: the comparison's
// result, robust to a disturbed pair (a best-of figure is not).
func (c *DecodeComparison) MedianRatio() float64 { return medianF(c.Ratios()) }

// Median is the median of x (NaN when x is empty).
func Median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	return medianF(x)
}

func medianF(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
