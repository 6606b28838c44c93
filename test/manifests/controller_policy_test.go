package manifests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The ValidatingAdmissionPolicy that confines the rollout controller's token,
// as manifests/base names it.
const rolloutControllerPolicy = "nodeguard-rollout-controller-nodes"

// TestRolloutControllerTokenIsConfined applies manifests/base to a real
// kube-apiserver and, with a token of the rollout controller's
// ServiceAccount (TokenRequest, as the e2e framework and a pod get one),
// tries every write to a Node that its RBAC (patch nodes) lets through: the
// shipped ValidatingAdmissionPolicy must allow the annotations it writes
// (the assignment, its bookkeeping, the trial mark, the drain mode) and
// refuse everything else, the agent's nodeguard.dev/ annotations included. Every expression runs on each
// allowed write, so one the apiserver cannot evaluate (failurePolicy Fail)
// fails the allowed cases. (The policy's status.typeChecking is written by
// kube-controller-manager, which this control plane does not run.) The ValidatingWebhookConfiguration
// is left out: no webhook runs here, and this is about the policy alone.
func TestRolloutControllerTokenIsConfined(t *testing.T) {
	cp, admin := startWithoutWebhooks(t, render(t, base))
	ctx := t.Context()

	controller, err := kubernetes.NewForConfig(tokenConfig(t, cp, admin, rolloutControllerName))
	if err != nil {
		t.Fatal(err)
	}

	const nodeName = "node-a"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName,
		Labels: map[string]string{"nodeguard.dev/pool": "blue", "kubernetes.io/hostname": nodeName},
		Annotations: map[string]string{"example.com/owner": "team-a", "nodeguard.dev/config-source": "kubelet-configs/pool-blue-v1",
			"nodeguard.dev/cordoned": "true"}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(c kubernetes.Interface, body map[string]any, subresources ...string) error {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, data, metav1.PatchOptions{}, subresources...)
		return err
	}
	annotations := func(kv map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": kv}}
	}

	// The apiserver picks a new policy up within a second or so: until the
	// controller's first forbidden write is refused, the policy is not in
	// force yet, and that write is undone.
	waitErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := patch(controller, map[string]any{"metadata": map[string]any{"labels": map[string]any{"probe": "x"}}})
		if err == nil {
			return false, patch(admin, map[string]any{"metadata": map[string]any{"labels": map[string]any{"probe": nil}}})
		}
		return isPolicyRefusal(err), nil
	})
	if waitErr != nil {
		t.Fatalf("the policy never refused the controller a label: %v", waitErr)
	}

	for _, tc := range []struct {
		name    string
		body    map[string]any
		refused string // in the refusal; empty: allowed
	}{
		{name: "assign (a nodeguard.dev/ annotation)", body: annotations(map[string]any{"nodeguard.dev/config-source": "kubelet-configs/pool-blue-v2",
			"nodeguard.dev/rollout": "pool-blue", "nodeguard.dev/previous-config-source": "kubelet-configs/pool-blue-v1"})},
		{name: "the drain mode with the assignment", body: annotations(map[string]any{"nodeguard.dev/config-source": "kubelet-configs/pool-blue-v3",
			"nodeguard.dev/rollout": "pool-blue", "nodeguard.dev/previous-config-source": "kubelet-configs/pool-blue-v2", "nodeguard.dev/trial-passed": nil,
			"nodeguard.dev/drain": "Never"})},
		{name: "the trial mark", body: annotations(map[string]any{"nodeguard.dev/trial-passed": "kubelet-configs/pool-blue-v3@30"})},
		{name: "remove its bookkeeping", body: annotations(map[string]any{"nodeguard.dev/rollout": nil, "nodeguard.dev/previous-config-source": nil,
			"nodeguard.dev/trial-passed": nil, "nodeguard.dev/drain": nil})},
		// The agent's own words: its status decides how rollouts judge the
		// Node, its cordon mark which cordon it lifts.
		{name: "the agent's status", body: annotations(map[string]any{"nodeguard.dev/config-status": `{"assigned":null,"active":null,"lastKnownGood":null,"error":""}`}),
			refused: "not other annotations"},
		{name: "the agent's cordon mark", body: annotations(map[string]any{"nodeguard.dev/cordoned": "forged"}), refused: "not other annotations"},
		{name: "remove the agent's cordon mark", body: annotations(map[string]any{"nodeguard.dev/cordoned": nil}), refused: "not other annotations"},
		{name: "a foreign annotation", body: annotations(map[string]any{"example.com/owner": "mallory"}), refused: "not other annotations"},
		{name: "add a foreign annotation", body: annotations(map[string]any{"example.com/new": "x"}), refused: "not other annotations"},
		{name: "remove a foreign annotation", body: annotations(map[string]any{"example.com/owner": nil}), refused: "not other annotations"},
		{name: "a node-restriction label", body: map[string]any{"metadata": map[string]any{"labels": map[string]any{"node-restriction.kubernetes.io/pool": "gpu"}}}, refused: "not labels"},
		{name: "move the Node to another pool", body: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nodeguard.dev/pool": "gpu"}}}, refused: "not labels"},
		{name: "a NoExecute taint", body: map[string]any{"spec": map[string]any{"taints": []any{map[string]any{"key": "evil", "effect": "NoExecute"}}}}, refused: "not the spec"},
		{name: "cordon (spec.unschedulable)", body: map[string]any{"spec": map[string]any{"unschedulable": true}}, refused: "not the spec"},
		{name: "an ownerReference to nothing", body: map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "Pod", "name": "gone", "uid": "00000000-0000-0000-0000-000000000000"}}}}, refused: "not ownerReferences"},
		{name: "a finalizer", body: map[string]any{"metadata": map[string]any{"finalizers": []any{"example.com/hold"}}}, refused: "not finalizers"},
		{name: "an annotation beside a label", body: map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{"nodeguard.dev/rollout": "pool-blue"}, "labels": map[string]any{"kubernetes.io/hostname": "other"}}}, refused: "not labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			refusal := patch(controller, tc.body)
			if tc.refused == "" {
				if refusal != nil {
					t.Fatalf("refused: %v", refusal)
				}
				return
			}
			if !isPolicyRefusal(refusal) || !apierrors.IsForbidden(refusal) || !strings.Contains(refusal.Error(), tc.refused) {
				t.Fatalf("got %v, want a refusal by %s mentioning %q", refusal, rolloutControllerPolicy, tc.refused)
			}
			t.Logf("refused: %v", refusal)
			after, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the Node changed anyway (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}

	// nodes/status: RBAC already refuses the controller (it may patch
	// nodes only), so the policy is a second line there; a status write it
	// could make is refused either way.
	t.Run("status", func(t *testing.T) {
		err := patch(controller, map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}}, "status")
		if !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want Forbidden", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := controller.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want Forbidden", err)
		}
	})
	// Anyone else is left to RBAC: the administrator labels and taints.
	t.Run("the administrator is not judged", func(t *testing.T) {
		if err := patch(admin, map[string]any{"metadata": map[string]any{"labels": map[string]any{"nodeguard.dev/pool": "green"}},
			"spec": map[string]any{"unschedulable": true}}); err != nil {
			t.Fatal(err)
		}
	})
}

// isPolicyRefusal reports whether err is a refusal by the shipped policy
// (its binding names it in the message).
func isPolicyRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+rolloutControllerPolicy+"'")
}
