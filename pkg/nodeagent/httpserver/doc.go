// Package httpserver is the agent's small HTTP server: /healthz (with
// per-check subpaths, as k8s.io/apiserver serves them) and /metrics. It is
// plain HTTP and binds to loopback by default: it serves nothing secret, and
// a node agent should not open a port to the network unasked.
package httpserver
