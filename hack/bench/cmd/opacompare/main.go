// Command opacompare loads nodeguard's /authorize and /validate with the
// shipped policies beside a stock OPA server evaluating the same policies
// (see package opacompare), and prints a markdown table against the
// issue's target.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeguard/nodeguard/hack/bench/opacompare"
	"github.com/nodeguard/nodeguard/test/loadtest"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// errMissed is returned when --fail-on-miss is set and a target was missed.
var errMissed = errors.New("at least one target was missed")

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, errMissed):
		fmt.Fprintln(os.Stderr, "opacompare:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "opacompare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	serve := len(args) > 0 && args[0] == serveCommand
	if serve {
		args = args[1:]
	}
	cfg := opacompare.DefaultConfig()
	fs := pflag.NewFlagSet("opacompare", pflag.ContinueOnError)
	fs.IntVar(&cfg.Shape.Nodes, "nodes", cfg.Shape.Nodes, "Nodes in the generated cluster (each with --pods-per-node pods).")
	fs.IntVar(&cfg.Shape.PodsPerNode, "pods-per-node", cfg.Shape.PodsPerNode, "Pods per node, each referencing two ConfigMaps.")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "Requests in flight.")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "Rounds per measurement, alternating the two servers.")
	fs.DurationVar(&cfg.RoundDuration, "round-duration", cfg.RoundDuration, "About how long the faster server's round lasts.")
	fs.StringVar(&cfg.CacheDir, "cache-dir", cfg.CacheDir, "Where the opa binary is built and kept (<dir>/opa/<version>/opa).")
	http1Only := fs.Bool("http1-only", false, "Load over HTTP/1.1 only (default: h2, then HTTP/1.1).")
	failOnMiss := fs.Bool("fail-on-miss", false, "Exit with status 2 when a target is missed.")
	workDir := fs.String("work-dir", "", "Internal: the directory the nodeguard process ("+serveCommand+") writes its certificate into.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *http1Only {
		cfg.Protocols = []loadtest.Protocol{loadtest.HTTP1}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if serve {
		// nodeguard's side, started by the run below in a process of its
		// own; it prints its endpoints and serves until interrupted.
		return opacompare.Serve(ctx, cfg.Shape, *workDir, os.Stdout)
	}
	cfg.Progress = os.Stderr
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program: %w", err)
	}
	// nodeguard's process collects garbage as the shipped Deployment
	// makes the webhook collect it; the stock server keeps its own
	// defaults.
	if cfg.NodeguardGC, err = manifests.WebhookGCSettings(); err != nil {
		return err
	}
	spawn := func(ctx context.Context, dir string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, self, serveCommand,
			"--nodes", strconv.Itoa(cfg.Shape.Nodes), "--pods-per-node", strconv.Itoa(cfg.Shape.PodsPerNode),
			"--work-dir", dir)
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
			return strings.HasPrefix(e, "GOGC=") || strings.HasPrefix(e, "GOMEMLIMIT=")
		}), cfg.NodeguardGC...)
		return cmd, nil
	}
	rep, err := opacompare.Run(ctx, cfg, spawn)
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

// serveCommand runs nodeguard's servers instead of the comparison.
const serveCommand = "serve"
