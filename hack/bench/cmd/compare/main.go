package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/pflag"

	"github.com/nodeguard/nodeguard/hack/bench/compare"
)

// errMissed is returned when --fail-on-miss is set and a target was missed.
var errMissed = errors.New("at least one target was missed")

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, errMissed):
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := compare.DefaultConfig()
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.Float64Var(&cfg.Scale, "scale", cfg.Scale, "Multiply every cluster's node count (1 = the documented sizes; 0.05 for a quick check).")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "Repeat each measurement this many times, alternating the two graphs.")
	fs.DurationVar(&cfg.ContentionDuration, "contention-duration", cfg.ContentionDuration, "How long the writer writes for each reader count and graph.")
	fs.IntSliceVar(&cfg.Readers, "readers", cfg.Readers, "Reader goroutine counts for the write-latency test.")
	fs.IntVar(&cfg.ReaderYieldEvery, "reader-yield-every", cfg.ReaderYieldEvery, "Each reader yields the CPU after this many decisions, as request handlers do between requests; 0 never yields (see docs/benchmarks.md for why that measures the Go scheduler instead).")
	failOnMiss := fs.Bool("fail-on-miss", false, "Exit with status 2 when a target is missed.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := compare.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if *failOnMiss && !rep.AllPass() {
		return errMissed
	}
	return nil
}
