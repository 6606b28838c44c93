package authz_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// eventDeadline bounds waiting for a watch event that follows a write.
const eventDeadline = 30 * time.Second

// watchByName opens a watch on one ConfigMap from its current version, as
// the kubelet and the agent read their configuration.
func (s *scenario) watchByName(c kubernetes.Interface, name string) watch.Interface {
	s.t.Helper()
	cm, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("get before watching %s: %v", name, err)
	}
	w, err := c.CoreV1().ConfigMaps(s.ns).Watch(s.ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: cm.ResourceVersion,
	})
	if err != nil {
		s.t.Fatalf("watching %s: %v", name, err)
	}
	s.t.Cleanup(w.Stop)
	return w
}

// delivers waits for an event of type want whose ConfigMap holds data.
func (s *scenario) delivers(w watch.Interface, want watch.EventType, data string) {
	s.t.Helper()
	timeout := time.After(eventDeadline)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				s.t.Fatalf("the watch ended before a %s event holding %q", want, data)
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if ev.Type == want && isCM && strings.Contains(cm.Data[contract.ConfigMapKey], data) {
				return
			}
		case <-timeout:
			s.t.Fatalf("no %s event holding %q within %v", want, data, eventDeadline)
		}
	}
}

func (s *scenario) setData(cm *corev1.ConfigMap, data string) *corev1.ConfigMap {
	s.t.Helper()
	cm.Data = map[string]string{contract.ConfigMapKey: data}
	updated, err := s.admin.CoreV1().ConfigMaps(s.ns).Update(s.ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return updated
}

const changedConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 42\n"

// TestRevocationLimits is issue 17 item 4: what docs/security.md says
// revocation does not reach ("What nodeguard does not protect against").
// Each part passes while the limit exists; if the apiserver ever closes one,
// the test fails and the docs must change with it.
func TestRevocationLimits(t *testing.T) {
	s := newScenario(t)
	cases := []string{"unassigned", "unlabelled", "recreated", "cached"}
	clients, nodes := map[string]kubernetes.Interface{}, map[string]string{}
	for _, cm := range cases {
		s.configMap(cm, true)
		nodes[cm] = s.node(cm, "v1.37.2", cm)
		clients[cm] = s.client(nodes[cm])
		s.canRead(clients[cm], cm)
	}

	t.Run("an open watch outlives the assignment", func(t *testing.T) {
		w := s.watchByName(clients["unassigned"], "unassigned")
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, contract.ConfigSourceAnnotation)
		if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, nodes["unassigned"], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		s.accessEnds(clients["unassigned"], "unassigned")
		cm, err := s.admin.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "unassigned", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.setData(cm, changedConfig)
		s.delivers(w, watch.Modified, "maxPods: 42")
	})

	t.Run("an open watch outlives the label", func(t *testing.T) {
		w := s.watchByName(clients["unlabelled"], "unlabelled")
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, contract.EligibleLabel)
		cm, err := s.admin.CoreV1().ConfigMaps(s.ns).Patch(s.ctx, "unlabelled", types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Revoked for every new request...
		s.accessEnds(clients["unlabelled"], "unlabelled")
		// ... but not for the watch opened before.
		s.setData(cm, changedConfig)
		s.delivers(w, watch.Modified, "maxPods: 42")
	})

	t.Run("an open watch outlives delete and re-create", func(t *testing.T) {
		w := s.watchByName(clients["recreated"], "recreated")
		if err := s.admin.CoreV1().ConfigMaps(s.ns).Delete(s.ctx, "recreated", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		recreated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "recreated"},
			Data: map[string]string{contract.ConfigMapKey: changedConfig}}
		if _, err := s.admin.CoreV1().ConfigMaps(s.ns).Create(s.ctx, recreated, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Not eligible, not readable by a new request, yet delivered.
		s.delivers(w, watch.Added, "maxPods: 42")
		s.accessEnds(clients["recreated"], "recreated")
	})

	t.Run("one write that unlabels and changes is readable until the cached allow expires", func(t *testing.T) {
		c := clients["cached"]
		cm, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "cached", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(cm.Labels, contract.EligibleLabel)
		wrote := time.Now()
		s.setData(cm, changedConfig)
		got, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "cached", metav1.GetOptions{})
		if time.Since(wrote) < 5*time.Second && (err != nil || !strings.Contains(got.Data[contract.ConfigMapKey], "maxPods: 42")) {
			t.Fatalf("right after the write, within authorizedTTL (10s): %v, want the new content through the cached allow", err)
		}
		s.accessEnds(c, "cached")
	})

	t.Run("an immutable ConfigMap has nothing more to deliver", func(t *testing.T) {
		immutable := true
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "revision-1",
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
			Data: map[string]string{contract.ConfigMapKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"}, Immutable: &immutable}
		created, err := s.admin.CoreV1().ConfigMaps(s.ns).Create(s.ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Data = map[string]string{contract.ConfigMapKey: changedConfig}
		_, err = s.admin.CoreV1().ConfigMaps(s.ns).Update(s.ctx, created, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
			t.Fatalf("changing an immutable ConfigMap's data: %v, want Invalid (field is immutable)", err)
		}
	})
}
