package kubeletconfig

import (
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/internal/gencheck"
)

// TestFeatureGateTableIsCurrent fails when featuregates_generated.go differs
// from what the generator writes for the k8s.io/kubernetes release pinned in
// hack/tools/kube, so a bump of that release cannot land without the data.
func TestFeatureGateTableIsCurrent(t *testing.T) {
	gencheck.Current(t, "featuregates_generated.go", filepath.Join("..", "..", "hack", "tools", "kube"), "featuregen",
		"go generate ./pkg/kubeletconfig")
}
