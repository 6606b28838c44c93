package nodeagent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoWebhookImports keeps the agent independent of the webhook: it runs
// on every node and must not carry the webhook's code or dependencies.
func TestNoWebhookImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nodeguard/nodeguard/pkg/nodeagent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"graph", "authz", "admission", "server", "policy"} {
			if dep == "github.com/nodeguard/nodeguard/pkg/"+banned || strings.HasPrefix(dep, "github.com/nodeguard/nodeguard/pkg/"+banned+"/") {
				t.Errorf("pkg/nodeagent depends on %s", dep)
			}
		}
	}
}
