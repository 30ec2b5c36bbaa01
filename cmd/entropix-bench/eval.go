package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/cmd/internal/outfile"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

func init() {
	register("eval", "quality versus compute of every mode at equal forward-row budgets, and speed", runEval)
}

const evalArgs = "[-m model] [-z tokenizer] [-quick] [-task stories,name-recall,gsm8k,arith] [-data F] [-budgets 1x,2x,4x,8x] [-csv F] [-json F] [-svg F]"

// Shared files, relative to ../shared.
const (
	sharedModel     = "models/stories260K/stories260K.bin"
	sharedTokenizer = "models/stories260K/tok512.bin"
	sharedGSM8K     = "data/gsm8k/test.jsonl"
	sharedArith     = "data/arith/test.jsonl"
)

// evalTask says how a built-in task runs by default. A token limit of 0
// is the task's own (arith: bench.GSM8K.AnswerTokenLimit, room for its
// longest worked answer in the model's tokens).
type evalTask struct {
	maxTokens, quickMaxTokens int
	limit, quickLimit         int
}

var evalTasks = map[string]evalTask{
	"stories":     {maxTokens: 128, quickMaxTokens: 64, limit: 0, quickLimit: 16},
	"name-recall": {maxTokens: 32, quickMaxTokens: 24, limit: 0, quickLimit: 16},
	"gsm8k":       {maxTokens: 256, quickMaxTokens: 128, limit: 200, quickLimit: 20},
	"arith":       {maxTokens: 0, quickMaxTokens: 0, limit: 500, quickLimit: 100},
}

// taskNames lists the built-in tasks for messages.
const taskNames = "stories, name-recall, gsm8k, arith"

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval", evalArgs, stderr)
	modelPath := fs.String("m", "", "model file, GGUF or llama2.c checkpoint (default: ../shared stories260K.bin)")
	tokPath := fs.String("z", "", "llama2.c tokenizer.bin for a llama2.c checkpoint (default: tok512.bin for the default model, else tokenizer.bin beside the model)")
	quick := fs.Bool("quick", false, "a reduced run (16 items a task, 20 GSM8K and 100 arith problems, shorter outputs but for arith, budgets 1x and 4x): under a minute for the default tasks on stories260K")
	taskList := fs.String("task", "stories,name-recall", "comma-separated tasks: "+taskNames)
	modeList := fs.String("modes", "", "comma-separated modes (default: all)")
	budgetList := fs.String("budgets", "", "comma-separated forward-row budgets per item: rows, or multiples of the token limit such as 4x (default: 1x,2x,4x,8x; -quick: 1x,4x)")
	maxTokens := fs.Int("max-tokens", 0, "new tokens per item (default: stories 128, name-recall 32, gsm8k 256, halved or so with -quick; arith: room for the longest worked answer of the -data file, plus a quarter, in the model's tokens)")
	limit := fs.Int("limit", 0, "items per task (default: all stories and name-recall items, 200 GSM8K and 500 arith problems; 16, 16, 20 and 100 with -quick)")
	maxWidth := fs.Int("max-width", 8, "largest width K a budget gives beam, cot-decoding and beam-adaptive")
	seed := fs.Uint64("seed", 1, "seed; item i runs with seed+i")
	policyPath := fs.String("policy", "", "policy `file` for entropix and beam-adaptive, as entropix-search --calibrate writes (default: the engine's)")
	thresholds := fs.String("thresholds", "", "quadrant thresholds: a preset ("+strings.Join(policy.PresetNames(), ", ")+") or a JSON file (default: the engine's)")
	gsmPath := fs.String("gsm8k", "", "GSM8K JSONL file (default: ../shared "+sharedGSM8K+")")
	tmpl := fs.String("template", bench.DefaultGSM8KTemplate, "GSM8K prompt, a Go text/template with {{.Question}}")
	dataPath := fs.String("data", "", "arith problems, JSONL of the GSM8K format with \"steps\" (default: ../shared "+sharedArith+")")
	chat := fs.Bool("chat", false, "wrap prompts in the model's chat template (GGUF models that carry one)")
	csvPath := fs.String("csv", "", "also write the results as CSV to this `file`")
	jsonPath := fs.String("json", "", "also write the report, every output included, as JSON to this `file`")
	htmlPath := fs.String("html", "", "also write the interactive viewer (tree/viewer) of one item's beam-adaptive search at the largest budget, as one HTML `file`")
	htmlItem := fs.String("html-item", "", "the item -html shows, by ID (arith-0001, ...; default: the first task's first item)")
	svgPath := fs.String("svg", "", "also plot versus rows spent (first task): accuracy with its 95% interval when the task has answers, loglik/token and loop share; as SVG to this `file`")
	noTimings := fs.Bool("no-timings", false, "leave timings out of the markdown (to compare runs)")
	noSpeed := fs.Bool("no-speed", false, "skip the speed section")
	verifierPath := fs.String("verifier", "", "outcome verifier `file` (GGUF, as train-verifier writes) judging the paths of beam-adaptive, beam, self-consistency and best-of-N (with -endpoint, the servers' own --verifier is used)")
	threads := fs.Int("threads", 0, "kernel threads (0: GOMAXPROCS); with -backend ggml also ggml-cpu's (0: one per core)")
	backend := fs.String("backend", "cpu", "what runs the searches' forward passes: cpu or ggml (a GPU, or ggml's CPU backend; the scorer stays on the CPU)")
	ggmlDir := fs.String("ggml-dir", "", "folder of the ggml libraries for -backend ggml (default $ENTROPIX_GGML_DIR)")
	device := fs.String("device", "", "the ggml device for -backend ggml: cpu, vulkan0, cuda0, ... (default: the first GPU, else cpu)")
	flash := fs.String("flash-attn", "", "ggml's attention for -backend ggml: on (ggml_flash_attn_ext), off, or auto (the default: on a GPU, off on the CPU device and lavapipe)")
	kvName := fs.String("kv", "auto", "KV cache type: f32, f16, or auto: f16 for quantized weights, f32 for float ones (as entropix-search)")
	endpoints := fs.String("endpoint", "", "run the searches on entropix-search servers (`URL[,URL...]`, each started with serve -m on the same model file as -m), spread round robin; the outputs are still scored here, and -kv is the servers' own")
	parallel := fs.Int("parallel", 16, "with -endpoint: requests in flight per server (its --max-searches, 16 by default, run at once; more queue)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: entropix-bench eval %s\n\n"+
			"Runs every decoding mode over a prompt set at several forward-row budgets and prints\n"+
			"markdown tables: log-likelihood per token under the model, share of outputs caught in a\n"+
			"repetition loop, distinct-2, accuracy for tasks with answers, tokens, rows, forks,\n"+
			"prunes and wall time; then findings, where branching did not help, and a speed section.\n"+
			"LLAMA_BENCH (llama.cpp's llama-bench) or LLAMA2C_RUN (llama2.c's run) add their decode\n"+
			"speed on the same model file.\n\n"+
			"GSM8K accuracy per mode with a capable model (the published entropix comparison: the first\n"+
			"200 problems, Llama-3.2-1B-Instruct, no chat template, sampling 6%% against entropix 13%%):\n\n"+
			"  entropix-bench eval -m Llama-3.2-1B-Instruct-Q8_0.gguf -task gsm8k -limit 200 -budgets 1x,4x\n\n"+
			"The arith task (multi-step arithmetic word problems, prompt \"Question: Q\\nAnswer:\", correct when\n"+
			"the number after \"####\" is the gold) reports accuracy with a 95%% Wilson interval, by step count,\n"+
			"and against the rows each mode really spent (-svg plots it):\n\n"+
			"  entropix-bench eval -m bench/models/arith.gguf -task arith -no-speed -svg arith.svg\n\n", evalArgs)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxTokens < 0 || *limit < 0 || *threads < 0 {
		return usagef("-max-tokens, -limit and -threads must be >= 0")
	}
	switch {
	case *backend != "cpu" && *backend != "ggml":
		return usagef("-backend %q: want cpu or ggml", *backend)
	case *backend == "cpu" && (*ggmlDir != "" || *device != "" || *flash != ""):
		return usagef("-ggml-dir, -device and -flash-attn choose ggml's libraries, device and attention: give -backend ggml too")
	case *backend == "ggml":
		if err := ggml.CheckFlashAttn(*flash); err != nil {
			return usagef("-%v", err)
		}
		o := ggml.Options{Dir: *ggmlDir, Device: *device, Threads: *threads, FlashAttn: *flash}
		if err := ggml.Load(o); err != nil {
			return err
		}
		ggml.SetDefaults(o)
	}
	var searcher bench.Searcher
	if *endpoints != "" {
		if *parallel < 1 {
			return usagef("-parallel %d: want at least 1", *parallel)
		}
		urls, err := parseEndpoints(*endpoints)
		if err != nil {
			return err
		}
		searcher = endpointSearcher(urls)
		*parallel *= len(urls)
		*noSpeed = true // the speed section measures this machine
	}
	if _, _, err := model.ParseKVType(*kvName); err != nil {
		return usagef("-kv: %v", err)
	}
	if *maxWidth < 1 || *maxWidth > policy.MaxForkWidth {
		return usagef("-max-width %d outside [1, %d]", *maxWidth, policy.MaxForkWidth)
	}
	modes, err := parseModes(*modeList)
	if err != nil {
		return err
	}
	tasks, err := parseTasks(*taskList)
	if err != nil {
		return err
	}
	if *budgetList == "" {
		*budgetList = "1x,2x,4x,8x"
		if *quick {
			*budgetList = "1x,4x"
		}
	}
	budgetSpec, err := parseBudgets(*budgetList)
	if err != nil {
		return err
	}
	var pol *policy.File
	if *policyPath != "" {
		f, err := policy.LoadFile(*policyPath)
		if err != nil {
			return usagef("-policy: %v", err)
		}
		pol = &f
	}
	if *thresholds != "" {
		th, err := policy.ThresholdsFrom(*thresholds)
		if err != nil {
			return usagef("%v", err)
		}
		if pol == nil {
			f := policy.DefaultFile()
			pol = &f
		}
		pol.Thresholds = th
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}

	for _, o := range []struct{ flag, path string }{{"-csv", *csvPath}, {"-json", *jsonPath}, {"-svg", *svgPath}, {"-html", *htmlPath}} {
		if o.path != "" {
			if err := outfile.Check(o.path); err != nil {
				return usagef("%s: %v", o.flag, err)
			}
		}
	}
	if *dataPath != "" && !slices.Contains(tasks, "arith") {
		return usagef("-data is the arith task's file: add -task arith")
	}
	shared := findShared()
	// The tasks are made before the model loads, so that a missing file
	// or a bad template fails at once.
	taskOf := map[string]bench.Task{}
	for _, name := range tasks {
		if taskOf[name], err = newTask(name, shared, *gsmPath, *tmpl, *dataPath); err != nil {
			return err
		}
	}
	mp, tp := *modelPath, *tokPath
	if mp == "" {
		if shared == "" {
			return usagef("no -m given and ../shared (the default stories260K) is absent; set ENTROPIX_SHARED or pass -m")
		}
		mp = filepath.Join(shared, filepath.FromSlash(sharedModel))
		if tp == "" {
			tp = filepath.Join(shared, filepath.FromSlash(sharedTokenizer))
		}
	}
	start := time.Now()
	m, err := model.Load(mp, tp)
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(stderr, "loaded %s\n", m.Source)

	kv, err := m.KVType(*kvName)
	if err != nil {
		return usagef("-kv: %v", err)
	}
	base := bench.EvalConfig{Modes: modes, MaxWidth: *maxWidth, Seed: *seed, Policy: pol, Chat: *chat, Loop: bench.DefaultLoopRule(), KVType: kv,
		Searcher: searcher, Parallel: *parallel}
	if *backend == "ggml" {
		base.Backend = "ggml"
	}
	if *verifierPath != "" {
		v, err := loadEvalVerifier(*verifierPath, m)
		if err != nil {
			return err
		}
		defer v.Model().Close()
		base.Verifier, base.VerifierName = v, *verifierPath
	}
	rep := &bench.Report{Model: m.Source, Params: paramCount(m), Threads: kernels.Threads(), Config: base}
	for _, name := range tasks {
		def := evalTasks[name]
		cfg := base
		cfg.MaxTokens, cfg.Limit = def.maxTokens, def.limit
		if *quick {
			cfg.MaxTokens, cfg.Limit = def.quickMaxTokens, def.quickLimit
		}
		if *maxTokens > 0 {
			cfg.MaxTokens = *maxTokens
		}
		if *limit > 0 {
			cfg.Limit = *limit
		}
		task := taskOf[name]
		if cfg.MaxTokens == 0 {
			g, ok := task.(*bench.GSM8K)
			if !ok {
				return fmt.Errorf("task %s has no token limit", name)
			}
			if cfg.MaxTokens, err = g.AnswerTokenLimit(m); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "%s: %d new tokens per problem (room for the longest worked answer of %s)\n", name, cfg.MaxTokens, g.Path())
		}
		cfg.Budgets = budgetSpec.rows(cfg.MaxTokens)
		cfg.Progress = func(p bench.EvalProgress) {
			fmt.Fprintf(stderr, "[%d/%d] %s, %d rows, %s: %d items in %s\n", p.Done, p.Total, p.Task, p.Budget, p.Mode, p.Items, p.Wall.Round(time.Millisecond))
		}
		tr, err := bench.Eval(ctx, m, task, cfg)
		if err != nil {
			return err
		}
		rep.Tasks = append(rep.Tasks, tr)
	}
	if !*noSpeed {
		rep.Speed = measureEvalSpeed(ctx, m, mp, tp, *quick, stderr)
	}
	rep.Wall = time.Since(start)
	fmt.Fprintf(stderr, "done in %s\n", rep.Wall.Round(100*time.Millisecond))

	if err := rep.Markdown(stdout, bench.MarkdownOptions{NoTimings: *noTimings}); err != nil {
		return err
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{*csvPath, rep.WriteCSV}, {*jsonPath, rep.WriteJSON}, {*svgPath, rep.WriteSVG}} {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", out.path)
	}
	if *htmlPath != "" {
		if err := writeViewer(ctx, m, taskOf[tasks[0]], rep, *htmlItem, *htmlPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", *htmlPath)
	}
	return nil
}

// writeViewer writes the viewer of one item of the report's first task:
// its beam-adaptive search at the largest budget, run again exactly as the
// evaluation ran it.
func writeViewer(ctx context.Context, m *model.Model, task bench.Task, rep *bench.Report, id, path string) error {
	tr := rep.Tasks[0]
	if id == "" {
		if len(tr.Outputs) == 0 {
			return errors.New("-html: the evaluation has no outputs")
		}
		id = tr.Outputs[0].Item
	}
	cfg := rep.Config
	cfg.MaxTokens, cfg.Budgets, cfg.Limit = tr.MaxTokens, tr.Budgets, tr.Items
	budget := slices.Max(tr.Budgets)
	res, err := bench.SearchItem(ctx, m, task, cfg, id, engine.BeamAdaptive, budget)
	if err != nil {
		return fmt.Errorf("-html: %w", err)
	}
	th := policy.EntropixV1
	if cfg.Policy != nil {
		th = cfg.Policy.Thresholds
	}
	title := fmt.Sprintf("%s %s · beam-adaptive at %d rows · %s", tr.Task, id, budget, m.Source)
	return writeFile(path, func(w io.Writer) error {
		return res.Tree.WriteHTML(w, tree.HTMLOptions{Title: title, Thresholds: th, TokenText: m.Tokenizer.Piece})
	})
}

// writeFile writes a file through write atomically (package outfile): a
// failure leaves whatever was at path as it was.
func writeFile(path string, write func(io.Writer) error) error {
	return outfile.Write(path, os.Stdout, write)
}

func parseModes(s string) ([]engine.Mode, error) {
	if s == "" {
		return engine.Modes(), nil
	}
	var modes []engine.Mode
	for _, f := range strings.Split(s, ",") {
		m, err := engine.ParseMode(strings.TrimSpace(f))
		if err != nil {
			return nil, usagef("-modes: %v", err)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

func parseTasks(s string) ([]string, error) {
	var tasks []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, ok := evalTasks[f]; !ok {
			return nil, usagef("-task %q: want one of %s", f, taskNames)
		}
		tasks = append(tasks, f)
	}
	return tasks, nil
}

// budgetSpec is a list of budgets, each absolute rows or a multiple of the
// token limit.
type budgetSpec []struct {
	n        int
	multiple bool
}

func parseBudgets(s string) (budgetSpec, error) {
	var spec budgetSpec
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := strings.HasSuffix(f, "x")
		n, err := strconv.Atoi(strings.TrimSuffix(f, "x"))
		if err != nil || n < 1 || n > 1<<20 {
			return nil, usagef("-budgets: %q is neither rows nor a multiple such as 4x", f)
		}
		spec = append(spec, struct {
			n        int
			multiple bool
		}{n, mult})
	}
	return spec, nil
}

// rows returns the budgets in rows for a token limit.
func (s budgetSpec) rows(maxTokens int) []int {
	rs := make([]int, len(s))
	for i, b := range s {
		rs[i] = b.n
		if b.multiple {
			rs[i] = b.n * maxTokens
		}
	}
	return rs
}

// newTask returns the built-in task name, with its data file: for gsm8k
// gsmPath, for arith dataPath, or the default file under shared.
func newTask(name, shared, gsmPath, tmpl, dataPath string) (bench.Task, error) {
	switch name {
	case "stories":
		return bench.Stories(), nil
	case "name-recall":
		return bench.NameRecall(), nil
	case "arith":
		path, err := dataFile("arith", "-data", dataPath, shared, sharedArith)
		if err != nil {
			return nil, err
		}
		return bench.NewArith(path), nil
	}
	path, err := dataFile("gsm8k", "-gsm8k", gsmPath, shared, sharedGSM8K)
	if err != nil {
		return nil, err
	}
	t, err := bench.NewGSM8K(path, tmpl)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return t, nil
}

// dataFile returns the data file of a task: the one given with flag, else
// rel under the shared directory; a usage error when it is not a file.
func dataFile(task, flag, given, shared, rel string) (string, error) {
	path := given
	if path == "" {
		if shared == "" {
			return "", usagef("-task %s: no %s file given and ../shared (with %s) is absent; set ENTROPIX_SHARED or pass %s", task, flag, rel, flag)
		}
		path = filepath.Join(shared, filepath.FromSlash(rel))
	}
	st, err := os.Stat(path)
	switch {
	case err != nil && given == "":
		return "", usagef("-task %s: no %s file given and the default %s is absent: %v", task, flag, path, err)
	case err != nil:
		return "", usagef("-task %s: %s: %v", task, flag, err)
	case st.IsDir():
		return "", usagef("-task %s: %s is a directory", task, path)
	}
	return path, nil
}

// findShared returns the shared data directory: $ENTROPIX_SHARED, or a
// "shared" directory next to the working directory or one of its
// parents (../shared from the repository root), or "".
func findShared() string {
	if d := os.Getenv("ENTROPIX_SHARED"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		for _, c := range []string{filepath.Join(dir, "..", "shared"), filepath.Join(dir, "shared")} {
			if st, err := os.Stat(filepath.Join(c, "models")); err == nil && st.IsDir() {
				return filepath.Clean(c)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// paramCount counts the model's parameters.
func paramCount(m *model.Model) int64 {
	w := m.Weights
	mat := func(x *model.Tensor) int64 {
		if x == nil {
			return 0
		}
		return int64(x.Rows) * int64(x.Cols)
	}
	n := mat(w.TokenEmbd) + int64(len(w.OutputNorm))
	if w.Output != w.TokenEmbd {
		n += mat(w.Output)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		n += int64(len(l.AttnNorm)+len(l.FFNNorm)+len(l.Bq)+len(l.Bk)+len(l.Bv)) +
			mat(l.Wq) + mat(l.Wk) + mat(l.Wv) + mat(l.Wo) + mat(l.W1) + mat(l.W2) + mat(l.W3)
	}
	return n
}

// isGGUF reports whether the file at path starts with the GGUF magic.
func isGGUF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return bytes.Equal(magic[:], []byte("GGUF")), nil
}

// sameModel returns path when it is in the wanted format (GGUF or
// llama2.c), else the file beside it with the same stem and the wanted
// format's extension (.gguf or .bin), or "".
func sameModel(path string, gguf bool) string {
	if g, err := isGGUF(path); err == nil && g == gguf {
		return path
	}
	ext := ".bin"
	if gguf {
		ext = ".gguf"
	}
	alt := strings.TrimSuffix(path, filepath.Ext(path)) + ext
	if g, err := isGGUF(alt); err == nil && g == gguf {
		return alt
	}
	return ""
}

// measureEvalSpeed measures the speed section on the evaluated model:
// bench.MeasureSpeed (single-stream decode, batched steps, prefill, forks,
// tree memory), the search overhead, and the external baselines named by
// LLAMA_BENCH and LLAMA2C_RUN. Failures become notes in the section.
func measureEvalSpeed(ctx context.Context, m *model.Model, modelPath, tokPath string, quick bool, stderr io.Writer) *bench.SpeedSection {
	s := &bench.SpeedSection{}
	note := func(format string, args ...any) {
		n := fmt.Sprintf(format, args...)
		s.Notes = append(s.Notes, n)
		fmt.Fprintln(stderr, n)
	}
	cfg := bench.DefaultSpeedConfig()
	widths, tokens, rounds := []int{1, 16, 64}, 64, 3
	if quick {
		cfg = bench.QuickSpeedConfig()
		tokens, rounds = 32, 1
	}
	fmt.Fprintf(stderr, "measuring speed...\n")
	var dtype kernels.DType // as the CPU runs the weights
	if w, err := cpu.WeightsOf(m); err == nil && len(w.Layers) > 0 {
		dtype = w.Layers[0].Wq.Type
	}
	sp, err := bench.MeasureSpeed(m, filepath.Base(modelPath), dtype, paramCount(m), cfg)
	if err != nil {
		note("Speed measurements failed: %v.", err)
	}
	s.Speed = sp
	if s.Overhead, err = bench.MeasureSearchOverhead(ctx, m, widths, tokens, rounds); err != nil {
		note("Search overhead not measured: %v.", err)
	}
	addBaselines(ctx, s, m.Config.ContextLen, modelPath, tokPath, stderr)
	return s
}

// addBaselines runs the external programs named by LLAMA_BENCH and
// LLAMA2C_RUN on the same model file, over as many tokens as our
// single-stream decode measurement, or notes why not.
func addBaselines(ctx context.Context, s *bench.SpeedSection, contextLen int, modelPath, tokPath string, stderr io.Writer) {
	note := func(format string, args ...any) {
		n := fmt.Sprintf(format, args...)
		s.Notes = append(s.Notes, n)
		fmt.Fprintln(stderr, n)
	}
	sp := s.Speed
	llamaBench, llama2c := os.Getenv("LLAMA_BENCH"), os.Getenv("LLAMA2C_RUN")
	if llamaBench == "" && llama2c == "" {
		note("External baselines skipped: set LLAMA_BENCH to llama.cpp's llama-bench binary, or LLAMA2C_RUN to llama2.c's run binary, to compare decode speed on the same model file in the same run.")
	}
	if llamaBench != "" && sp != nil {
		if gguf := sameModel(modelPath, true); gguf == "" {
			note("llama.cpp not run: LLAMA_BENCH is set, but %s is not GGUF and no .gguf of the same name lies beside it.", modelPath)
		} else {
			fmt.Fprintf(stderr, "running %s on %s...\n", llamaBench, gguf)
			sp.Llama, sp.LlamaErr = bench.RunLlamaBench(ctx, llamaBench, gguf, sp.Threads, sp.Decode.Tokens)
			if sp.LlamaErr != nil {
				note("llama.cpp failed: %v.", sp.LlamaErr)
			}
		}
	}
	if llama2c != "" && sp != nil {
		ckpt := sameModel(modelPath, false)
		tok := tokPath
		if tok == "" && ckpt != "" {
			tok = filepath.Join(filepath.Dir(ckpt), "tokenizer.bin")
		}
		switch {
		case ckpt == "":
			note("llama2.c not run: LLAMA2C_RUN is set, but %s is not a llama2.c checkpoint and no .bin of the same name lies beside it.", modelPath)
		case tok == "":
			note("llama2.c not run: no tokenizer (-z) for %s.", ckpt)
		default:
			fmt.Fprintf(stderr, "running %s on %s...\n", llama2c, ckpt)
			steps := min(sp.Decode.Tokens, contextLen)
			var err error
			if s.Llama2C, err = bench.RunLlama2C(ctx, llama2c, ckpt, tok, steps); err != nil {
				note("llama2.c failed: %v.", err)
			}
		}
	}
}
