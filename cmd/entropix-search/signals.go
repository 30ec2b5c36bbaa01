package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interrupt is why a run was stopped early: a signal (SIGINT, SIGTERM,
// SIGHUP) or standard output closed under it (SIGPIPE). The run writes its
// partial results and exits with 128 + the signal's number, as a shell
// reports a process the signal killed.
type interrupt struct{ sig syscall.Signal }

func (i interrupt) Error() string {
	if i.sig == syscall.SIGPIPE {
		return "standard output was closed"
	}
	return fmt.Sprintf("interrupted (%s)", signalName(i.sig))
}

func (i interrupt) exitCode() int { return 128 + int(i.sig) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return s.String()
}

// hardStop is done after a second signal: whatever still runs (Graphviz
// rendering a big tree) stops at once.
var hardStop = context.Background()

// watchSignals returns a context canceled, with an interrupt as its cause,
// by the first SIGINT, SIGTERM or SIGHUP. A second one cancels hardStop
// and, if the run has not ended within a second, exits at once. SIGPIPE is
// ignored, so that writing to a closed pipe fails with EPIPE instead of
// killing the process before it can write its files.
func watchSignals() context.Context {
	signal.Ignore(syscall.SIGPIPE)
	soft, cancelSoft := context.WithCancelCause(context.Background())
	hard, cancelHard := context.WithCancelCause(context.Background())
	hardStop = hard
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := true
		for s := range ch {
			in := interrupt{s.(syscall.Signal)}
			if first {
				first = false
				cancelSoft(in)
				continue
			}
			cancelHard(in)
			time.AfterFunc(time.Second, func() {
				fmt.Fprintln(os.Stderr, "entropix-search:", in, "again: stopped at once")
				os.Exit(in.exitCode())
			})
		}
	}()
	return soft
}
