// Package server is the HTTPS side of nodeguard's webhook endpoints: TLS
// with serving certificates and a client CA reloaded from disk, the review
// transport (review.go: method, content type, body cap, ?timeout=), the
// reviews themselves, in-flight limits that queue and then shed review
// requests with answers the apiserver understands, health endpoints, HTTP
// and decision metrics, the decision log and graceful shutdown.
//
// A review request goes: ReviewHandler (review.go) reads the HTTP request,
// then the endpoint's review (validate.go for /validate, authorize.go for
// /authorize, both run by the one generic review in review.go) decodes the
// AdmissionReview or SubjectAccessReview strictly, decides it with the
// built-in rules (admission.Admitter.Admit, authz.Authorizer.Authorize),
// recovering a panic and honouring the deadline, then with the Rego
// policies (policy.AdmissionPolicies, policy.AuthzPolicies) where the
// built-in rules leave them a say, counts and logs the decision, and
// encodes the answer under the request's UID.
package server
