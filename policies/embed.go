package policies

import (
	"embed"
	"io/fs"
)

// The pattern takes the *_test.rego files too: go:embed cannot exclude them,
// and pkg/policy skips them when it loads a set, as it does for a directory.
//
//go:embed *.rego
var shipped embed.FS

// FS returns the shipped policy files. It is read-only and safe for
// concurrent use.
func FS() fs.FS { return shipped }
