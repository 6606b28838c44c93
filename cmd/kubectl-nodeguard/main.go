// Command kubectl-nodeguard is nodeguard's kubectl plugin: on the PATH, it
// runs as `kubectl nodeguard`. All logic, flags included, is in pkg/cli;
// this file only connects it to the process. See docs/kubectl-plugin.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nodeguard/nodeguard/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
