package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/bench/arith"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/tokenizer"
	"github.com/entropix-search/entropix-search/model/train"
	"github.com/entropix-search/entropix-search/policy"
)

func init() {
	register("train", "train a small Llama model from scratch on the arith task and export it as GGUF", runTrain)
}

const trainArgs = "[-data train.jsonl.gz] [-test test.jsonl] [-o arith.gguf] [-steps N] [-batch N] [-lr X] [-seed N] [-resume] ..."

// sharedArithTrain is the arith training set, relative to ../shared.
const sharedArithTrain = "data/arith/train.jsonl.gz"

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", trainArgs, stderr)
	dataPath := fs.String("data", "", "training problems, GSM8K-format JSONL, optionally gzipped (default: ../shared/"+sharedArithTrain+")")
	testPath := fs.String("test", "", "problems for the greedy accuracy measured during training (default: ../shared/"+sharedArith+"; \"none\" for none)")
	out := fs.String("o", "arith.gguf", "the trained model, GGUF (written atomically at the end)")
	ckpt := fs.String("checkpoint", "", "checkpoint file (default: the output path + \".ckpt\")")
	ckptEvery := fs.Duration("checkpoint-every", 5*time.Minute, "time between checkpoints")
	resume := fs.Bool("resume", false, "continue from the checkpoint (same settings)")
	stopAt := fs.Int("stop-at", 0, "end after this many steps, writing the checkpoint and the model as they are then (the schedule is still -steps'; -resume goes on)")
	dim := fs.Int("dim", 128, "model width")
	hidden := fs.Int("hidden", 352, "feed-forward width")
	layers := fs.Int("layers", 5, "transformer blocks")
	heads := fs.Int("heads", 4, "attention heads")
	kvHeads := fs.Int("kv-heads", 0, "key/value heads (default: as many as heads)")
	ctxLen := fs.Int("context", 256, "context length (a training row holds this many tokens)")
	untied := fs.Bool("untied", false, "a classifier of its own instead of the token embedding")
	steps := fs.Int("steps", 2700, "optimizer steps")
	batch := fs.Int("batch", 48, "problems per step")
	lr := fs.Float64("lr", 3e-3, "peak learning rate")
	minLR := fs.Float64("min-lr", 3e-4, "learning rate at the end of the cosine decay")
	warmup := fs.Int("warmup", 100, "linear warmup steps")
	wd := fs.Float64("wd", 0.1, "AdamW weight decay (matrices only)")
	clip := fs.Float64("clip", 1, "gradient clipping: largest global norm (0: none)")
	seed := fs.Uint64("seed", 1, "seed of the initialization and the data order")
	limit := fs.Int("n", 0, "train on the first n problems (0: all)")
	evalEvery := fs.Int("eval-every", 250, "steps between greedy accuracy measurements (0: only at the end)")
	evalN := fs.Int("eval-n", 200, "test problems each accuracy measurement decodes")
	threads := fs.Int("threads", 0, "threads (default: all cores)")
	maxMem := fs.Float64("max-mem-gib", 0, "refuse shapes whose training would need more memory (default: 3/4 of the machine's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for name, v := range map[string]float64{"lr": *lr, "min-lr": *minLR, "wd": *wd, "clip": *clip, "max-mem-gib": *maxMem} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return usagef("-%s %v: want a finite number >= 0", name, v)
		}
	}
	if *kvHeads == 0 {
		*kvHeads = *heads
	}
	if *threads < 0 || *evalEvery < 0 || *evalN < 0 || *limit < 0 || *stopAt < 0 {
		return usagef("-threads, -eval-every, -eval-n, -n and -stop-at take numbers >= 0")
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}
	if *ckpt == "" {
		*ckpt = *out + ".ckpt"
	}
	shared := findShared()
	if *dataPath == "" {
		if shared == "" {
			return usagef("no -data given and ../shared (the arith training set) is not next to the repository")
		}
		*dataPath = filepath.Join(shared, sharedArithTrain)
	}
	if *testPath == "" && shared != "" {
		*testPath = filepath.Join(shared, sharedArith)
	}
	if *testPath == "none" {
		*testPath = ""
	}
	if err := checkWritable(*out); err != nil {
		return err
	}
	if err := checkWritable(*ckpt); err != nil {
		return err
	}

	vocab, err := arith.Vocab()
	if err != nil {
		return err
	}
	tok, err := tokenizer.New(*vocab)
	if err != nil {
		return err
	}
	shape := synth.Shape{Name: "arith", Dim: *dim, HiddenDim: *hidden, Layers: *layers, Heads: *heads, KVHeads: *kvHeads,
		Vocab: len(vocab.Tokens), ContextLen: *ctxLen, RopeTheta: 10000, NormEps: 1e-5, Tied: !*untied}
	if err := shape.Validate(); err != nil {
		return usagef("%v", err)
	}
	run := train.Run{Steps: *steps, Warmup: min(*warmup, *steps), LR: *lr, MinLR: min(*minLR, *lr), WeightDecay: *wd, Clip: *clip,
		Seed: *seed, PerStep: *batch, RowLen: *ctxLen}
	if err := run.Validate(); err != nil {
		return usagef("%v", err)
	}
	// Refuse a shape that cannot fit before allocating anything for it.
	tokensPerStep := int64(*batch) * 160
	need := train.MemoryBytes(shape.Params(), shape.Dim, shape.HiddenDim, shape.Heads, shape.Layers, shape.Vocab, tokensPerStep, int64(*ctxLen))
	budget := int64(*maxMem * (1 << 30))
	if budget == 0 {
		budget = availableMemory() * 3 / 4
	}
	if budget > 0 && need > budget {
		return fmt.Errorf("train: the shape (%d parameters) with %d problems a step needs about %.1f GiB, more than the %.1f GiB allowed (-max-mem-gib): use a smaller shape or batch",
			shape.Params(), *batch, float64(need)/(1<<30), float64(budget)/(1<<30))
	}

	t0 := time.Now()
	problems, err := arith.ReadFile(*dataPath, *limit)
	if err != nil {
		return err
	}
	examples := make([]train.Example, 0, len(problems))
	tokens := 0
	for i, p := range problems {
		ids, plen, err := arith.Encode(tok, p)
		if err != nil {
			return fmt.Errorf("%s: problem %d: %w", *dataPath, i+1, err)
		}
		if len(ids) > *ctxLen {
			return fmt.Errorf("%s: problem %d has %d tokens, more than the context of %d", *dataPath, i+1, len(ids), *ctxLen)
		}
		examples = append(examples, train.Example{Tokens: ids, PromptLen: plen})
		tokens += len(ids)
	}
	var tests []bench.GSM8KProblem
	if *testPath != "" && *evalN > 0 {
		if tests, err = arith.ReadFile(*testPath, *evalN); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "data: %d problems, %d tokens (%.1f a problem) from %s in %.1fs\n",
		len(examples), tokens, float64(tokens)/float64(len(examples)), *dataPath, time.Since(t0).Seconds())
	loader, err := train.NewLoader(examples, *batch, *ctxLen, *seed)
	if err != nil {
		return err
	}

	var m *train.Model
	var opt *train.AdamW
	step := 0
	if *resume {
		var h *train.CheckpointHeader
		m, opt, h, err = train.LoadCheckpoint(*ckpt, *wd)
		if err != nil {
			return err
		}
		var saved train.Run
		if err := json.Unmarshal(h.Run, &saved); err != nil || saved != run || h.Shape != shape {
			return fmt.Errorf("train: -resume: %s was written by a run with other settings (%+v, %+v); give the same flags", *ckpt, saved, h.Shape)
		}
		step = h.Step
		fmt.Fprintf(stderr, "resumed from %s at step %d\n", *ckpt, step)
	} else {
		if m, err = train.New(shape, *seed); err != nil {
			return err
		}
		opt = train.NewAdamW(m.Tensors(), *wd)
	}
	fmt.Fprintf(stderr, "model: %v\ntraining: %d steps of %d problems (%.2f epochs), lr %g -> %g, warmup %d, wd %g, clip %g, seed %d, %d threads\n",
		m, run.Steps, run.PerStep, loader.Epoch(run.Steps), run.LR, run.MinLR, run.Warmup, run.WeightDecay, run.Clip, run.Seed, kernels.Threads())

	evaluate := func(step int) {
		if len(tests) == 0 {
			return
		}
		t0 := time.Now()
		acc, err := greedyAccuracy(ctx, m, tok, tests)
		if err != nil {
			fmt.Fprintf(stderr, "eval at step %d: %v\n", step, err)
			return
		}
		fmt.Fprintf(stderr, "eval step %d: greedy accuracy %.1f%% on %d test problems (%.1fs)\n", step, 100*acc, len(tests), time.Since(t0).Seconds())
	}
	var flops float64
	var trainTime time.Duration
	last := run.Steps // the step the run ends at, evaluated after the export's checkpoint
	if *stopAt > step && *stopAt < last {
		last = *stopAt
	}
	tr := &train.Trainer{Model: m, Opt: opt, Data: loader, Run: run, Step: step, StopAt: *stopAt, Checkpoint: *ckpt, CheckpointEvery: *ckptEvery, Log: stderr}
	tr.OnStep = func(st train.StepStats) {
		flops += st.FLOPs
		trainTime += st.Took
		if st.Step%10 == 0 || st.Step == run.Steps {
			fmt.Fprintf(stderr, "step %d/%d loss %.4f lr %.2e |g| %.2f %.0f tok/s %.1f GFLOP/s ETA %s\n",
				st.Step, run.Steps, st.Loss, st.LR, st.GradNorm, st.TokPerSec, flops/trainTime.Seconds()/1e9, st.ETA.Round(time.Second))
		}
		if *evalEvery > 0 && st.Step%*evalEvery == 0 && st.Step < last {
			evaluate(st.Step)
		}
	}
	started := time.Now()
	if err := tr.Train(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "interrupted at step %d: the checkpoint %s holds it; run again with -resume to go on\n", tr.Step, *ckpt)
		}
		return err
	}
	fmt.Fprintf(stderr, "trained %d steps in %s (%.1f GFLOP/s in the passes)\n", tr.Step-step, time.Since(started).Round(time.Second), flops/trainTime.Seconds()/1e9)
	if tr.Step < run.Steps {
		fmt.Fprintf(stderr, "stopped at step %d of %d (-stop-at): the checkpoint %s holds it; -resume goes on\n", tr.Step, run.Steps, *ckpt)
	}
	evaluate(tr.Step)
	name := fmt.Sprintf("arith-d%d-l%d-seed%d", shape.Dim, shape.Layers, run.Seed)
	if err := writeFile(*out, func(w io.Writer) error { return synth.WriteTensorsGGUF(w, shape, name, vocab, m.Values()) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

// greedyAccuracy decodes every problem greedily with the inference engine's
// forward pass over m's current weights, all problems in one batch, and
// returns the share whose "####" answer is right.
func greedyAccuracy(ctx context.Context, m *train.Model, tok *tokenizer.Tokenizer, problems []bench.GSM8KProblem) (float64, error) {
	inf, err := synth.FromTensors(m.Shape, m.Values(), tok, "training")
	if err != nil {
		return 0, err
	}
	const maxNew = 160
	be, err := model.NewBackend("cpu", inf, model.CacheConfig{Tokens: len(problems) * (m.Shape.ContextLen + 16), BlockSize: 16, DType: kvcache.F32})
	if err != nil {
		return 0, err
	}
	defer be.Close()
	run, kv := be, be.Cache()
	seqs := make([]*kvcache.Seq, len(problems))
	outs := make([][]int, len(problems))
	var rows []model.Row
	for i, p := range problems {
		seqs[i] = kv.NewSeq()
		ids := tok.Encode(arith.Prompt(p.Question), tok.AddBOS())
		for j, id := range ids {
			rows = append(rows, model.Row{Seq: seqs[i], Token: id, NoLogits: j+1 < len(ids)})
		}
	}
	live := make([]int, len(problems)) // problem of each logits row
	for i := range live {
		live[i] = i
	}
	for step := 0; len(rows) > 0 && step < maxNew; step++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		o, err := run.Forward(rows)
		if err != nil {
			return 0, err
		}
		var next []model.Row
		var nextLive []int
		k := 0
		for r := range rows {
			lg := o.Logits(r)
			if lg == nil {
				continue
			}
			i := live[k]
			k++
			best := 0
			for j, v := range lg {
				if v > lg[best] {
					best = j
				}
			}
			if best == tok.EOS() || seqs[i].Len() >= m.Shape.ContextLen {
				continue
			}
			outs[i] = append(outs[i], best)
			next = append(next, model.Row{Seq: seqs[i], Token: best})
			nextLive = append(nextLive, i)
		}
		rows, live = next, nextLive
	}
	right := 0
	for i, p := range problems {
		gold, _ := p.Gold()
		got, ok := policy.ExtractAnswer(tok.Decode(outs[i]))
		if ok && bench.SameNumber(got, gold) {
			right++
		}
	}
	return float64(right) / float64(len(problems)), nil
}

// checkWritable fails early when path's folder cannot take a new file, so
// that a long run does not end unable to save its result.
func checkWritable(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".entropix-write-check*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// availableMemory is the machine's available memory in bytes (0 when
// unknown).
func availableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemAvailable: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}
