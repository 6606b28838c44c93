// Command gencapabilities writes policies/capabilities.json: the OPA
// capabilities nodeguard's policies compile against, for the stock OPA CLI.
// Run it through `go generate ./pkg/policy`.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/google/renameio/v2"

	"github.com/nodeguard/nodeguard/pkg/policy"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gencapabilities:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: gencapabilities OUTPUT.json")
	}
	var buf bytes.Buffer
	if err := policy.WriteCapabilities(&buf); err != nil {
		return err
	}
	if err := renameio.WriteFile(args[0], buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", args[0], err)
	}
	return nil
}
