// Package docs checks the repository's documentation against the tree: a
// file or directory that README.md or docs/*.md names (in backticks, as
// `pkg/nodeagent/reconciler/phase.go` or `phase.go`, or as a relative link)
// must exist, so that a reference cannot go on naming code that is gone.
package docs
