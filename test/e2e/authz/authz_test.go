package authz_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// revocationDeadline bounds how long a revoked path may still read: the
// shipped authorizedTTL (10s) plus graph lag, with room for a busy machine.
const revocationDeadline = 45 * time.Second

// scenario gives each test its own namespace and node names.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	admin kubernetes.Interface
	ns    string
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	s := &scenario{t: t, ctx: t.Context(), admin: env.Admin, ns: "e2e-" + fmt.Sprint(time.Now().UnixNano()%1e9)}
	if _, err := s.admin.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *scenario) node(name, kubeletVersion, assignment string) string {
	s.t.Helper()
	name = s.ns + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if assignment != "" {
		n.Annotations = map[string]string{contract.ConfigSourceAnnotation: s.ns + "/" + assignment}
	}
	created, err := s.admin.CoreV1().Nodes().Create(s.ctx, n, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	created.Status.NodeInfo.KubeletVersion = kubeletVersion
	if _, err := s.admin.CoreV1().Nodes().UpdateStatus(s.ctx, created, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func (s *scenario) configMap(name string, eligible bool) {
	s.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Data: map[string]string{contract.ConfigMapKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"}}
	if eligible {
		cm.Labels = map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
	}
	if _, err := s.admin.CoreV1().ConfigMaps(s.ns).Create(s.ctx, cm, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) pod(name, node string, configMaps ...string) {
	s.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, cm := range configMaps {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: cm, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}})
	}
	if _, err := s.admin.CoreV1().Pods(s.ns).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) client(node string) kubernetes.Interface {
	s.t.Helper()
	c, err := env.NodeClient(node)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// reads tries get, list-by-name and watch-by-name; it returns nil when all
// three succeed, or the first error.
func (s *scenario) reads(c kubernetes.Interface, name string) error {
	if _, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	list, err := c.CoreV1().ConfigMaps(s.ns).List(s.ctx, byName)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if len(list.Items) != 1 {
		return fmt.Errorf("list by name returned %d items", len(list.Items))
	}
	w, err := c.CoreV1().ConfigMaps(s.ns).Watch(s.ctx, byName)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	w.Stop()
	return nil
}

// eventually polls cond until it returns nil or the deadline passes.
func (s *scenario) eventually(what string, deadline time.Duration, cond func() error) {
	s.t.Helper()
	end := time.Now().Add(deadline)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s: still not true after %v: %v", what, deadline, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *scenario) canRead(c kubernetes.Interface, name string) {
	s.t.Helper()
	// The graph learns of new objects through watches; allow it to catch
	// up.
	s.eventually("node can read "+name, revocationDeadline, func() error { return s.reads(c, name) })
}

func (s *scenario) cannotRead(c kubernetes.Interface, name string) {
	s.t.Helper()
	for _, check := range []func() error{
		func() error { _, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, name, metav1.GetOptions{}); return err },
		func() error {
			_, err := c.CoreV1().ConfigMaps(s.ns).List(s.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			return err
		},
		func() error {
			_, err := c.CoreV1().ConfigMaps(s.ns).List(s.ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := check(); !apierrors.IsForbidden(err) {
			s.t.Fatalf("read of %s/%s: err = %v, want Forbidden", s.ns, name, err)
		}
	}
}

func (s *scenario) accessEnds(c kubernetes.Interface, name string) {
	s.t.Helper()
	s.eventually("access to "+name+" revoked", revocationDeadline, func() error {
		_, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("get still answers %v", err)
	})
}

func TestAssignedConfigMapIsReadableByItsNodeOnly(t *testing.T) {
	s := newScenario(t)
	s.configMap("cfg-a", true)
	s.configMap("cfg-b", true)
	s.configMap("unassigned", true)
	s.configMap("plain", false)
	n1 := s.node("n1", "v1.37.2", "cfg-a")
	s.node("n2", "v1.37.2", "cfg-b")
	n3 := s.node("n3", "v1.37.2", "plain")
	c1, c3 := s.client(n1), s.client(n3)

	s.canRead(c1, "cfg-a")
	s.cannotRead(c1, "cfg-b")
	s.cannotRead(c1, "unassigned")
	s.cannotRead(c1, "plain")
	// Pointing its own annotation at a non-eligible ConfigMap grants nothing.
	s.cannotRead(c3, "plain")
}

func TestPodConfigMapIsReadableByItsNodeOnly(t *testing.T) {
	s := newScenario(t)
	s.configMap("app-config", false)
	n1 := s.node("n1", "v1.37.2", "")
	n2 := s.node("n2", "v1.37.2", "")
	s.pod("app", n1, "app-config")
	s.canRead(s.client(n1), "app-config")
	s.cannotRead(s.client(n2), "app-config")
}

func TestRevocation(t *testing.T) {
	s := newScenario(t)
	for _, cm := range []string{"unassign", "unlabel", "delete"} {
		s.configMap(cm, true)
	}
	nodes := map[string]string{}
	for _, cm := range []string{"unassign", "unlabel", "delete"} {
		nodes[cm] = s.node(cm, "v1.37.2", cm)
	}
	clients := map[string]kubernetes.Interface{}
	for cm, n := range nodes {
		clients[cm] = s.client(n)
		s.canRead(clients[cm], cm)
	}

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, contract.ConfigSourceAnnotation)
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, nodes["unassign"], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patch = fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, contract.EligibleLabel)
	if _, err := s.admin.CoreV1().ConfigMaps(s.ns).Patch(s.ctx, "unlabel", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.admin.CoreV1().ConfigMaps(s.ns).Delete(s.ctx, "delete", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.accessEnds(clients["unassign"], "unassign")
	s.accessEnds(clients["unlabel"], "unlabel")
	// A deleted ConfigMap answers NotFound to anyone allowed to get it; the
	// re-created one must not be readable any more.
	s.configMap("delete", false)
	s.accessEnds(clients["delete"], "delete")
}

func TestTooOldKubelet(t *testing.T) {
	s := newScenario(t)
	s.configMap("cfg", true)
	s.configMap("app-config", false)
	old := s.node("old", "v1.29.9", "cfg")
	s.pod("app", old, "app-config")
	if _, err := s.admin.CoreV1().Secrets(s.ns).Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.pod("app2", old, "app-config")
	c := s.client(old)

	// Denied: even what the Node authorizer would allow through the pod.
	s.eventually("old kubelet denied its pod's ConfigMap", revocationDeadline, func() error {
		_, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "app-config", metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("got %v", err)
	})
	for what, read := range map[string]func() error{
		"assigned ConfigMap": func() error { _, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "cfg", metav1.GetOptions{}); return err },
		"secret":             func() error { _, err := c.CoreV1().Secrets(s.ns).Get(s.ctx, "s", metav1.GetOptions{}); return err },
	} {
		if err := read(); !apierrors.IsForbidden(err) {
			t.Fatalf("old kubelet reading %s: %v, want Forbidden", what, err)
		}
	}
	// It may still get and update its own Node.
	n, err := c.CoreV1().Nodes().Get(s.ctx, old, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("old kubelet get own Node: %v", err)
	}
	n.Status.NodeInfo.KubeletVersion = "v1.29.10"
	if _, err := c.CoreV1().Nodes().UpdateStatus(s.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("old kubelet update own Node status: %v", err)
	}
}

// TestWebhookDown runs last in this file's order: with the webhook
// stopped, the failure policy NoOpinion leaves nodes to Node and RBAC.
func TestWebhookDown(t *testing.T) {
	s := newScenario(t)
	s.configMap("app-config", false)
	n1 := s.node("n1", "v1.37.2", "")
	s.pod("app", n1, "app-config")
	c := s.client(n1)
	s.canRead(c, "app-config")

	env.StopWebhook()
	t.Cleanup(func() {
		if err := env.StartWebhook(context.Background()); err != nil {
			t.Errorf("restarting webhook: %v", err)
		}
	})
	// Through the in-tree Node authorizer alone.
	s.eventually("node works through the in-tree authorizers", revocationDeadline, func() error {
		if _, err := c.CoreV1().Nodes().Get(s.ctx, n1, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get own node: %w", err)
		}
		_, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "app-config", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod's ConfigMap: %w", err)
		}
		return nil
	})
	// What no authorizer allows stays refused. The apiserver reports the
	// unreachable webhook alongside the refusals, so the answer is a 500
	// rather than a 403 (k8s.io/apiserver's webhook authorizer returns its
	// error even under failurePolicy NoOpinion); either way nothing leaks.
	_, err := c.CoreV1().ConfigMaps(s.ns).List(s.ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) && !apierrors.IsInternalError(err) {
		t.Fatalf("unnamed list with the webhook down: %v, want Forbidden or InternalError", err)
	}
}
