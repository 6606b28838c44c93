package effective

import (
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/internal/gencheck"
)

// TestFlagTableIsCurrent fails when flags_generated.go differs from what
// flaggen writes for the k8s.io/kubernetes release pinned in hack/tools/kube,
// so a kubelet flag added or renamed upstream cannot land without the table.
func TestFlagTableIsCurrent(t *testing.T) {
	gencheck.Current(t, "flags_generated.go", filepath.Join("..", "..", "..", "hack", "tools", "kube"), "flaggen",
		"go generate ./pkg/kubeletconfig/effective")
}
