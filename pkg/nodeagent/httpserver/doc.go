// Package httpserver is the agent's small HTTP server: /healthz (liveness),
// /readyz (liveness and readiness) with per-check subpaths in the format
// k8s.io/apiserver uses, and /metrics. It is plain HTTP and binds to
// loopback by default: it serves nothing secret, and a node agent should not
// open a port to the network unasked.
//
// The health handlers are written here rather than taken from
// k8s.io/apiserver/pkg/server/healthz, which links the apiserver's request
// metrics, audit and logging packages into the agent for a dozen lines of
// behaviour. Unlike the apiserver, a failing check's reason is shown: on a
// node agent it names a file or a duration, nothing secret, and it is what
// an operator needs (for example, which credential file TLS bootstrap has
// not produced yet).
package httpserver
