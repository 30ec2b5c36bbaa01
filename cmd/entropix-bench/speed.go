package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/tokenizer"
	"github.com/entropix-search/entropix-search/policy"
)

func init() {
	register("speed", "forward-pass speed, fork cost and KV memory on a generated model", runSpeed)
	register("gguf", "write a generated model as a GGUF file (for llama.cpp)", runGGUF)
}

// parseDTypes reads -dtype: q8_0, q4_k (llama.cpp's Q4_K_M mix), q5_k,
// q6_k, q4_0, f16, bf16, f32 or (when both is allowed) both (F32 and
// Q8_0).
func parseDTypes(s string, both bool) ([]kernels.DType, error) {
	switch strings.ToLower(s) {
	case "q8_0", "q8":
		return []kernels.DType{kernels.Q8_0}, nil
	case "f32":
		return []kernels.DType{kernels.F32}, nil
	case "q4_k", "q4k":
		return []kernels.DType{kernels.Q4_K}, nil
	case "q5_k", "q5k":
		return []kernels.DType{kernels.Q5_K}, nil
	case "q6_k", "q6k":
		return []kernels.DType{kernels.Q6_K}, nil
	case "q4_0":
		return []kernels.DType{kernels.Q4_0}, nil
	case "f16":
		return []kernels.DType{kernels.F16}, nil
	case "bf16":
		return []kernels.DType{kernels.BF16}, nil
	case "both":
		if both {
			return []kernels.DType{kernels.F32, kernels.Q8_0}, nil
		}
	}
	if both {
		return nil, usagef("-dtype %q: want %s or both", s, dtypeNames)
	}
	return nil, usagef("-dtype %q: want %s", s, dtypeNames)
}

// dtypeNames lists -dtype's weight types.
const dtypeNames = "q8_0, q4_k (the Q4_K_M mix), q5_k, q6_k, q4_0, f16, bf16 or f32"

// vocabFor reads the GGUF vocabulary from a llama2.c tokenizer.bin, or
// returns nil (synthetic) when path is empty.
func vocabFor(path string, shape synth.Shape) (*tokenizer.Vocab, error) {
	if path == "" {
		return nil, nil
	}
	return synth.ReadLlama2CVocab(path, shape.Vocab)
}

func runSpeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("speed", "[-shape stories110M] [-dtype q8_0|q4_k|f32|both] [-kv auto|f32|f16] [-quick]", stderr)
	shapeName := fs.String("shape", "stories110M", "model shape: "+strings.Join(synth.Names(), ", "))
	dtypeName := fs.String("dtype", "both", "weight type: "+dtypeNames+", or both (f32 and q8_0)")
	quick := fs.Bool("quick", false, "fewer rounds and tokens: under a minute")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	threads := fs.Int("threads", 0, "kernel threads (0: GOMAXPROCS)")
	tokPath := fs.String("tokenizer", "", "llama2.c tokenizer.bin whose vocabulary the GGUF for llama-bench carries (default: synthetic)")
	modelPath := fs.String("m", "", "measure this GGUF `file` instead of a generated model (any weight type the loader takes; LLAMA_BENCH then runs on the same file)")
	kvName := fs.String("kv", "auto", "KV cache type: f32, f16, or auto: f16 for Q8_0 weights, f32 for F32 (llama-bench gets f16 either way: it has no f32 KV cache)")
	overhead := fs.String("overhead", "1,4,16", "`widths` at which every mode's time outside the forward pass is measured (none: skip)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: entropix-bench speed [-shape stories110M] [-dtype q8_0|q4_k|f32|both] [-kv auto|f32|f16] [-quick]\n\n"+
			"Measures single-stream decode, the step time of B branches in one batch, prefill,\n"+
			"fork cost and the KV memory of a tree on a model with random weights of a real shape,\n"+
			"and prints markdown tables. With LLAMA_BENCH naming llama.cpp's llama-bench binary\n"+
			"(LLAMA_BENCH_ARGS: extra arguments, e.g. \"-rtr 1\" for ik_llama.cpp),\n"+
			"it also writes the model as GGUF to a temporary file and compares decode and prefill\n"+
			"speeds in interleaved pairs; with -m and LLAMA_BATCHED_BENCH naming llama-batched-bench\n"+
			"(LLAMA_BATCHED_BENCH_ARGS, e.g. \"-rtr\"), the 16-branch step too. Last, every search\n"+
			"mode's time outside the forward pass (-overhead widths).\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	shape, err := synth.Lookup(*shapeName)
	if err != nil {
		return usagef("%v", err)
	}
	dtypes, err := parseDTypes(*dtypeName, true)
	if err != nil {
		return err
	}
	if *threads < 0 {
		return usagef("-threads %d", *threads)
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}
	vocab, err := vocabFor(*tokPath, shape)
	if err != nil {
		return err
	}
	if _, _, err := model.ParseKVType(*kvName); err != nil {
		return usagef("-kv: %v", err)
	}
	cfg := bench.DefaultSpeedConfig()
	if *quick {
		cfg = bench.QuickSpeedConfig()
	}
	widths, err := parseWidths(*overhead)
	if err != nil {
		return usagef("-overhead: %v", err)
	}
	addOverhead := func(m *model.Model, rep *bench.SpeedReport) error {
		if len(widths) == 0 {
			return nil
		}
		tokens, rounds := 64, 3
		if *quick {
			tokens, rounds = 16, 1
		}
		fmt.Fprintf(stderr, "measuring the search overhead of every mode (%d tokens, %d rounds)...\n", tokens, rounds)
		var err error
		rep.Overhead, err = bench.MeasureSearchOverhead(ctx, m, widths, tokens, rounds)
		return err
	}
	llamaBench := os.Getenv("LLAMA_BENCH")
	if *modelPath != "" {
		rep, err := speedOfFile(ctx, *modelPath, *kvName, llamaBench, *quick, cfg, addOverhead, stderr)
		if err != nil {
			return err
		}
		if err := rep.Markdown(stdout); err != nil {
			return err
		}
		return targets(stdout, []*bench.SpeedReport{rep})
	}

	var reports []*bench.SpeedReport
	for _, dt := range dtypes {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		fmt.Fprintf(stderr, "generating %s %v (seed %d)...\n", shape.Name, dt, *seed)
		m, err := synth.Generate(shape, dt, *seed)
		if err != nil {
			return err
		}
		kv, err := m.KVType(*kvName)
		if err != nil {
			return err
		}
		cfg.KVType = kv
		fmt.Fprintf(stderr, "measuring (%s)...\n", time.Since(start).Round(time.Millisecond))
		rep, err := bench.MeasureSpeed(m, shape.Name, dt, shape.Params(), cfg)
		if err != nil {
			return err
		}
		if err := addOverhead(m, rep); err != nil {
			return err
		}
		if llamaBench != "" {
			rounds := 5
			if *quick {
				rounds = 3
			}
			fmt.Fprintf(stderr, "alternating our decode and prefill with %s, %d rounds each...\n", llamaBench, rounds)
			rep.Versus, rep.VersusPrefill, rep.LlamaErr = versusLlama(ctx, llamaBench, m, shape, dt, *seed, vocab, rep.Decode.Tokens, rep.Prefill.Tokens, rounds, kv)
			if rep.LlamaErr != nil {
				fmt.Fprintf(stderr, "llama-bench: %v\n", rep.LlamaErr)
			}
		}
		m = nil
		runtime.GC()
		if err := rep.Markdown(stdout); err != nil {
			return err
		}
		reports = append(reports, rep)
		fmt.Fprintf(stderr, "%s %v done in %s\n", shape.Name, dt, time.Since(start).Round(time.Millisecond))
	}
	return targets(stdout, reports)
}

// targets prints the speed targets against the measurements.
func targets(w io.Writer, reports []*bench.SpeedReport) error {
	var b strings.Builder
	b.WriteString("## Targets\n\n| model | 16-branch step / 1-branch (target ≤ 2.5) | fork 4096 / fork 64 | decode tokens/s | llama.cpp tokens/s | ours / llama.cpp | search overhead, worst mode (target < 3%) |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range reports {
		ok := "met"
		if x := r.StepRatio(16); x == 0 || x > 2.5 {
			ok = "missed"
		}
		fork := "-"
		if n := len(r.Forks); n > 1 {
			fork = fmt.Sprintf("%.1f (%s vs %s)", float64(r.Forks[n-1].Fork)/float64(r.Forks[0].Fork), r.Forks[n-1].Fork, r.Forks[0].Fork)
		}
		ours, llama, ratio := fmt.Sprintf("%.1f", r.Decode.TokensPerSec), "-", "-"
		if v := r.Versus; v != nil {
			rs := v.Ratios()
			ours = fmt.Sprintf("%.1f (median of %d interleaved pairs)", bench.Median(v.Ours), len(v.Ours))
			llama = fmt.Sprintf("%.1f (median)", bench.Median(v.Llama))
			ratio = fmt.Sprintf("%.2f (median of the pairs' ratios, %.2f-%.2f)", v.MedianRatio(), slices.Min(rs), slices.Max(rs))
		}
		over := "-"
		if o, ok := r.MaxOverhead(); ok {
			met := "met"
			if o.Share >= 0.03 {
				met = "missed"
			}
			over = fmt.Sprintf("%.1f%%, %s at width %d (%s)", 100*o.Share, o.Name(), o.Width, met)
		}
		fmt.Fprintf(&b, "| %s %v | %.2f (%s) | %s | %s | %s | %s | %s |\n", r.Model, r.DType, r.StepRatio(16), ok, fork, ours, llama, ratio, over)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// speedOfFile measures a model file, and llama-bench on the same file
// when bin is set. The report's model is the file's name with the types
// of its weights as stored (some types run as Q8_0: see cpu.WeightsOf).
func speedOfFile(ctx context.Context, path, kvName, bin string, quick bool, cfg bench.SpeedConfig, addOverhead func(*model.Model, *bench.SpeedReport) error, stderr io.Writer) (*bench.SpeedReport, error) {
	m, err := model.Load(path, "")
	if err != nil {
		return nil, err
	}
	defer m.Close()
	kv, err := m.KVType(kvName)
	if err != nil {
		return nil, err
	}
	cfg.KVType = kv
	w, err := cpu.WeightsOf(m)
	if err != nil {
		return nil, err
	}
	dt := w.Layers[0].Wq.Type // as the CPU runs the weights
	name := filepath.Base(path)
	if types := m.FileTypes(); len(types) > 0 {
		name += " (" + strings.Join(types, ", ") + " in the file)"
	}
	fmt.Fprintf(stderr, "measuring %s...\n", name)
	rep, err := bench.MeasureSpeed(m, name, dt, paramCount(m), cfg)
	if err != nil {
		return nil, err
	}
	if bin != "" {
		rounds := 5
		if quick {
			rounds = 3
		}
		fmt.Fprintf(stderr, "interleaving our decode and prefill with %s, %d pairs each...\n", bin, rounds)
		rep.Versus, rep.LlamaErr = bench.CompareDecode(ctx, m, bin, path, rep.Decode.Tokens, rounds, kv)
		if rep.LlamaErr == nil {
			rep.VersusPrefill, rep.LlamaErr = bench.ComparePrefill(ctx, m, bin, path, rep.Prefill.Tokens, rounds, kv)
		}
		if batched := os.Getenv("LLAMA_BATCHED_BENCH"); rep.LlamaErr == nil && batched != "" {
			fmt.Fprintf(stderr, "interleaving our 16-branch step with %s, %d pairs...\n", batched, rounds)
			rep.VersusBatched, rep.LlamaErr = bench.CompareBranchStep(ctx, m, batched, path, 16, cfg.Prefix, rounds, kv)
		}
		if rep.LlamaErr != nil {
			fmt.Fprintf(stderr, "llama-bench: %v\n", rep.LlamaErr)
		}
	}
	if err := addOverhead(m, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// versusLlama writes m's weights (Generate(shape, dt, seed)) as GGUF to a
// temporary file and alternates our decode of m, then our prefill, with
// llama-bench's on it.
func versusLlama(ctx context.Context, bin string, m *model.Model, shape synth.Shape, dt kernels.DType, seed uint64, vocab *tokenizer.Vocab, tokens, prompt, rounds int, kv kvcache.ElemType) (dec, pre *bench.DecodeComparison, err error) {
	f, err := os.CreateTemp("", "entropix-bench-*.gguf")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(f.Name())
	err = synth.WriteGGUF(f, shape, dt, seed, vocab)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	if dec, err = bench.CompareDecode(ctx, m, bin, f.Name(), tokens, rounds, kv); err != nil {
		return nil, nil, err
	}
	pre, err = bench.ComparePrefill(ctx, m, bin, f.Name(), prompt, rounds, kv)
	return dec, pre, err
}

func runGGUF(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gguf", "-shape NAME -dtype q8_0|q4_k|q5_k|q6_k|q4_0|f16|bf16|f32 -o FILE", stderr)
	shapeName := fs.String("shape", "stories110M", "model shape: "+strings.Join(synth.Names(), ", "))
	dtypeName := fs.String("dtype", "q8_0", "weight type: "+dtypeNames)
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	tokPath := fs.String("tokenizer", "", "llama2.c tokenizer.bin whose vocabulary the file carries (default: synthetic)")
	out := fs.String("o", "", "output file (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("-o is required")
	}
	shape, err := synth.Lookup(*shapeName)
	if err != nil {
		return usagef("%v", err)
	}
	dts, err := parseDTypes(*dtypeName, false)
	if err != nil {
		return err
	}
	vocab, err := vocabFor(*tokPath, shape)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	err = synth.WriteGGUF(f, shape, dts[0], *seed, vocab)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (%s %v, seed %d)\n", *out, shape.Name, dts[0], *seed)
	return nil
}

// parseWidths parses a comma-separated list of branch widths; "none" or
// "" is none.
func parseWidths(s string) ([]int, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var ws []int
	for _, f := range strings.Split(s, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 || w > policy.MaxForkWidth {
			return nil, fmt.Errorf("width %q: want a whole number in [1, %d]", f, policy.MaxForkWidth)
		}
		ws = append(ws, w)
	}
	return ws, nil
}
