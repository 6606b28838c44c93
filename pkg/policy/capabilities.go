package policy

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/open-policy-agent/opa/v1/ast"
)

//go:generate go run ./internal/gencapabilities ../../policies/capabilities.json

// WriteCapabilities writes Capabilities as the JSON `opa test --capabilities`
// and `opa check --capabilities` read, so that the stock OPA CLI knows
// nodeguard's built-ins (tests must still mock them with `with`). Built-ins
// are written in their minimal form, without descriptions, as OPA's own
// capabilities files are.
func WriteCapabilities(w io.Writer) error {
	caps := Capabilities()
	minimal := make([]*ast.Builtin, len(caps.Builtins))
	for i, b := range caps.Builtins {
		minimal[i] = b.Minimal()
	}
	caps.Builtins = minimal
	data, err := json.MarshalIndent(caps, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding capabilities: %w", err)
	}
	if _, err := w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing capabilities: %w", err)
	}
	return nil
}
