package nodeagent

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps lists the packages pkgs depend on, themselves included.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// underAny reports the first of prefixes that pkg is, or is below.
func underAny(pkg string, prefixes []string) (string, bool) {
	for _, prefix := range prefixes {
		if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
			return prefix, true
		}
	}
	return "", false
}

// TestNoWebhookImports keeps the agent independent of the webhook: it runs
// on every node and must not carry the webhook's code or dependencies.
func TestNoWebhookImports(t *testing.T) {
	var banned []string
	for _, pkg := range []string{"graph", "authz", "admission", "server", "policy"} {
		banned = append(banned, "github.com/nodeguard/nodeguard/pkg/"+pkg)
	}
	for _, dep := range goListDeps(t, "github.com/nodeguard/nodeguard/pkg/nodeagent/...") {
		if prefix, ok := underAny(dep, banned); ok {
			t.Errorf("pkg/nodeagent depends on %s (%s)", dep, prefix)
		}
	}
}

// heavyPackages are what the agent binary must not link: each costs
// resident memory on every node (code and type data paged in at start-up,
// init-time registrations) for APIs and features the agent never uses.
// Measured in docs/agent.md (Memory): dropping them took the agent at rest
// from about 30 MiB to about 21 MiB.
var heavyPackages = []struct{ prefix, why string }{
	{"k8s.io/client-go/kubernetes", "the clientset registers every API group at start-up; use pkg/nodeagent/kubeclient (core/v1 only)"},
	{"k8s.io/client-go/applyconfigurations", "server-side-apply types of every API group, and their OpenAPI schema"},
	{"k8s.io/client-go/gentype", "its fakes link k8s.io/client-go/testing"},
	{"k8s.io/client-go/testing", "test fakes and managed-fields machinery"},
	{"k8s.io/client-go/discovery", "discovery and OpenAPI documents"},
	{"k8s.io/client-go/openapi", "OpenAPI documents"},
	{"k8s.io/client-go/dynamic", "not needed: the agent knows its types"},
	{"k8s.io/client-go/informers", "shared informer factories of every API group"},
	{"k8s.io/client-go/listers", "listers of every API group"},
	{"k8s.io/apiserver", "apiserver healthz links request metrics, audit and logging; pkg/nodeagent/httpserver has its own checks"},
	{"k8s.io/apimachinery/pkg/util/managedfields", "server-side apply"},
	{"k8s.io/component-base/metrics/prometheus/restclient", "registers client-go's metrics on the legacy registry"},
}

// agentAPIGroups are the only k8s.io/api packages the agent may link:
// core/v1, and policy/v1 for the Eviction it posts when it drains its Node.
var agentAPIGroups = []string{"k8s.io/api/core/v1", "k8s.io/api/policy/v1"}

// TestAgentBinaryStaysSmall keeps heavy packages out of the agent's binary.
// Tests may use them (kubeclienttest wraps a fake clientset); the binary
// may not.
func TestAgentBinaryStaysSmall(t *testing.T) {
	prefixes := make([]string, len(heavyPackages))
	why := map[string]string{}
	for i, heavy := range heavyPackages {
		prefixes[i] = heavy.prefix
		why[heavy.prefix] = heavy.why
	}
	for _, dep := range goListDeps(t, "github.com/nodeguard/nodeguard/cmd/agent") {
		if prefix, ok := underAny(dep, prefixes); ok {
			t.Errorf("cmd/agent links %s: %s", dep, why[prefix])
		}
		if _, allowed := underAny(dep, agentAPIGroups); strings.HasPrefix(dep, "k8s.io/api/") && !allowed {
			t.Errorf("cmd/agent links %s, an API group the agent does not use (allowed: %v)", dep, agentAPIGroups)
		}
	}
}
