// Package loadtest puts nodeguard's /authorize endpoint under HTTPS load on
// loopback, next to a floor: a bare handler behind the same TLS setup that
// answers every review with a fixed SubjectAccessReview, so the difference
// between the two is what nodeguard itself costs per request.
//
// The package holds the servers and the load generator; the tests hold the
// runs. `go test ./test/loadtest` runs only a short smoke test that checks
// every answer and nothing about timing; the load itself is a benchmark:
//
//	go test -run '^$' -bench Authorize ./test/loadtest
//
// which prints a markdown table of throughput and latency against the
// targets in docs/benchmarks.md.
package loadtest
