// Command compare measures nodeguard's graph-based authorizer against the
// in-tree Node authorizer's graph and prints a markdown table of the
// figures, each against its target (see docs/benchmarks.md).
//
//	cd hack/bench && go run ./cmd/compare [--scale 0.05] [--fail-on-miss]
//
// Progress goes to stderr, the table to stdout.
package main
