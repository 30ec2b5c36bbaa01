package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/bench/arith"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/train"
)

func init() {
	register("train-verifier", "train an outcome verifier for a task model on its own answers to the arith training problems", runTrainVerifier)
}

const trainVerifierArgs = "[-m arith.gguf] [-base MODEL.gguf] [-o arith-verifier.gguf] [-n N] [-steps N] [-cache DIR] ..."

// Verdict tokens of the arith verifier: single-character pieces of the
// arith vocabulary.
const verdictYes, verdictNo = "Y", "N"

func runTrainVerifier(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train-verifier", trainVerifierArgs, stderr)
	modelPath := fs.String("m", "bench/models/arith.gguf", "the task model whose answers the verifier judges")
	basePath := fs.String("base", "", "the model the verifier starts from, of the task model's vocabulary (an F32 GGUF written by train; default: -m)")
	mixedRepeat := fs.Int("mixed-repeat", 1, "each answer to a problem with both right and wrong answers counts this many times, so that telling them apart outweighs telling hard problems from easy ones")
	uniformShare := fs.Float64("uniform-share", 1, "share of the answers to problems whose answers are all right or all wrong kept (drawn with -seed)")
	lmShare := fs.Float64("lm-share", 0, "also train the base to write the right answers: this many language-model examples per verdict example (the loss on their tokens too)")
	out := fs.String("o", "arith-verifier.gguf", "the verifier, GGUF (written atomically at the end)")
	dataPath := fs.String("data", "", "training problems, GSM8K-format JSONL, optionally gzipped (default: ../shared/"+sharedArithTrain+")")
	testPath := fs.String("test", "", "test problems for the verifier's accuracy and calibration (default: ../shared/"+sharedArith+")")
	n := fs.Int("n", 3000, "training problems the task model answers")
	testFrom := fs.Int("test-from", 500, "the calibration uses test problems from this index on (the eval uses the first 500)")
	testN := fs.Int("test-n", 500, "test problems for the calibration")
	rows := fs.Int("rows", 552, "beam-adaptive's row budget per problem when drawing answers")
	samples := fs.Int("samples", 4, "samples per problem at -temp")
	temp := fs.Float64("temp", 0.8, "sampling temperature")
	maxTokens := fs.Int("max-tokens", 192, "new tokens per answer")
	parallel := fs.Int("parallel", 8, "searches at once while drawing answers (batched in one engine)")
	steps := fs.Int("steps", 800, "optimizer steps (0 with -head: the base as it is)")
	fitHead := fs.Bool("head", false, "also fit a head on the training answers that weighs in the verifier model's own log-probability of the answer (its least and summed token log-probability) with the verdict")
	batch := fs.Int("batch", 48, "examples per step")
	lr := fs.Float64("lr", 1e-3, "peak learning rate")
	minLR := fs.Float64("min-lr", 1e-4, "learning rate at the end of the cosine decay")
	warmup := fs.Int("warmup", 50, "linear warmup steps")
	wd := fs.Float64("wd", 0.1, "AdamW weight decay (matrices only)")
	clip := fs.Float64("clip", 1, "gradient clipping: largest global norm (0: none)")
	seed := fs.Uint64("seed", 1, "seed of the answers drawn and the data order")
	cache := fs.String("cache", "", "folder keeping the drawn answers (train-paths.json.gz, test-paths.json.gz) to reuse them")
	svgPath := fs.String("reliability-svg", "", "also draw the reliability diagram on the test answers as SVG to this `file`")
	threads := fs.Int("threads", 0, "threads (default: all cores)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 || *steps < 0 || (*steps == 0 && !*fitHead) || *batch < 1 || *samples < 1 || *rows < 1 || *maxTokens < 1 || *testN < 0 || *testFrom < 0 || *mixedRepeat < 1 {
		return usagef("-n, -steps (but with -head), -batch, -samples, -rows, -max-tokens and -mixed-repeat take numbers > 0")
	}
	if !(*uniformShare >= 0 && *uniformShare <= 1) || !(*lmShare >= 0 && *lmShare <= 10) {
		return usagef("-uniform-share takes a share in [0, 1], -lm-share one in [0, 10]")
	}
	if *basePath == "" {
		*basePath = *modelPath
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}
	shared := findShared()
	if *dataPath == "" || *testPath == "" {
		if shared == "" {
			return usagef("no -data/-test given and ../shared (the arith data) is not next to the repository")
		}
		if *dataPath == "" {
			*dataPath = filepath.Join(shared, sharedArithTrain)
		}
		if *testPath == "" {
			*testPath = filepath.Join(shared, sharedArith)
		}
	}
	if err := checkWritable(*out); err != nil {
		return err
	}
	m, err := model.Load(*modelPath, "")
	if err != nil {
		return err
	}
	defer m.Close()
	vocab, err := arith.Vocab()
	if err != nil {
		return err
	}
	if m.Tokenizer.VocabSize() != len(vocab.Tokens) {
		return fmt.Errorf("train-verifier: %s has %d tokens, the arith vocabulary %d", *modelPath, m.Tokenizer.VocabSize(), len(vocab.Tokens))
	}
	yes, okY := m.Tokenizer.Lookup(verdictYes)
	no, okN := m.Tokenizer.Lookup(verdictNo)
	if !okY || !okN {
		return fmt.Errorf("train-verifier: %s's vocabulary lacks the verdict tokens %q and %q", *modelPath, verdictYes, verdictNo)
	}
	base := m
	if *basePath != *modelPath {
		if base, err = model.Load(*basePath, ""); err != nil {
			return err
		}
		defer base.Close()
		if err := sameVocab(base, m); err != nil {
			return fmt.Errorf("train-verifier: -base %s cannot judge %s: %w", *basePath, *modelPath, err)
		}
	}
	dcfg := bench.VerifierDataConfig{MaxTokens: *maxTokens, AdaptiveRows: *rows, Samples: *samples, Temperature: *temp, Seed: *seed, Parallel: *parallel}
	draw := func(name, path string, from, count int) ([]bench.VerifierPath, error) {
		problems, err := arith.ReadFile(path, from+count)
		if err != nil {
			return nil, err
		}
		problems = problems[min(from, len(problems)):]
		cached := ""
		if *cache != "" {
			cached = filepath.Join(*cache, name+"-paths.json.gz")
			if ps, err := readPaths(cached); err == nil && len(ps) > 0 {
				fmt.Fprintf(stderr, "%s: %d answers read from %s\n", name, len(ps), cached)
				return withPrompts(m, problems, ps)
			}
		}
		t0 := time.Now()
		ps, err := bench.VerifierPaths(ctx, m, problems, dcfg)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "%s: %d distinct answers to %d problems drawn in %s\n", name, len(ps), len(problems), time.Since(t0).Round(time.Second))
		if cached != "" {
			if err := os.MkdirAll(*cache, 0o755); err != nil {
				return nil, err
			}
			if err := writeFile(cached, func(w io.Writer) error { return writePaths(w, ps) }); err != nil {
				return nil, err
			}
		}
		return ps, nil
	}
	trainPaths, err := draw("train", *dataPath, 0, *n)
	if err != nil {
		return err
	}
	var testPaths []bench.VerifierPath
	if *testN > 0 {
		if testPaths, err = draw("test", *testPath, *testFrom, *testN); err != nil {
			return err
		}
	}
	examples, right := verifierExamples(trainPaths, m.Tokenizer.EOS(), yes, no, exampleMix{MixedRepeat: *mixedRepeat, UniformShare: *uniformShare, LMShare: *lmShare, Seed: *seed})
	fmt.Fprintf(stderr, "data: %d answers, %d right (%.1f%%); %d examples (-mixed-repeat %d, -uniform-share %g, -lm-share %g)\n",
		len(trainPaths), right, 100*float64(right)/float64(max(len(trainPaths), 1)), len(examples), *mixedRepeat, *uniformShare, *lmShare)

	shape := train.ShapeOf("arith-verifier", base.Config)
	init, err := train.TensorsFromGGUF(*basePath, shape)
	if err != nil {
		return err
	}
	tm, err := train.FromTensors(shape, init)
	if err != nil {
		return err
	}
	run := train.Run{Steps: *steps, Warmup: min(*warmup, *steps), LR: *lr, MinLR: min(*minLR, *lr), WeightDecay: *wd, Clip: *clip,
		Seed: *seed, PerStep: *batch, RowLen: shape.ContextLen}
	if err := trainVerifierModel(ctx, tm, examples, run, *basePath, *wd, stderr); err != nil {
		return err
	}

	var buf bytes.Buffer
	name := fmt.Sprintf("arith-verifier-d%d-l%d-seed%d", shape.Dim, shape.Layers, run.Seed)
	if err := synth.WriteTensorsGGUF(&buf, shape, name, vocab, tm.Values()); err != nil {
		return err
	}
	if err := writeFile(*out, func(w io.Writer) error { return engine.MarkVerifier(w, buf.Bytes(), verdictYes, verdictNo) }); err != nil {
		return err
	}
	if *fitHead {
		v, err := engine.LoadVerifier(*out)
		if err != nil {
			return err
		}
		t0 := time.Now()
		fs, err := pathFeatures(v, trainPaths)
		v.Model().Close()
		if err != nil {
			return err
		}
		w := mixWeights(trainPaths, *mixedRepeat, *uniformShare)
		head := fitVerifierHead(fs, trainPaths, w)
		fmt.Fprintf(stderr, "head fitted on %d training answers in %s: %+v\n", len(fs), time.Since(t0).Round(time.Second), head)
		if err := writeFile(*out, func(w io.Writer) error {
			return engine.MarkVerifierHead(w, buf.Bytes(), verdictYes, verdictNo, &head)
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	if len(testPaths) == 0 {
		return nil
	}
	v, err := engine.LoadVerifier(*out)
	if err != nil {
		return err
	}
	defer v.Model().Close()
	cal, err := judgeCalibration(v, testPaths)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nOn %d answers of the task model to test problems %d-%d (beam-adaptive's finished paths and %d samples at T %g):\n\n",
		cal.N, *testFrom+1, *testFrom+*testN, *samples, *temp)
	if err := cal.Markdown(stdout); err != nil {
		return err
	}
	if *svgPath != "" {
		return writeFile(*svgPath, func(w io.Writer) error {
			return cal.WriteSVG(w, fmt.Sprintf("arith verifier: reliability on %d test answers", cal.N))
		})
	}
	return nil
}

// trainVerifierModel fine-tunes tm on examples (nothing for 0 steps).
func trainVerifierModel(ctx context.Context, tm *train.Model, examples []train.Example, run train.Run, from string, wd float64, stderr io.Writer) error {
	if run.Steps == 0 {
		return nil
	}
	if err := run.Validate(); err != nil {
		return usagef("%v", err)
	}
	loader, err := train.NewLoader(examples, run.PerStep, run.RowLen, run.Seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "training: %d steps of %d answers (%.2f epochs), lr %g -> %g, from %s, %d threads\n",
		run.Steps, run.PerStep, loader.Epoch(run.Steps), run.LR, run.MinLR, from, kernels.Threads())
	tr := &train.Trainer{Model: tm, Opt: train.NewAdamW(tm.Tensors(), wd), Data: loader, Run: run, Log: stderr}
	var avg float64
	tr.OnStep = func(st train.StepStats) {
		avg = 0.9*avg + 0.1*st.Loss
		if st.Step == 1 {
			avg = st.Loss
		}
		if st.Step%20 == 0 || st.Step == run.Steps {
			fmt.Fprintf(stderr, "step %d/%d loss %.4f (avg %.4f) lr %.2e %.0f tok/s ETA %s\n", st.Step, run.Steps, st.Loss, avg, st.LR, st.TokPerSec, st.ETA.Round(time.Second))
		}
	}
	t0 := time.Now()
	if err := tr.Train(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "trained %d steps in %s\n", run.Steps, time.Since(t0).Round(time.Second))
	return nil
}

// sameVocab reports whether base, the starting point of a verifier, reads
// the task model m's tokens (the check the engine makes of a verifier).
func sameVocab(base, m *model.Model) error {
	v, err := engine.NewVerifier(base, verdictYes, verdictNo)
	if err != nil {
		return err
	}
	return v.Fits(m)
}

// exampleMix says how a verifier's training examples are drawn from the
// labelled answers.
type exampleMix struct {
	MixedRepeat  int     // times each answer to a problem with right and wrong answers counts
	UniformShare float64 // share kept of the answers to problems whose answers agree
	LMShare      float64 // language-model examples of right answers per verdict example
	Seed         uint64
}

// verifierExamples returns the training examples of labelled answers ps
// (verdict examples, then language-model ones, whose loss is on the answer
// and its end of text) and how many of ps are right. Problems with both
// right and wrong answers teach what a verifier is for, telling a right
// answer from a wrong one to the same question; those whose answers agree
// teach mostly how hard a problem looks, so mix can weigh them down.
func verifierExamples(ps []bench.VerifierPath, eos, yes, no int, mix exampleMix) ([]train.Example, int) {
	mixed := map[int][2]bool{}
	right := 0
	for _, p := range ps {
		k := mixed[p.Problem]
		if p.Right {
			k[0] = true
			right++
		} else {
			k[1] = true
		}
		mixed[p.Problem] = k
	}
	r := rand.New(rand.NewPCG(mix.Seed, 0x7e11))
	var out []train.Example
	var lm []train.Example
	for _, p := range ps {
		in := append(append(append([]int(nil), p.Prompt...), p.Tokens...), eos)
		v := no
		if p.Right {
			v = yes
			lm = append(lm, train.Example{Tokens: toInt32(in), PromptLen: len(p.Prompt)})
		}
		times := mix.MixedRepeat
		if k := mixed[p.Problem]; !k[0] || !k[1] {
			times = 0
			if r.Float64() < mix.UniformShare {
				times = 1
			}
		}
		for range times {
			out = append(out, train.VerdictExample(in, v))
		}
	}
	if len(lm) > 0 {
		n := int(math.Round(mix.LMShare * float64(len(out))))
		for i := range n {
			out = append(out, lm[i%len(lm)])
		}
	}
	return out, right
}

// toInt32 returns the tokens ts as the trainer's int32s.
func toInt32(ts []int) []int32 {
	out := make([]int32, len(ts))
	for i, t := range ts {
		out[i] = int32(t)
	}
	return out
}

// judgeCalibration judges every path with v and measures the verdicts.
func judgeCalibration(v *engine.Verifier, ps []bench.VerifierPath) (bench.Calibration, error) {
	probs := make([]float64, len(ps))
	right := make([]bool, len(ps))
	problem := make([]int, len(ps))
	err := byProblem(ps, func(i int, prompt []int, paths [][]int) error {
		got, err := v.Judge(prompt, paths)
		copy(probs[i:], got)
		return err
	})
	if err != nil {
		return bench.Calibration{}, err
	}
	for k, p := range ps {
		right[k], problem[k] = p.Right, p.Problem
	}
	return bench.Calibrate(probs, right, 10).WithPairs(probs, right, problem), nil
}

// writePaths writes drawn answers as gzipped JSON lines.
func writePaths(w io.Writer, ps []bench.VerifierPath) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	for _, p := range ps {
		if err := enc.Encode(p); err != nil {
			return err
		}
	}
	return zw.Close()
}

// readPaths reads what writePaths wrote.
func readPaths(path string) ([]bench.VerifierPath, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(zr)
	var ps []bench.VerifierPath
	for {
		var p bench.VerifierPath
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return ps, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ps = append(ps, p)
	}
}

// withPrompts fills the prompts of cached answers from their problems.
func withPrompts(m *model.Model, problems []bench.GSM8KProblem, ps []bench.VerifierPath) ([]bench.VerifierPath, error) {
	for i := range ps {
		if ps[i].Problem < 0 || ps[i].Problem >= len(problems) {
			return nil, fmt.Errorf("cached answer %d is to problem %d, outside the %d problems", i, ps[i].Problem, len(problems))
		}
		ps[i].Prompt = m.Tokenizer.Encode(bench.NewArithPrompt(problems[ps[i].Problem].Question), m.Tokenizer.AddBOS())
	}
	return ps, nil
}

// loadEvalVerifier loads the verifier of an evaluation and checks that it
// fits the model.
func loadEvalVerifier(path string, m *model.Model) (*engine.Verifier, error) {
	v, err := engine.LoadVerifier(path)
	if err != nil {
		return nil, usagef("-verifier: %v", err)
	}
	if err := v.Fits(m); err != nil {
		v.Model().Close()
		return nil, usagef("-verifier: %v", err)
	}
	return v, nil
}

func init() {
	register("compare", "one table and plot of accuracy and coverage against rows spent, from several eval -json reports", runCompare)
}

// runCompare reads eval reports (FILE or FILE=SUFFIX, the suffix added to
// their modes' labels) and writes the comparison's table and plot.
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", "[-svg FILE] [-title T] report.json[=SUFFIX] ...", stderr)
	svgPath := fs.String("svg", "", "also draw accuracy and coverage against rows spent as SVG to this `file`")
	title := fs.String("title", "arith", "the plot's title")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	if fs.NArg() == 0 {
		return usagef("no report given")
	}
	var reps []*bench.Report
	var suffixes []string
	for _, a := range fs.Args() {
		path, suffix, _ := strings.Cut(a, "=")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r bench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		reps, suffixes = append(reps, &r), append(suffixes, suffix)
	}
	series := bench.CompareSeries(reps, suffixes)
	if err := bench.CompareMarkdown(stdout, series); err != nil {
		return err
	}
	if *svgPath != "" {
		return writeFile(*svgPath, func(w io.Writer) error { return bench.CompareSVG(w, *title, series) })
	}
	return nil
}

// pathFeatures reads every path with v (grouped by problem, as drawn).
func pathFeatures(v *engine.Verifier, ps []bench.VerifierPath) ([]engine.PathFeatures, error) {
	out := make([]engine.PathFeatures, len(ps))
	err := byProblem(ps, func(i int, prompt []int, paths [][]int) error {
		fs, err := v.Features(prompt, paths)
		copy(out[i:], fs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// byProblem calls f with each run of paths of one problem in ps (as
// drawn, a problem's paths are consecutive): i is the run's first index.
func byProblem(ps []bench.VerifierPath, f func(i int, prompt []int, paths [][]int) error) error {
	for i := 0; i < len(ps); {
		j := i
		var paths [][]int
		for j < len(ps) && ps[j].Problem == ps[i].Problem {
			paths = append(paths, ps[j].Tokens)
			j++
		}
		if err := f(i, ps[i].Prompt, paths); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// mixWeights returns each answer's weight in fitting the head, as
// verifierExamples weighs them: mixedRepeat for an answer to a problem
// with right and wrong answers, uniformShare for the others.
func mixWeights(ps []bench.VerifierPath, mixedRepeat int, uniformShare float64) []float64 {
	kinds := map[int][2]bool{}
	for _, p := range ps {
		k := kinds[p.Problem]
		if p.Right {
			k[0] = true
		} else {
			k[1] = true
		}
		kinds[p.Problem] = k
	}
	w := make([]float64, len(ps))
	for i, p := range ps {
		w[i] = uniformShare
		if k := kinds[p.Problem]; k[0] && k[1] {
			w[i] = float64(mixedRepeat)
		}
	}
	return w
}

// fitVerifierHead fits the head's weights by weighted logistic regression
// of the answers' labels on their features (Newton's method on
// standardized features, a small ridge; answers with a NaN verdict left
// out).
func fitVerifierHead(fs []engine.PathFeatures, ps []bench.VerifierPath, w []float64) engine.VerifierHead {
	const k = 4
	var xs [][k]float64
	var ys, ws []float64
	for i, f := range fs {
		if math.IsNaN(f.Verdict) || w[i] == 0 {
			continue
		}
		xs = append(xs, [k]float64{f.Verdict, f.MinLogProb, f.SumLogProb, 1})
		y := 0.0
		if ps[i].Right {
			y = 1
		}
		ys, ws = append(ys, y), append(ws, w[i])
	}
	if len(xs) == 0 {
		return engine.VerifierHead{}
	}
	// Standardize the three features.
	var mean, sd [k]float64
	var wsum float64
	for i, x := range xs {
		wsum += ws[i]
		for j := range k - 1 {
			mean[j] += ws[i] * x[j]
		}
	}
	for j := range k - 1 {
		mean[j] /= wsum
	}
	for i, x := range xs {
		for j := range k - 1 {
			d := x[j] - mean[j]
			sd[j] += ws[i] * d * d
		}
	}
	for j := range k - 1 {
		sd[j] = math.Sqrt(sd[j] / wsum)
		if sd[j] == 0 {
			sd[j] = 1
		}
	}
	z := make([][k]float64, len(xs))
	for i, x := range xs {
		for j := range k - 1 {
			z[i][j] = (x[j] - mean[j]) / sd[j]
		}
		z[i][k-1] = 1
	}
	var b [k]float64
	const ridge = 1e-3
	for range 50 {
		var g [k]float64
		var h [k][k]float64
		for i, x := range z {
			s := 0.0
			for j := range k {
				s += b[j] * x[j]
			}
			p := 1 / (1 + math.Exp(-s))
			for j := range k {
				g[j] += ws[i] * (p - ys[i]) * x[j]
				for l := range k {
					h[j][l] += ws[i] * p * (1 - p) * x[j] * x[l]
				}
			}
		}
		for j := range k - 1 {
			g[j] += ridge * wsum * b[j]
			h[j][j] += ridge * wsum
		}
		d, ok := solve(h, g)
		if !ok {
			break
		}
		for j := range k {
			b[j] -= d[j]
		}
	}
	head := engine.VerifierHead{Verdict: b[0] / sd[0], MinLogProb: b[1] / sd[1], SumLogProb: b[2] / sd[2], Bias: b[3]}
	head.Bias -= head.Verdict*mean[0] + head.MinLogProb*mean[1] + head.SumLogProb*mean[2]
	return head
}

// solve solves h x = g by Gaussian elimination with partial pivoting,
// false when h is singular.
func solve(h [4][4]float64, g [4]float64) ([4]float64, bool) {
	const n = 4
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(h[r][c]) > math.Abs(h[p][c]) {
				p = r
			}
		}
		if math.Abs(h[p][c]) < 1e-12 {
			return g, false
		}
		h[c], h[p] = h[p], h[c]
		g[c], g[p] = g[p], g[c]
		for r := c + 1; r < n; r++ {
			f := h[r][c] / h[c][c]
			for l := c; l < n; l++ {
				h[r][l] -= f * h[c][l]
			}
			g[r] -= f * g[c]
		}
	}
	var x [4]float64
	for r := n - 1; r >= 0; r-- {
		s := g[r]
		for l := r + 1; l < n; l++ {
			s -= h[r][l] * x[l]
		}
		x[r] = s / h[r][r]
	}
	return x, true
}
