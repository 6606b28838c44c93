// Package lifecycle holds end-to-end tests of what kube-controller-manager
// does to the Nodes of real kubelets (test/e2e/framework with
// Options.ControllerManager): the node lifecycle controller marks the Node
// of a stopped kubelet Unknown, and Ready again once it is back. The tests
// are in package lifecycle_test; this package has no code of its own.
package lifecycle
