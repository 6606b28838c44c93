// Command countproxy is the scale harness's counting proxy, in a process of
// its own: it stands between the rollout controller and the apiserver,
// counts the controller's requests, and times its Node watch events and
// its assignments on the wire (see test/scale). The harness starts it,
// reads the addresses it prints as one line of JSON on its standard
// output, and drives it over the control endpoint named there.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodeguard/nodeguard/test/scale"
)

func main() {
	fs := flag.NewFlagSet("countproxy", flag.ExitOnError)
	upstream := fs.String("upstream-kubeconfig", "", "Kubeconfig of the apiserver to forward to, with the credentials to send on every request (the rollout controller's ServiceAccount token). Required.")
	_ = fs.Parse(os.Args[1:])
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "countproxy: --upstream-kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := scale.ServeCountingProxy(ctx, *upstream, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "countproxy:", err)
		os.Exit(1)
	}
}
