package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const (
	configNamespace = "kubelet-configs"
	goodConfig      = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	newGateConfig   = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
)

type harness struct {
	t     *testing.T
	ctx   context.Context
	env   *framework.Env
	admin kubernetes.Interface
	pfx   string
}

func newHarness(t *testing.T, e *framework.Env) *harness {
	h := &harness{t: t, ctx: t.Context(), env: e, admin: e.Admin, pfx: fmt.Sprintf("t%d-", time.Now().UnixNano()%1e8)}
	_, err := h.admin.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return h
}

func (h *harness) nodeClient(name string) kubernetes.Interface {
	h.t.Helper()
	c, err := h.env.NodeClient(name)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// register creates a Node with the node's own credentials, as a kubelet
// registers, and returns the error.
func (h *harness) register(name, kubeletVersion string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.NodeInfo.KubeletVersion = kubeletVersion
	_, err := h.nodeClient(name).CoreV1().Nodes().Create(h.ctx, n, metav1.CreateOptions{})
	if err == nil {
		h.t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	return err
}

func (h *harness) mustRegister(name string) string {
	h.t.Helper()
	name = h.pfx + name
	if err := h.register(name, "v1.37.2"); err != nil {
		h.t.Fatalf("registering %s: %v", name, err)
	}
	// Node creation drops status; the kubelet then reports it.
	n, err := h.admin.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	if _, err := h.nodeClient(name).CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("%s reporting its status: %v", name, err)
	}
	return name
}

func (h *harness) configMap(name, content string, eligible bool) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: h.pfx + name},
		Data: map[string]string{contract.ConfigMapKey: content}}
	if eligible {
		cm.Labels = map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
	}
	_, err := h.admin.CoreV1().ConfigMaps(configNamespace).Create(h.ctx, cm, metav1.CreateOptions{})
	return err
}

func (h *harness) mustConfigMap(name, content string, eligible bool) string {
	h.t.Helper()
	if err := h.configMap(name, content, eligible); err != nil {
		h.t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return configNamespace + "/" + h.pfx + name
}

func annotationPatch(value string) []byte {
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, value)
}

// assignOnceSeen assigns ref to node, as admin, and returns the refusal.
// Until the webhook's cache shows a ConfigMap just created it allows the
// assignment with a warning that ref is not eligible, judging nothing
// else: the assignment is then taken back and sent again.
func (h *harness) assignOnceSeen(node, ref string) error {
	h.t.Helper()
	unassign := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, contract.ConfigSourceAnnotation)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := h.admin.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, annotationPatch(ref), metav1.PatchOptions{})
		if err != nil || time.Now().After(deadline) {
			return err
		}
		if _, err := h.admin.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, unassign, metav1.PatchOptions{}); err != nil {
			h.t.Fatalf("taking %s back from %s: %v", ref, node, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// refused checks that err is a refusal; where nodeguard is the only judge,
// want names the rule that must have refused it.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want refused", what)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("%s: %v, want a refusal", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: refusal %q does not mention %q", what, err, w)
		}
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestOwnNodeOnly is rule 1, with and without the in-tree plugin.
func TestOwnNodeOnly(t *testing.T) {
	for _, e := range []*framework.Env{env, bare} {
		h := newHarness(t, e)
		n1, n2 := h.mustRegister("n1"), h.mustRegister("n2")
		c1 := h.nodeClient(n1)
		var want []string
		if e == bare {
			want = []string{"nodeguard rule 1 (own-node)"}
		}
		nodes := c1.CoreV1().Nodes()
		for _, p := range []struct {
			name string
			pt   types.PatchType
			data string
		}{
			{"JSON patch", types.JSONPatchType, `[{"op":"add","path":"/metadata/labels/example.com~1x","value":"y"}]`},
			{"merge patch", types.MergePatchType, `{"metadata":{"labels":{"example.com/x":"y"}}}`},
			{"strategic merge patch", types.StrategicMergePatchType, `{"metadata":{"labels":{"example.com/x":"y"}}}`},
		} {
			_, err := nodes.Patch(h.ctx, n2, p.pt, []byte(p.data), metav1.PatchOptions{})
			refused(t, "n1 "+p.name+" of n2", err, want...)
			_, err = nodes.Patch(h.ctx, n2, p.pt, []byte(p.data), metav1.PatchOptions{}, "status")
			refused(t, "n1 "+p.name+" of n2's status", err, want...)
		}
		force := true
		_, err := nodes.Patch(h.ctx, n2, types.ApplyPatchType,
			fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"labels":{"example.com/x":"y"}}}`, n2),
			metav1.PatchOptions{FieldManager: "n1", Force: &force})
		refused(t, "n1 server-side apply to n2", err, want...)
		other, err := h.admin.CoreV1().Nodes().Get(h.ctx, n2, metav1.GetOptions{})
		allowed(t, "admin get n2", err)
		other.Labels["example.com/x"] = "y"
		_, err = nodes.Update(h.ctx, other, metav1.UpdateOptions{})
		refused(t, "n1 update of n2", err, want...)
		// The in-tree Node authorizer already refuses a node deleting
		// another, before admission.
		refused(t, "n1 delete of n2", nodes.Delete(h.ctx, n2, metav1.DeleteOptions{}))
		_, err = nodes.Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.pfx + "n3"}}, metav1.CreateOptions{})
		refused(t, "n1 creating a Node named n3", err, want...)

		own, err := nodes.Get(h.ctx, n1, metav1.GetOptions{})
		allowed(t, "n1 get own", err)
		own.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		_, err = nodes.UpdateStatus(h.ctx, own, metav1.UpdateOptions{})
		allowed(t, "n1 updating its own status", err)
		_, err = nodes.Patch(h.ctx, n1, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`), metav1.PatchOptions{})
		allowed(t, "n1 patching its own unreserved label", err)
	}
}

// TestNodeRestrictions is rule 2.
func TestNodeRestrictions(t *testing.T) {
	for _, e := range []*framework.Env{env, bare} {
		h := newHarness(t, e)
		n1 := h.mustRegister("n1")
		nodes := h.nodeClient(n1).CoreV1().Nodes()
		want := func(s string) []string {
			if e == bare {
				return []string{"nodeguard rule 2 (node-restriction)", s}
			}
			return nil
		}
		_, err := nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"gold"}}}`), metav1.PatchOptions{})
		refused(t, "adding a node-restriction label", err, want("node-restriction.kubernetes.io/pool")...)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`), metav1.PatchOptions{})
		refused(t, "adding a non-kubelet kubernetes.io label", err, want("node-role.kubernetes.io/control-plane")...)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`), metav1.PatchOptions{})
		refused(t, "changing taints", err, want("taints")...)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType,
			[]byte(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"00000000-0000-0000-0000-000000000001"}]}}`), metav1.PatchOptions{})
		refused(t, "changing ownerReferences", err, want("ownerReferences")...)

		// The control plane may still set them.
		_, err = h.admin.CoreV1().Nodes().Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"gold"}}}`), metav1.PatchOptions{})
		allowed(t, "admin labelling", err)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"silver"}}}`), metav1.PatchOptions{})
		refused(t, "changing a node-restriction label", err, want("node-restriction.kubernetes.io/pool")...)

		// nodeguard.dev labels (pool membership) are the administrator's
		// word: the in-tree plugin lets a node write them, nodeguard refuses
		// it with and without that plugin, at registration and after.
		ownRule := []string{"nodeguard rule 2 (node-restriction)", contract.PoolLabel}
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"nodeguard.dev/pool":"blue"}}}`), metav1.PatchOptions{})
		refused(t, "labelling itself into a pool", err, ownRule...)
		_, err = h.admin.CoreV1().Nodes().Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"nodeguard.dev/pool":"blue"}}}`), metav1.PatchOptions{})
		allowed(t, "admin putting a node in a pool", err)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"nodeguard.dev/pool":"gpu"}}}`), metav1.PatchOptions{})
		refused(t, "moving itself to another pool", err, ownRule...)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"nodeguard.dev/pool":null}}}`), metav1.PatchOptions{})
		refused(t, "leaving its pool", err, ownRule...)
		_, err = nodes.Patch(h.ctx, n1, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/x":"z"}}}`), metav1.PatchOptions{})
		allowed(t, "a node in a pool changing another label", err)
		n3 := h.pfx + "n3"
		_, err = h.nodeClient(n3).CoreV1().Nodes().Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n3,
			Labels: map[string]string{contract.PoolLabel: "blue"}}}, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(context.Background(), n3, metav1.DeleteOptions{}) })
		}
		refused(t, "registering in a pool (kubelet --node-labels)", err, ownRule...)
	}
}

// TestConfigSource is rule 3, including a settings change on disk.
func TestConfigSource(t *testing.T) {
	h := newHarness(t, env)
	n1, n2 := h.mustRegister("n1"), h.mustRegister("n2")
	eligible := h.mustConfigMap("pool-a", goodConfig, true)
	plain := h.mustConfigMap("plain", goodConfig, false)
	theirs := h.mustConfigMap("pool-b", goodConfig, true)
	_, err := h.admin.CoreV1().Nodes().Patch(h.ctx, n2, types.MergePatchType, annotationPatch(theirs), metav1.PatchOptions{})
	allowed(t, "admin assigning n2", err)

	nodes := h.nodeClient(n1).CoreV1().Nodes()
	patch := func(value string) error {
		_, err := nodes.Patch(h.ctx, n1, types.MergePatchType, annotationPatch(value), metav1.PatchOptions{})
		return err
	}
	refused(t, "self-assignment while the settings forbid it", patch(eligible), "nodeguard rule 3 (config-source)", "allowNodeSelfAssignment")

	if err := env.WriteSettings(baseSettings + "allowNodeSelfAssignment: true\n"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.WriteSettings(baseSettings) })
	deadline := time.Now().Add(30 * time.Second)
	for err := patch(eligible); err != nil; err = patch(eligible) {
		if time.Now().After(deadline) {
			t.Fatalf("self-assignment still refused after the settings allowed it: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	refused(t, "self-assigning a non-eligible ConfigMap", patch(plain), "nodeguard rule 3 (config-source)", "lacks the label")
	refused(t, "self-assigning a missing ConfigMap", patch(configNamespace+"/missing"), "nodeguard rule 3 (config-source)")
	// Another node's ConfigMap is eligible: what keeps n1 from it is that
	// it may not read it (the authorizer), not this rule; but it may
	// never touch n2's assignment itself.
	_, err = nodes.Patch(h.ctx, n2, types.MergePatchType, annotationPatch(eligible), metav1.PatchOptions{})
	refused(t, "n1 pointing n2's config source", err)
	allowed(t, "clearing its own assignment", patch(""))

	// A rollout's bookkeeping is the controller's alone: the previous
	// config source is what a revert assigns back. The settings still allow
	// self-assignment here, and the node is refused all the same.
	for key, value := range map[string]string{contract.PreviousConfigSourceAnnotation: eligible, contract.RolloutAnnotation: "pool"} {
		_, err := nodes.Patch(h.ctx, n1, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value), metav1.PatchOptions{})
		refused(t, "a node writing "+key, err, "nodeguard rule 3 (config-source)", key)
		_, err = h.admin.CoreV1().Nodes().Patch(h.ctx, n2, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value), metav1.PatchOptions{})
		allowed(t, "the admin writing "+key, err)
		_, err = h.nodeClient(n2).CoreV1().Nodes().Patch(h.ctx, n2, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, key), metav1.PatchOptions{})
		refused(t, "a node removing "+key, err, "nodeguard rule 3 (config-source)", key)
	}
}

// TestAssignmentsAndContent are rules 4, 5 and 6, with admin credentials.
func TestAssignmentsAndContent(t *testing.T) {
	h := newHarness(t, env)
	n1 := h.mustRegister("n1")

	err := h.configMap("invalid", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 110\n", true)
	refused(t, "creating an eligible ConfigMap with an unknown field", err, "nodeguard rule 6 (config-content)", "maxPodz")
	err = h.configMap("out-of-range", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 150\n", true)
	refused(t, "creating an eligible ConfigMap with an invalid value", err, "nodeguard rule 6 (config-content)", "imageGCHighThresholdPercent")
	err = h.configMap("static", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /srv\n", true)
	refused(t, "creating an eligible ConfigMap with a forbidden field", err, "nodeguard rule 6 (config-content)", "staticPodPath")
	allowed(t, "creating a non-eligible ConfigMap with anything", h.configMap("not-a-config", "garbage", false))

	gated := h.mustConfigMap("new-gate", newGateConfig, true)
	old := h.pfx + "old"
	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: old}}
	created, err := h.admin.CoreV1().Nodes().Create(h.ctx, oldNode, metav1.CreateOptions{})
	allowed(t, "admin creating a node", err)
	t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(context.Background(), old, metav1.DeleteOptions{}) })
	created.Status.NodeInfo.KubeletVersion = "v1.35.0"
	_, err = h.admin.CoreV1().Nodes().UpdateStatus(h.ctx, created, metav1.UpdateOptions{})
	allowed(t, "admin setting status", err)
	err = h.assignOnceSeen(old, gated)
	refused(t, "assigning a gate the kubelet does not know", err, "nodeguard rule 5 (feature-gates)", "APIServerWebhookAuthenticationToken")
	// The refusal is about what the Node reports, and says so through the
	// apiserver, so that a rollout skips the Node instead of failing.
	if !contract.IsNodeStateRefusal(err) {
		t.Errorf("a refusal for the node's kubelet version carries no %s cause: %#v", contract.CauseNodeState, err)
	}
	// A configuration no kubelet can run is refused for what it is, even
	// to a node whose version says nothing.
	odd := h.pfx + "odd"
	oddNode, err := h.admin.CoreV1().Nodes().Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: odd}}, metav1.CreateOptions{})
	allowed(t, "admin creating a node", err)
	t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(context.Background(), odd, metav1.DeleteOptions{}) })
	oddNode.Status.NodeInfo.KubeletVersion = "garbage"
	_, err = h.admin.CoreV1().Nodes().UpdateStatus(h.ctx, oddNode, metav1.UpdateOptions{})
	allowed(t, "admin setting status", err)
	err = h.assignOnceSeen(odd, h.mustConfigMap("no-such-gate", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n", true))
	refused(t, "assigning a gate no kubelet knows", err, "nodeguard rule 5 (feature-gates)", "NoSuchGate")
	if contract.IsNodeStateRefusal(err) {
		t.Errorf("a refusal for the configuration itself carries the %s cause: %#v", contract.CauseNodeState, err)
	}
	_, err = h.admin.CoreV1().Nodes().Patch(h.ctx, n1, types.MergePatchType, annotationPatch(gated), metav1.PatchOptions{})
	allowed(t, "assigning the same gate to a kubelet that knows it", err)

	// Editing an assigned ConfigMap is judged against its nodes.
	good := h.mustConfigMap("good", goodConfig, true)
	_, err = h.admin.CoreV1().Nodes().Patch(h.ctx, old, types.MergePatchType, annotationPatch(good), metav1.PatchOptions{})
	allowed(t, "assigning a plain config to the old node", err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := h.setContent(h.admin, "good", newGateConfig)
		if err != nil {
			refused(t, "editing an assigned config to a gate its node lacks", err, "nodeguard rule 6 (config-content)", old)
			break
		}
		// The graph had not seen the assignment yet; put it back and retry.
		if err := h.setContent(h.admin, "good", goodConfig); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("edit breaking an assigned node was never refused")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Rule 4: a kubelet below the minimum cannot register.
	refused(t, "old kubelet registering", h.register(h.pfx+"ancient", "v1.29.9"), "nodeguard rule 4 (min-kubelet-version)", "1.30.0")
	allowed(t, "new kubelet registering", h.register(h.pfx+"fresh", "v1.30.0"))
}
