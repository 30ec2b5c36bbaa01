// Command entropix-bench measures the engine. Each measurement is a
// subcommand:
//
//	entropix-bench eval [-quick] [-task stories,name-recall,gsm8k,arith] [-budgets 1x,2x,4x,8x] [-csv|-json|-svg F]
//	entropix-bench train [-o arith.gguf] [-steps 3000] [-seed 1] [-resume]
//	entropix-bench speed [-shape stories110M] [-dtype q8_0|q4_k|f32|both] [-quick]
//	entropix-bench gguf -shape stories110M -dtype q8_0 -o /tmp/s110m-q8.gguf
//	entropix-bench backends [-a cpu] [-b ggml] [-shape llama3.2-1b] [-dtype q8_0,q4_k] [-bandwidth GBps] [-json F] [-quick]
//
// Results go to standard output as markdown, progress to standard error.
// Bad usage exits with status 2, a failed measurement with 1.
//
// A subcommand lives in its own file and registers itself from an init
// function with register.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	_ "github.com/entropix-search/entropix-search/model/cpu" // the CPU backend, model.NewBackend("cpu", ...)
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// subcommand is one measurement. run parses its own flags from args.
type subcommand struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var subcommands = map[string]subcommand{}

// register adds a subcommand; it is called from init functions.
func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	if _, dup := subcommands[name]; dup {
		panic("entropix-bench: subcommand " + name + " registered twice")
	}
	subcommands[name] = subcommand{summary: summary, run: run}
}

// errUsage marks bad usage; the message has already been printed when it
// comes from a FlagSet.
var errUsage = errors.New("usage")

// usagef reports bad usage with a message.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// newFlagSet returns a FlagSet for a subcommand that reports errors
// instead of exiting.
func newFlagSet(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("entropix-bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: entropix-bench %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping -h to flag.ErrHelp and other errors to
// errUsage; positional arguments are refused.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func main() {
	// Interrupt, terminate and hang-up all stop a measurement the same
	// way: what is done is kept (train writes its checkpoint).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: entropix-bench <subcommand> [flags]\n\nsubcommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'entropix-bench <subcommand> -h' for its flags.")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "entropix-bench: unknown subcommand %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	err := sc.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": "); msg != errUsage.Error() {
			fmt.Fprintf(stderr, "entropix-bench %s: %s\n", args[0], msg)
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "entropix-bench %s: %v\n", args[0], err)
		return exitFailure
	}
}
