// Package server is the HTTPS plumbing shared by nodeguard's webhook
// endpoints: TLS with serving certificates and a client CA reloaded from
// disk, the review transport (method, content type, body cap, ?timeout=,
// panic recovery), in-flight limits that queue and then shed review
// requests with answers the apiserver understands, health endpoints, HTTP
// metrics and graceful shutdown.
//
// It knows nothing about what the reviews mean: pkg/authz and
// pkg/admission decide, and hand this package a function from request body
// to response.
package server
