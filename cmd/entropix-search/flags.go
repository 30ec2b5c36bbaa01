package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
)

// config is the parsed command line.
type config struct {
	// set holds the flags given on the command line (by name, without
	// dashes), to tell "--beam 0" from no --beam.
	set map[string]bool

	model, tokenizer, prompt, promptFile string
	maxTokens                            int
	seed                                 uint64
	seedFlag                             int64
	ctxSize                              int
	ignoreEOS                            bool
	repeatPenalty, presence, frequency   float64
	repeatLastN                          int
	stops                                stopList
	nProbs                               int
	temp, topP, minP                     float64
	topK                                 int

	greedy, sample, entropix, adaptive bool
	beam, cot, selfConsistency, bestOf int
	mode                               engine.Mode

	budgetRows, maxWidth int
	timeout              time.Duration

	thresholds, calibrate, clarifyText string
	policyPath, score                  string
	printPolicy                        bool
	dot, json, svg, html               string
	dotHidePruned                      bool
	dotMaxDepth                        int
	chat                               bool
	system, messages                   string
	threads                            int
	kvType                             string
	backend                            backendFlags
	backendOpt                         engine.Option // the chosen backend, once readied
	verifier                           string
	logLevel, logFormat                string
	quiet, version, noEscape           bool
}

const usageHeader = `entropix-search: continue a prompt with entropy-guided tree search.

Usage:
  entropix-search -m MODEL [-z TOKENIZER] -p PROMPT [mode] [flags]

Modes (default --beam-adaptive):
  --greedy  --sample  --entropix  --beam K  --cot-decoding K  --beam-adaptive
  --self-consistency N  --best-of N

Flags:
`

// parse reads the command line. Every problem is an error for exit code 2.
func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("entropix-search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The flag package prints the usage on every parse error; a bad value
	// deserves one line (the error), not the whole list: the list is for
	// -h only.
	fs.Usage = func() {}
	str := func(p *string, short, long, def, usage string) {
		if short != "" {
			fs.StringVar(p, short, def, usage+" (same as --"+long+")")
		}
		fs.StringVar(p, long, def, usage)
	}
	integer := func(p *int, short, long string, def int, usage string) {
		if short != "" {
			fs.IntVar(p, short, def, usage+" (same as --"+long+")")
		}
		fs.IntVar(p, long, def, usage)
	}
	str(&c.model, "m", "model", "", "model file: GGUF or llama2.c `.bin`")
	str(&c.tokenizer, "z", "tokenizer", "", "llama2.c tokenizer.bin for a .bin checkpoint")
	str(&c.prompt, "p", "prompt", "", `prompt text (or -f FILE, or standard input); the escapes \n \r \t \' \" \\ and \xHH in it become the characters they stand for, unless --no-escape`)
	str(&c.promptFile, "f", "file", "", "read the prompt from this file, as it is (no escapes)")
	fs.BoolVar(&c.noEscape, "no-escape", false, "take the -p prompt as it is, backslashes included (-f and standard input always are)")
	integer(&c.maxTokens, "n", "max-tokens", 256, "maximum new tokens")
	fs.Int64Var(&c.seedFlag, "seed", 42, "seed of every random draw (-1: a random one, printed)")
	fs.IntVar(&c.nProbs, "n-probs", 0, "show the N most probable tokens of each generated token's distribution (stderr; in --json: each node's top)")
	fs.Var(&c.stops, "r", "stop at this text, which is not output (repeatable; same as --stop)")
	fs.Var(&c.stops, "stop", "stop at this text, which is not output (repeatable)")
	integer(&c.ctxSize, "c", "ctx-size", 0, "context size in tokens, at most the model's (0: the model's)")
	fs.BoolVar(&c.ignoreEOS, "ignore-eos", false, "never end at the end-of-sequence token (generate -n tokens)")
	fs.Float64Var(&c.repeatPenalty, "repeat-penalty", 1, "divide the logits of the last --repeat-last-n tokens by this (1: off)")
	fs.IntVar(&c.repeatLastN, "repeat-last-n", 64, "tokens the penalties look back on")
	fs.Float64Var(&c.presence, "presence-penalty", 0, "subtract this from the logit of every recent token (0: off)")
	fs.Float64Var(&c.frequency, "frequency-penalty", 0, "subtract this per recent occurrence of a token (0: off)")
	fs.Float64Var(&c.temp, "temp", 0.8, "temperature (--sample)")
	fs.IntVar(&c.topK, "top-k", 40, "top-k (--sample; 0 = off)")
	fs.Float64Var(&c.topP, "top-p", 0.95, "top-p (--sample; 1 = off)")
	fs.Float64Var(&c.minP, "min-p", 0.05, "min-p (--sample; 0 = off)")

	fs.BoolVar(&c.greedy, "greedy", false, "mode: argmax at every step")
	fs.BoolVar(&c.sample, "sample", false, "mode: the sampler chain (--temp, --top-k, --top-p, --min-p)")
	fs.BoolVar(&c.entropix, "entropix", false, "mode: the single-path entropix sampler")
	fs.IntVar(&c.beam, "beam", 0, "mode: beam search of width `K`")
	fs.IntVar(&c.cot, "cot-decoding", 0, "mode: CoT-decoding over the top `K` first tokens")
	fs.IntVar(&c.selfConsistency, "self-consistency", 0, "mode: `N` samples (--temp, --top-k, ...) in one batch; the answer most reach (the number after \"####\" or \"answer is\", else the last number)")
	fs.IntVar(&c.bestOf, "best-of", 0, "mode: `N` samples in one batch; the one of highest mean log-probability")
	fs.BoolVar(&c.adaptive, "beam-adaptive", false, "mode: varentropy-driven tree search (the default)")

	fs.IntVar(&c.budgetRows, "budget-rows", 0, "compute budget: forward rows after the prompt (0 = none)")
	fs.IntVar(&c.maxWidth, "max-width", 0, "most live branches (0 = the mode's default)")
	fs.DurationVar(&c.timeout, "timeout", 0, "stop with the best result so far after this long (e.g. 30s)")

	fs.StringVar(&c.thresholds, "thresholds", "", "quadrant thresholds: a preset name or a JSON `file`")
	fs.StringVar(&c.calibrate, "calibrate", "", "print a policy file fitted to beam-adaptive's own rows over the prompts of this `file` (one a line, with -p's escapes such as \\n)")
	fs.StringVar(&c.policyPath, "policy", "", "policy `file` (JSON, as --calibrate prints): every knob of entropix and beam-adaptive")
	fs.BoolVar(&c.printPolicy, "print-policy", false, "print the effective policy (defaults, --policy, then the flags) as JSON and exit")
	fs.StringVar(&c.verifier, "verifier", "", "outcome verifier `file` (GGUF, as entropix-bench train-verifier writes): judges the complete paths of --beam-adaptive, --beam, --self-consistency and --best-of and weighs their answer vote (its rows count in the budget)")
	fs.StringVar(&c.score, "score", "", "beam-adaptive's vote weight: logprob (default), mean-logprob, margin, group or entropix")
	fs.StringVar(&c.clarifyText, "clarify-text", "", `text inserted when the model is uniformly unsure (default " Wait,"; "-" = never)`)
	fs.StringVar(&c.dot, "dot", "", "write the search tree as Graphviz DOT to this `file`")
	fs.StringVar(&c.json, "json", "", "write the search tree and result as JSON to this `file`")
	fs.StringVar(&c.html, "html", "", "write an interactive view of the search (text, chart, tree) as one self-contained HTML `file`")
	fs.BoolVar(&c.dotHidePruned, "dot-hide-pruned", false, "leave pruned and unexplored branches out of --dot and --svg")
	fs.IntVar(&c.dotMaxDepth, "dot-max-depth", 0, "draw --dot and --svg only down to this many tokens below the prompt (0: all)")
	fs.StringVar(&c.svg, "svg", "", "write the search tree as SVG to this `file` (needs Graphviz)")
	fs.BoolVar(&c.chat, "chat", false, "apply the model's chat template (GGUF, rendered as Jinja) to the prompt as a user turn")
	fs.StringVar(&c.system, "system", "", "a system message first (implies --chat)")
	fs.StringVar(&c.messages, "messages", "", "a conversation `file`: a JSON array of {\"role\", \"content\"}, before the prompt (implies --chat)")
	integer(&c.threads, "t", "threads", 0, "worker threads (0 = all cores)")
	c.backend.register(fs)
	fs.StringVar(&c.kvType, "kv-type", "auto", "KV cache type: f32; f16 for half the memory and attention traffic; auto: f16 for quantized weights, f32 for float ones")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "console", "log format: console or json")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress or summary on stderr")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageHeader)
			fs.PrintDefaults()
			fmt.Fprintf(stderr, "\nThreshold presets (--thresholds): %s\n", strings.Join(policy.PresetNames(), ", "))
		}
		return nil, err
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (quote the prompt: -p \"...\")", fs.Arg(0))
	}
	if c.version {
		return c, nil
	}
	if !c.noEscape {
		c.prompt = unescape(c.prompt)
	}
	if c.system != "" || c.messages != "" {
		c.chat = true
	}
	return c, c.check()
}

// unescape turns the escape sequences of a -p prompt into the characters
// they stand for, as llama.cpp does with its prompt: \n (newline), \r, \t,
// \', \", \\ (one backslash) and \xHH (the byte of two hex digits). Any
// other backslash, a trailing one included, stays as it is, with the
// character after it: "\q" is a backslash and a q.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch e := s[i+1]; e {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '\'', '"', '\\':
			b.WriteByte(e)
		case 'x':
			if i+3 < len(s) {
				if hi, lo := unhex(s[i+2]), unhex(s[i+3]); hi >= 0 && lo >= 0 {
					b.WriteByte(byte(hi<<4 | lo))
					i += 3
					continue
				}
			}
			b.WriteByte('\\')
			continue // the x and what follows are plain text
		default:
			b.WriteByte('\\')
			continue // so is the character after the backslash
		}
		i++ // the escape's second character is consumed
	}
	return b.String()
}

// unhex returns the value of the hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// check validates values and picks the mode.
func (c *config) check() error {
	var modes []string
	set := func(on bool, name string, m engine.Mode) {
		if on {
			modes = append(modes, name)
			c.mode = m
		}
	}
	c.mode = engine.BeamAdaptive
	set(c.greedy, "--greedy", engine.Greedy)
	set(c.sample, "--sample", engine.Sample)
	set(c.entropix, "--entropix", engine.Entropix)
	set(c.set["beam"], "--beam", engine.Beam)
	set(c.set["cot-decoding"], "--cot-decoding", engine.CoTDecoding)
	set(c.adaptive, "--beam-adaptive", engine.BeamAdaptive)
	set(c.set["self-consistency"], "--self-consistency", engine.SelfConsistency)
	set(c.set["best-of"], "--best-of", engine.BestOfN)
	var errs []error
	if _, _, err := model.ParseKVType(c.kvType); err != nil {
		errs = append(errs, fmt.Errorf("--kv-type: %w", err))
	}
	if len(modes) > 1 {
		errs = append(errs, fmt.Errorf("choose one mode, not %s", strings.Join(modes, " and ")))
	}
	if (c.set["beam"] && (c.beam < 1 || c.beam > 64)) || (c.set["cot-decoding"] && (c.cot < 1 || c.cot > 64)) {
		errs = append(errs, errors.New("--beam and --cot-decoding take a width K in 1..64"))
	}
	if (c.set["self-consistency"] && (c.selfConsistency < 1 || c.selfConsistency > 64)) || (c.set["best-of"] && (c.bestOf < 1 || c.bestOf > 64)) {
		errs = append(errs, errors.New("--self-consistency and --best-of take a number of samples N in 1..64"))
	}
	if c.maxTokens <= 0 {
		errs = append(errs, fmt.Errorf("-n %d: the number of new tokens must be positive", c.maxTokens))
	}
	if c.budgetRows < 0 || c.maxWidth < 0 || c.timeout < 0 || c.threads < 0 {
		errs = append(errs, errors.New("budgets, --timeout and --threads must not be negative"))
	}
	if err := c.backend.check(); err != nil {
		errs = append(errs, err)
	}
	if c.seedFlag < -1 {
		errs = append(errs, fmt.Errorf("--seed %d: want a seed >= 0, or -1 for a random one", c.seedFlag))
	}
	if c.ctxSize < 0 {
		errs = append(errs, fmt.Errorf("-c %d: want a context size > 0 (0: the model's)", c.ctxSize))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--repeat-penalty", c.repeatPenalty}, {"--presence-penalty", c.presence}, {"--frequency-penalty", c.frequency}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || (f.name == "--repeat-penalty" && f.v < 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value (>= 0 for --repeat-penalty)", f.name, f.v))
		}
	}
	if c.nProbs < 0 || c.nProbs > 100 {
		errs = append(errs, fmt.Errorf("--n-probs %d: want 0..100", c.nProbs))
	}
	if c.repeatLastN < 0 || c.repeatLastN > 1<<16 {
		errs = append(errs, fmt.Errorf("--repeat-last-n %d: want 0..65536", c.repeatLastN))
	}
	if c.maxWidth > policy.MaxForkWidth {
		errs = append(errs, fmt.Errorf("--max-width %d: at most %d live branches", c.maxWidth, policy.MaxForkWidth))
	}
	if !(c.temp >= 0) || math.IsInf(c.temp, 0) || c.topK < 0 || !(c.topP >= 0 && c.topP <= 1) || !(c.minP >= 0 && c.minP <= 1) {
		errs = append(errs, errors.New("--temp must be >= 0, --top-k >= 0, --top-p and --min-p in [0, 1]"))
	}
	dashes := 0
	for _, p := range []string{c.dot, c.json, c.svg, c.html} {
		if p == "-" {
			dashes++
		}
	}
	if dashes > 1 {
		errs = append(errs, errors.New("only one of --dot, --json, --svg and --html can be - (standard output)"))
	}
	if c.dotMaxDepth < 0 {
		errs = append(errs, fmt.Errorf("--dot-max-depth %d: want >= 0", c.dotMaxDepth))
	}
	if c.prompt != "" && c.promptFile != "" {
		errs = append(errs, errors.New("give the prompt with -p or -f, not both"))
	}
	switch c.logFormat {
	case "console", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want console or json", c.logFormat))
	}
	if c.model == "" && !c.printPolicy {
		errs = append(errs, errors.New("no model: give one with -m FILE (GGUF or llama2.c .bin)"))
	}
	return errors.Join(errs...)
}

// stopList is a repeatable -r/--stop flag.
type stopList []string

func (l *stopList) String() string { return strings.Join(*l, ", ") }

func (l *stopList) Set(s string) error {
	s = unescape(s)
	if s == "" {
		return errors.New("an empty stop string")
	}
	*l = append(*l, s)
	return nil
}
