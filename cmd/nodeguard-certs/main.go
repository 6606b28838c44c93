// Command nodeguard-certs mints the certificates nodeguard needs when
// cert-manager does not: a CA and the webhook's serving certificate, and a
// second CA with the client certificate kube-apiserver presents to the
// webhook. The files go where the static-certs overlay reads them; see
// docs/install.md. All logic is in pkg/certs; this file wires flags.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/pflag"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole command; it returns the exit code: 0, 1 when minting or
// writing failed, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	opts := NewOptions()
	flags := pflag.NewFlagSet("nodeguard-certs", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintf(stderr, `nodeguard-certs: certificates for nodeguard without cert-manager.

Writes into --out-dir:
  %-24s %-24s CA the apiserver trusts the webhook by (caBundle, authorization kubeconfig)
  %-24s %-24s the webhook's serving certificate (Secret nodeguard-webhook-tls)
  %-24s %-24s CA the webhook trusts the apiserver by (--client-ca-file)
  %-24s %-24s what kube-apiserver presents to the webhook (copy to control-plane nodes)
Keys are written with mode 0600; keep the two CA keys out of the cluster.
Existing files are never replaced unless --force is given.

Usage: nodeguard-certs [flags]

Flags:
%s`, certs.WebhookCACertFile, certs.WebhookCAKeyFile,
			certs.WebhookServingCertFile, certs.WebhookServingKeyFile,
			certs.ClientCACertFile, certs.ClientCAKeyFile,
			certs.ClientCertFile, certs.ClientKeyFile, flags.FlagUsages())
	}
	opts.AddFlags(flags)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected arguments %q\n", flags.Args())
		return 2
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(stderr, "error:", err)
		}
		return 2
	}
	written, err := certs.WriteBundle(opts.Bundle())
	for _, path := range written {
		fmt.Fprintln(stdout, "wrote", path)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if errors.Is(err, fs.ErrExist) {
			fmt.Fprintln(stderr, "hint: --reuse-ca --force renews the certificates and keeps the CAs; --force alone replaces everything, CAs included")
		}
		return 1
	}
	return 0
}
