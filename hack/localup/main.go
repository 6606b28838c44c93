package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// exitInterrupted is the shell's convention for a program ended by SIGINT.
const exitInterrupted = 130

func main() {
	opts := defaultOptions()
	fs := pflag.NewFlagSet("localup", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, `localup (make run): a local control plane with nodeguard in it, three
simulated nodes, and a short demonstration; then a running cluster until Ctrl-C.

Usage: go run ./hack/localup [flags]    (or: make run ARGS='[flags]')

Flags:
%s`, fs.FlagUsages())
	}
	opts.addFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(2)
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// A second Ctrl-C ends the program at once; the children die with
		// it (they are started with a parent-death signal).
		stop()
	}()
	err := run(ctx, opts, os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "localup: interrupted; everything it started is stopped and removed")
		os.Exit(exitInterrupted)
	default:
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}
