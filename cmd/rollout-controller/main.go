// Command rollout-controller runs the KubeletConfigRollout controller: it
// rolls eligible kubelet ConfigMaps out across pools of Nodes, a few at a
// time, by writing their nodeguard.dev/config-source annotation, and stops
// on the first failure. All logic is in pkg/rollout; this file only wires
// flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/rollout/app"
)

func main() {
	opts := NewOptions()
	fs := pflag.NewFlagSet("rollout-controller", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, `nodeguard rollout-controller: pool rollouts of kubelet configurations.

It watches KubeletConfigRollouts (nodeguard.dev/v1alpha1), the Nodes their
selectors pick and the eligible ConfigMaps they name. For each rollout it
assigns the ConfigMap to a canary Node first, then to the rest within
maxUnavailable, through the nodeguard.dev/config-source annotation; the node
agents apply and try it and report back. The first failure stops the rollout
and, with onFailure Revert, re-points the Nodes it moved. Several replicas may
run: one leads through a Lease, the others wait. See docs/rollouts.md.

Usage: rollout-controller [flags]

Flags:
%s`, fs.FlagUsages())
	}
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("rollout-controller"))
	cfg, err := opts.Config()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if err := app.Run(ctx, cfg); err != nil {
		klog.FromContext(ctx).Error(err, "Rollout controller failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
