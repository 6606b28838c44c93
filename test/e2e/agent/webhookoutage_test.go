package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// TestWebhookOutage: with every webhook replica down, the node keeps
// running what it has and reports it, an agent restarted meanwhile comes up
// from its checkpoints (it can no longer read its ConfigMap: authorization
// falls back to Node and RBAC, which know nothing of assignments), the
// writes nodeguard judges are refused naming it, and nothing is lost once
// the webhook is back.
func TestWebhookOutage(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	b := n.configMap("kubelet-b", "maxPods: 43\n")
	n.assign("kubelet-a")
	n.passed(a)
	restartsBefore := len(n.restarts())

	env.StopWebhook()
	stopped := time.Now()
	t.Cleanup(func() {
		// An error only says it runs already.
		_ = env.StartWebhook(context.Background())
	})

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, n.ns+"/kubelet-b")
	_, err := env.Admin.CoreV1().Nodes().Patch(n.ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	refusedNamingNodeguard(t, "an assignment", err)
	edit := fmt.Appendf(nil, `{"data":{%q:%q}}`, contract.ConfigMapKey, "maxPods: 44\n")
	_, err = env.Admin.CoreV1().ConfigMaps(n.ns).Patch(n.ctx, a.Name, types.MergePatchType, edit, metav1.PatchOptions{})
	refusedNamingNodeguard(t, "an edit of the active ConfigMap", err)

	// No Allow can be cached after the webhook stopped, and each expires
	// authorizedTTL after it was: from then on the node cannot read its
	// ConfigMap in any way. (The apiserver reports the unreachable webhook
	// along with Node's and RBAC's refusal: a 500 rather than a 403.)
	ttl := authorizedTTL(t)
	n.stopAgent()
	if wait := time.Until(stopped.Add(ttl + time.Second)); wait > 0 {
		t.Logf("waiting %v for the apiserver's cached Allows (authorizedTTL %v) to expire", wait.Round(time.Millisecond), ttl)
		time.Sleep(wait)
	}
	n.startAgent()
	n.eventually("the restarted agent to be refused its ConfigMap", func() (bool, string) {
		log := n.AgentLogTail(400)
		return strings.Contains(log, "is forbidden") || strings.Contains(log, "/authorize"), "no refusal in the agent's log yet"
	})
	n.eventually("the restarted agent to report A active from its checkpoints", func() (bool, string) {
		_, body, err := n.AgentGet("/metrics")
		want := fmt.Sprintf(`nodeguard_agent_active_config_info{name="kubelet-a",namespace=%q,resource_version=%q,source="configmap",uid=%q} 1`, n.ns, a.ResourceVersion, a.UID)
		return err == nil && strings.Contains(body, want), fmt.Sprint(err)
	})
	if code, body, err := n.AgentGet("/healthz"); err != nil || code != 200 {
		t.Fatalf("agent /healthz during the outage: %d %s %v", code, body, err)
	}
	if r := n.observe(); !is(r.Status.Active, a) || !is(r.Status.LastKnownGood, a) {
		t.Fatalf("the Node's status during the outage: active %v, last-known-good %v; want A for both", r.Status.Active, r.Status.LastKnownGood)
	}
	if got := len(n.restarts()); got != restartsBefore {
		t.Fatalf("the kubelet was restarted during the outage: %v", n.restarts())
	}
	n.waitKubeletRuns(42)

	if err := env.StartWebhook(n.ctx); err != nil {
		t.Fatal(err)
	}
	// Back: the refused assignment goes through and is carried out.
	n.assign("kubelet-b")
	n.passed(b)
	n.waitKubeletRuns(43)
}

// authorizedTTL is how long the shipped authorization configuration lets
// the apiserver cache nodeguard's Allow answers.
func authorizedTTL(t *testing.T) time.Duration {
	t.Helper()
	config, err := controlplane.LoadAuthorizationConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range config.Authorizers {
		if a.Name == controlplane.WebhookAuthorizerName && a.Webhook != nil {
			return a.Webhook.AuthorizedTTL.Duration
		}
	}
	t.Fatalf("%s has no authorizer %s", controlplane.AuthorizationConfigManifest, controlplane.WebhookAuthorizerName)
	return 0
}

func refusedNamingNodeguard(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s went through with the webhook down", what)
	}
	if !strings.Contains(err.Error(), "nodeguard") {
		t.Fatalf("%s was refused without naming nodeguard: %v", what, err)
	}
	t.Logf("%s with the webhook down: %v", what, err)
}
