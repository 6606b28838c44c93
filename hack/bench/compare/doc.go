// Package compare measures nodeguard's graph and authorizer side by side
// with the in-tree Node authorizer's graph (k8s.io/kubernetes
// plugin/pkg/auth/authorizer/node), in one process and one run, on the same
// generated objects and requests.
//
// Absolute times drift on shared machines, so every target is a ratio
// between the two contenders measured moments apart; each measurement is
// repeated in alternating rounds and the median (or, for microbenchmarks,
// the fastest round) is kept.
//
// The package lives in its own module (hack/bench) so that nodeguard's
// go.mod never depends on k8s.io/kubernetes.
package compare
