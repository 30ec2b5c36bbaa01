// Command entropix-search continues a prompt with a language model, choosing
// tokens by entropy-guided tree search, and can export the decision tree.
//
//	entropix-search -m model.gguf -p "Once upon a time" -n 128 --dot tree.dot
//
// The committed text streams to standard output as it is decided; progress
// and a summary go to standard error. Bad input exits with status 2, an
// interrupt (Ctrl-C) with 130 after printing the partial result and
// writing the requested tree files.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu"  // the CPU backend, model.NewBackend("cpu", ...)
	_ "github.com/entropix-search/entropix-search/model/ggml" // the ggml backend (--backend ggml)
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/policy"
)

var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(run(watchSignals(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is bad input: the message is printed and the exit code is 2.
type usageError struct{ error }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve" {
		err := runServe(ctx, args[1:], stderr, nil)
		var ue usageError
		switch {
		case err == nil:
			return exitOK
		case errors.As(err, &ue):
			if errors.Is(ue.error, flag.ErrHelp) {
				return exitOK
			}
			if !strings.Contains(err.Error(), "flag provided but not defined") && !strings.Contains(err.Error(), "invalid value") {
				fmt.Fprintln(stderr, "entropix-search:", ue.error)
			}
			return exitUsage
		default:
			fmt.Fprintln(stderr, "entropix-search:", err)
			return exitFailure
		}
	}
	c, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		if !strings.Contains(err.Error(), "flag provided but not defined") && !strings.Contains(err.Error(), "invalid value") {
			fmt.Fprintln(stderr, "entropix-search:", err)
		} else {
			fmt.Fprintln(stderr, "entropix-search: -h lists the flags")
		}
		return exitUsage
	case c.version:
		fmt.Fprintln(stdout, "entropix-search", version, "(kernels: "+kernels.Implementation()+")")
		return exitOK
	}
	err = execute(ctx, c, stdin, stdout, stderr)
	var ue usageError
	var in interrupt
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "entropix-search:", ue.error)
		return exitUsage
	case errors.As(err, &in):
		fmt.Fprintln(stderr, "entropix-search:", in)
		return in.exitCode()
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "entropix-search: interrupted")
		return exitInterrupted
	default:
		fmt.Fprintln(stderr, "entropix-search:", err)
		return exitFailure
	}
}

func execute(ctx context.Context, c *config, stdin io.Reader, stdout, stderr io.Writer) error {
	term := isTerminal(stderr) && !c.quiet
	log, err := newLogger(c, stderr)
	if err != nil {
		return usageError{err}
	}
	if c.threads > 0 {
		kernels.SetThreads(c.threads)
	}
	pf, err := effectivePolicy(c)
	if err != nil {
		return usageError{err}
	}
	if c.printPolicy {
		return pf.Write(stdout)
	}
	if err := checkOutputs(c); err != nil {
		return usageError{err}
	}
	// A write to standard output that fails (a closed pipe) stops the
	// search like a signal: the files are still written.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	m, err := model.Load(c.model, c.tokenizer)
	if err != nil {
		return usageError{err}
	}
	defer m.Close()
	if c.ctxSize > 0 {
		if c.ctxSize > m.Config.ContextLen {
			return usageError{fmt.Errorf("-c %d: the model's context is %d tokens", c.ctxSize, m.Config.ContextLen)}
		}
		m.Config.ContextLen = c.ctxSize
	}
	if c.backendOpt, err = c.backend.option(c.threads, log); err != nil {
		return err
	}
	c.seed = uint64(c.seedFlag)
	if c.seedFlag == -1 {
		c.seed = rand.Uint64()
		fmt.Fprintf(stderr, "entropix-search: seed %d\n", c.seed)
	}
	st := c.settings(pf)
	if err := st.Validate(); err != nil {
		return usageError{err}
	}
	if c.set["temp"] || c.set["top-k"] || c.set["top-p"] || c.set["min-p"] {
		switch c.mode {
		case engine.Sample, engine.SelfConsistency, engine.BestOfN:
		default:
			fmt.Fprintf(stderr, "entropix-search: note: --temp, --top-k, --top-p and --min-p set the sampler of --sample, --self-consistency and --best-of; %s does not use them\n", c.mode)
		}
	}

	if c.calibrate != "" {
		return calibrate(ctx, c, m, st, stdout, stderr)
	}

	var prompt string
	var ids, stops []int
	if c.chat {
		msgs, err := chatMessages(c, stdin)
		if err != nil {
			return usageError{err}
		}
		if ids, stops, err = m.EncodeChat(msgs); err != nil {
			return usageError{fmt.Errorf("--chat: %w", err)}
		}
		prompt = msgs[len(msgs)-1].Content
	} else {
		if prompt, err = readPrompt(c, stdin); err != nil {
			return usageError{err}
		}
		ids, stops, _ = m.EncodePrompt(prompt, false)
	}

	kv, err := m.KVType(c.kvType)
	if err != nil {
		return usageError{fmt.Errorf("--kv-type: %w", err)}
	}
	stream := stdout // where "-" outputs go
	if c.dot == "-" || c.json == "-" || c.svg == "-" || c.html == "-" {
		stdout = io.Discard // that output is the run's whole output
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	emit := func(s string) {
		_, err := out.WriteString(s)
		if err == nil {
			err = out.Flush()
		}
		if err != nil && ctx.Err() == nil {
			stopRun(interrupt{syscall.SIGPIPE})
		}
	}
	opts := append(st.Options(), c.backendOpt, engine.WithLogger(log), engine.WithStopTokens(stops...), engine.WithKVType(kv), engine.WithStream(emit))
	var prog *progress
	// The progress line redraws itself with a carriage return: on the
	// terminal the text streams to, it would erase that text.
	if term && !isTerminal(stdout) {
		prog = &progress{w: stderr}
		opts = append(opts, engine.WithProgress(prog.update))
	}
	if c.verifier != "" {
		v, err := engine.LoadVerifier(c.verifier)
		if err != nil {
			return usageError{fmt.Errorf("--verifier: %w", err)}
		}
		defer v.Model().Close()
		opts = append(opts, engine.WithVerifier(v))
	}
	eng, err := engine.New(m, opts...)
	if err != nil {
		if errors.Is(err, engine.ErrVerifierMismatch) {
			err = fmt.Errorf("--verifier: %w", err)
		}
		return usageError{err}
	}
	defer eng.Close()
	if !c.chat {
		emit(prompt)
	}
	budget := st.Budget()
	budget.Timeout = c.timeout
	res, err := eng.SearchTokens(ctx, prompt, ids, budget)
	emit("\n")
	if prog != nil {
		prog.clear()
	}
	interrupted := errors.Is(err, context.Canceled)
	switch {
	case errors.Is(err, engine.ErrPromptTooLong), errors.Is(err, engine.ErrEmptyPrompt), errors.Is(err, engine.ErrNonFinite):
		return usageError{err}
	case err != nil && !interrupted && !errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if werr := writeOutputs(hardStop, c, m, prompt, res, pf.Thresholds, stream); werr != nil {
		if cause := context.Cause(hardStop); cause != nil {
			return cause // a second signal stopped the writing
		}
		return werr
	}
	if !c.quiet {
		summary(stderr, term, c, res)
	}
	if c.nProbs > 0 {
		printProbs(stderr, m, res)
	}
	if interrupted {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return context.Canceled
	}
	return nil
}

// topProbs is how many alternatives each tree node keeps: --n-probs, or
// 5 for --html's tooltips (they change nothing in the search).
func topProbs(c *config) int {
	if c.nProbs == 0 && c.html != "" {
		return 5
	}
	return c.nProbs
}

// settings are the search settings the flags give, on the policy pf
// (effectivePolicy): the same engine.Settings as the server's entropix
// object and --calibrate fill. The penalty flags, when any is given, set
// both the sampler's penalties and the policy's.
func (c *config) settings(pf policy.File) engine.Settings {
	st := engine.DefaultSettings()
	sp := &st.Sampling
	if c.set["repeat-penalty"] || c.set["repeat-last-n"] || c.set["presence-penalty"] || c.set["frequency-penalty"] {
		pf.Penalties = policy.Penalties{Window: c.repeatLastN, Repeat: c.repeatPenalty, Presence: c.presence, Frequency: c.frequency}
		sp.RepeatPenalty, sp.RepeatWindow, sp.PresencePenalty, sp.FrequencyPenalty = c.repeatPenalty, c.repeatLastN, c.presence, c.frequency
	}
	sp.Temperature, sp.TopK, sp.TopP, sp.MinP = c.temp, c.topK, c.topP, c.minP
	st.File = pf
	st.Mode = c.mode
	st.MaxTokens, st.BudgetRows, st.MaxWidth = c.maxTokens, c.budgetRows, c.maxWidth
	st.Seed = c.seed
	for _, k := range []int{c.beam, c.cot, c.selfConsistency, c.bestOf} {
		if k > 0 {
			st.Width = k // --beam K and the like: the width K
		}
	}
	st.Stop = c.stops
	st.TopProbs = topProbs(c)
	st.IgnoreEOS = c.ignoreEOS
	return st
}

// effectivePolicy is the policy the flags give: the defaults, then the
// --policy file, then --thresholds, --clarify-text and --score.
func effectivePolicy(c *config) (policy.File, error) {
	pf := policy.DefaultFile()
	if c.policyPath != "" {
		f, err := policy.LoadFile(c.policyPath)
		if err != nil {
			return pf, fmt.Errorf("--policy: %w", err)
		}
		pf = f
	}
	if c.thresholds != "" {
		th, err := policy.ThresholdsFrom(c.thresholds)
		if err != nil {
			return pf, err
		}
		pf.Thresholds = th
	}
	if c.clarifyText != "" {
		pf.ClarifyText = c.clarifyText
	}
	if c.score != "" {
		if err := pf.Score.UnmarshalText([]byte(c.score)); err != nil {
			return pf, fmt.Errorf("--score: %w", err)
		}
	}
	return pf, pf.Validate()
}

// chatMessages is the conversation of --chat: the --messages file's
// messages, a --system message first when given, and the prompt (-p, -f
// or standard input) as the last user turn when there is one.
func chatMessages(c *config, stdin io.Reader) ([]model.Message, error) {
	var msgs []model.Message
	if c.system != "" {
		msgs = append(msgs, model.Message{Role: "system", Content: c.system})
	}
	if c.messages != "" {
		b, err := readSmallFile(c.messages, maxPromptBytes)
		if err != nil {
			return nil, fmt.Errorf("--messages: %w", err)
		}
		var file []model.Message
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return nil, fmt.Errorf("--messages %s: want a JSON array of {\"role\", \"content\"}: %w", c.messages, err)
		}
		for i, m := range file {
			switch m.Role {
			case "system", "user", "assistant", "tool":
			default:
				return nil, fmt.Errorf("--messages %s: message %d has role %q (want system, user, assistant or tool)", c.messages, i, m.Role)
			}
		}
		msgs = append(msgs, file...)
	}
	switch p, err := readPrompt(c, stdin); {
	case err == nil:
		msgs = append(msgs, model.Message{Role: "user", Content: p})
	case !errors.Is(err, errNoPrompt) || c.promptFile != "":
		return nil, err
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role == "system" {
		return nil, errors.New("--chat: no user message: give -p TEXT, -f FILE or --messages FILE")
	}
	return msgs, nil
}

// errNoPrompt is readPrompt's error when no source gave a prompt.
var errNoPrompt = errors.New("empty prompt: give one with -p TEXT, -f FILE or on standard input")

// maxPromptBytes bounds a prompt read from a file or standard input.
const maxPromptBytes = 16 << 20

// readSmallFile reads a regular file of at most max bytes: a device
// (/dev/zero) or a FIFO is refused before it is opened, and a file that
// grows past max while read is cut off with an error.
func readSmallFile(path string, max int) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, max>>20)
	}
	return b, nil
}

// readPrompt takes the prompt from -p, -f (- for standard input) or
// standard input.
func readPrompt(c *config, stdin io.Reader) (string, error) {
	switch {
	case c.prompt != "":
		return c.prompt, nil
	case c.promptFile != "" && c.promptFile != "-":
		b, err := readSmallFile(c.promptFile, maxPromptBytes)
		if err != nil {
			return "", fmt.Errorf("-f: %w", err)
		}
		return strings.TrimRight(string(b), "\n"), nil
	case stdin != nil && (c.promptFile == "-" || !isTerminal(stdin)):
		b, err := io.ReadAll(io.LimitReader(stdin, maxPromptBytes+1))
		if err != nil {
			return "", fmt.Errorf("reading the prompt from standard input: %w", err)
		}
		if len(b) > maxPromptBytes {
			return "", fmt.Errorf("the prompt on standard input is larger than %d MiB", maxPromptBytes>>20)
		}
		if s := strings.TrimRight(string(b), "\n"); s != "" {
			return s, nil
		}
	}
	return "", errNoPrompt
}

func newLogger(c *config, stderr io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.logLevel)
	if err != nil || c.logLevel == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	var w io.Writer = stderr
	if c.logFormat == "console" {
		w = zerolog.ConsoleWriter{Out: stderr, NoColor: !isTerminal(stderr)}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(x any) bool {
	f, ok := x.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
