// Command entropix-search continues a prompt with a language model, choosing
// tokens by entropy-guided tree search.
//
//	entropix-search -m stories260K.bin -z tok512.bin -p "Once upon a time" -n 64 --greedy
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
)

var version = "0.1.0-dev"

// exitUsage is the exit code for bad input (flags, files).
const exitUsage = 2

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	model, tokenizer, prompt string
	maxTokens                int
	greedy, version          bool
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("entropix-search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	str := func(p *string, short, long, usage string) {
		fs.StringVar(p, short, "", usage)
		fs.StringVar(p, long, "", usage+" (same as -"+short+")")
	}
	str(&c.model, "m", "model", "model file: GGUF or llama2.c checkpoint")
	str(&c.tokenizer, "z", "tokenizer", "llama2.c tokenizer.bin (for .bin checkpoints)")
	str(&c.prompt, "p", "prompt", "prompt text")
	fs.IntVar(&c.maxTokens, "n", 256, "maximum new tokens")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "maximum new tokens (same as -n)")
	fs.BoolVar(&c.greedy, "greedy", false, "greedy decoding (argmax at every step)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.maxTokens <= 0 {
		return nil, fmt.Errorf("-n %d: the number of new tokens must be positive", c.maxTokens)
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), "flag provided but not defined") {
			fmt.Fprintln(stderr, "entropix-search:", err)
		}
		return exitUsage
	}
	if c.version {
		fmt.Fprintln(stdout, "entropix-search", version)
		return 0
	}
	if c.model == "" {
		fmt.Fprintln(stderr, "entropix-search: no model: give one with -m FILE (GGUF or llama2.c .bin)")
		return exitUsage
	}
	m, err := model.Load(c.model, c.tokenizer)
	if err != nil {
		fmt.Fprintln(stderr, "entropix-search:", err)
		return exitUsage
	}
	defer m.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	eng, err := engine.New(m, engine.WithMode(engine.Greedy), engine.WithStream(func(s string) { fmt.Fprint(stdout, s) }))
	if err != nil {
		fmt.Fprintln(stderr, "entropix-search:", err)
		return 1
	}
	fmt.Fprint(stdout, c.prompt)
	_, err = eng.Search(ctx, c.prompt, engine.Budget{MaxTokens: c.maxTokens})
	fmt.Fprintln(stdout)
	switch {
	case errors.Is(err, context.Canceled):
		return 130
	case errors.Is(err, engine.ErrEmptyPrompt):
		fmt.Fprintln(stderr, "entropix-search: empty prompt: give one with -p TEXT")
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "entropix-search:", err)
		return 1
	}
	return 0
}
