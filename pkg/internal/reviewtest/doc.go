// Package reviewtest holds the fixtures the review tests of pkg/admission,
// pkg/authz and pkg/server share: the ConfigMaps, Nodes, identities and
// admission requests the admitter is tested with, and the graph and
// SubjectAccessReview specs the authorizer is tested with, so that
// pkg/server runs the same decisions through its reviews.
//
// It imports none of those packages, so that their internal tests can use
// it. It is for tests only.
package reviewtest
