// Package server is the HTTPS side of nodeguard's webhook endpoints: TLS
// with serving certificates and a client CA reloaded from disk, the review
// endpoints, in-flight limits that queue and then shed review
// requests with answers the apiserver understands, health endpoints, HTTP
// and decision metrics, the decision log and graceful shutdown.
//
// Each review endpoint is one handler read top to bottom (validate.go for
// /validate, authorize.go for /authorize): it reads the request (review.go:
// method, content type, body cap, ?timeout= as the deadline), decodes the
// AdmissionReview or SubjectAccessReview strictly, and its objects once
// (admission.DecodeRequest), decides with the built-in rules
// (admission.Admitter.Admit, authz.Authorizer.Authorize) and then with the
// Rego policies (policy.AdmissionPolicies, policy.AuthzPolicies) where the
// rules leave them a say, recovering a panic and honouring the deadline,
// counts and logs the decision, and writes the answer under the request's
// UID, over HTTP 200 whenever a review can be sent.
package server
