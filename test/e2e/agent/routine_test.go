package agent_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// nodeReviews is how many Node writes the webhook has judged.
func nodeReviews(t *testing.T) float64 {
	t.Helper()
	v, err := env.WebhookMetricSum("nodeguard_admission_decisions_total{", `resource="nodes"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRoutineKubeletWritesSkipTheWebhook: with the shipped manifests (and
// NodeRestriction), a real kubelet's routine writes of its Node status, and
// the agent's reports, never reach the nodes webhook; an assignment, a
// node relabelling itself and a new reported kubelet version do. Counted
// from the webhook's own metrics.
func TestRoutineKubeletWritesSkipTheWebhook(t *testing.T) {
	// Status reports every second instead of every five minutes: many
	// routine writes in a short test.
	n := newNode(t, nodeOptions{localConfig: "nodeStatusReportFrequency: 1s\nnodeStatusUpdateFrequency: 1s\n"})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.waitNodeReady()

	before := nodeReviews(t)
	node, err := env.Admin.CoreV1().Nodes().Get(n.ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heartbeat := func(node *corev1.Node) time.Time {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	first := heartbeat(node)
	writes := 0
	n.eventually("five status writes of the kubelet", func() (bool, string) {
		node, err := env.Admin.CoreV1().Nodes().Get(n.ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if hb := heartbeat(node); hb.After(first) {
			writes++
			first = hb
		}
		time.Sleep(200 * time.Millisecond)
		return writes >= 5, fmt.Sprintf("%d status writes", writes)
	})
	if got := nodeReviews(t) - before; got != 0 {
		t.Fatalf("%v of the kubelet's routine Node writes reached the webhook", got)
	}

	// What the webhook judges still reaches it.
	nodeClient, err := env.NodeClient(n.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, write := range []struct {
		what string
		do   func() error
	}{
		{"an assignment", func() error {
			n.configMap("kubelet-a", "maxPods: 42\n")
			n.assign("kubelet-a")
			return nil
		}},
		{"the node relabelling itself", func() error {
			_, err := nodeClient.CoreV1().Nodes().Patch(n.ctx, n.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"orange"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"a new reported kubelet version", func() error {
			_, err := nodeClient.CoreV1().Nodes().Patch(n.ctx, n.Name, types.MergePatchType, []byte(`{"status":{"nodeInfo":{"kubeletVersion":"v1.37.1"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
	} {
		before := nodeReviews(t)
		if err := write.do(); err != nil {
			t.Fatalf("%s: %v", write.what, err)
		}
		if got := nodeReviews(t) - before; got < 1 {
			t.Errorf("%s did not reach the webhook", write.what)
		}
	}
}
