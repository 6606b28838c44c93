package controller

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTalksToTheAPIServerOnly keeps the webhook's packages out of the
// controller: it acts through the apiserver, where admission judges its
// writes like anyone's, never by calling the rules itself.
func TestTalksToTheAPIServerOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nodeguard/nodeguard/pkg/rollout/controller").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"admission", "authz", "policy", "server", "graph"} {
			prefix := "github.com/nodeguard/nodeguard/pkg/" + banned
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("pkg/rollout/controller depends on %s", dep)
			}
		}
	}
}
