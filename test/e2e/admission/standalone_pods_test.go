package admission_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The writes NodeRestriction refuses a node, each tried with a node's own
// credentials on a real kube-apiserver twice: with the in-tree plugin on,
// which refuses it, and without it and with manifests/overlays/standalone
// applied, where nodeguard must (the refusal then names nodeguard's rule).
// Each also shows the write a kubelet does make going through, so that the
// standalone rules hold nodes to NodeRestriction without breaking them.

// standaloneCase is one environment a standalone test runs in, and the
// rule fragment its refusals must name ("" for in-tree NodeRestriction).
type standaloneCase struct {
	name string
	env  *framework.Env
	rule string
}

func standaloneCases(rule string) []standaloneCase {
	return []standaloneCase{{"with NodeRestriction", env, ""}, {"standalone", bare, rule}}
}

// adminPod creates pod as the administrator and deletes it at the end.
func (h *harness) adminPod(pod *corev1.Pod) *corev1.Pod {
	h.t.Helper()
	created, err := h.admin.CoreV1().Pods(pod.Namespace).Create(h.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	h.t.Cleanup(func() {
		_ = h.admin.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	return created
}

// eventuallyAnswered repeats a write until the answer is about the write
// itself: the in-tree plugin and the Node authorizer judge from the
// apiserver's informers, which may not have seen an object created just
// before, and answer NotFound, or the authorizer's "cannot ... resource",
// until they have.
func (h *harness) eventuallyAnswered(what string, write func(context.Context) error) error {
	h.t.Helper()
	var last error
	err := framework.Eventually(h.ctx, 30*time.Second, what, func(ctx context.Context) (bool, string, error) {
		last = write(ctx)
		lagging := apierrors.IsNotFound(last) || (apierrors.IsForbidden(last) && authorizerRefusal.MatchString(last.Error()))
		return !lagging, fmt.Sprint(last), nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return last
}

// authorizerRefusal is how kube-apiserver words an authorization refusal,
// as opposed to an admission one.
var authorizerRefusal = regexp.MustCompile(`cannot \w+ resource`)

// TestANodeCannotRelabelItsPodThroughStatus: a node updates its own pod's
// status, and may not change its labels there (which would move it into
// another Service's endpoints or another NetworkPolicy's selection).
func TestANodeCannotRelabelItsPodThroughStatus(t *testing.T) {
	for _, e := range standaloneCases("node pods") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("relabel-a")
			h.adminPod(h.mirrorPodOf(a, "relabel"))
			pods := h.nodeClient(a).CoreV1().Pods("default")

			pod, err := pods.Get(h.ctx, h.pfx+"relabel", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			relabelled := pod.DeepCopy()
			relabelled.Labels = map[string]string{"app": "payments"}
			_, err = pods.UpdateStatus(h.ctx, relabelled, metav1.UpdateOptions{})
			refused(t, "relabelling its pod through pods/status", err, e.rule)

			routine := pod.DeepCopy()
			routine.Status.Phase = corev1.PodRunning
			routine.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			_, err = pods.UpdateStatus(h.ctx, routine, metav1.UpdateOptions{})
			allowed(t, "a routine status update of its own pod", err)
			if got, _ := h.admin.CoreV1().Pods("default").Get(h.ctx, pod.Name, metav1.GetOptions{}); got != nil && got.Labels["app"] == "payments" {
				t.Errorf("the pod carries the label the node wrote: %v", got.Labels)
			}
		})
	}
}

// TestMirrorPodsAreOwnedByTheirNode: a node creates a mirror pod only owned
// by its own Node, by UID and as controller, so that the garbage collector
// removes it with the Node; not one with no owner, nor one naming a Node
// UID that is not its own (a Node deleted and re-registered), nor one that
// names its Node without being controlled by it.
func TestMirrorPodsAreOwnedByTheirNode(t *testing.T) {
	for _, e := range standaloneCases("node pods") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("owner-a")
			pods := h.nodeClient(a).CoreV1().Pods("default")
			for _, tc := range []struct {
				name   string
				mutate func(*corev1.Pod)
			}{
				{"no owner", func(p *corev1.Pod) { p.OwnerReferences = nil }},
				{"its Node with a wrong UID", func(p *corev1.Pod) { p.OwnerReferences[0].UID = types.UID("00000000-0000-0000-0000-000000000001") }},
				{"its Node, not as controller", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }},
			} {
				pod := h.mirrorPodOf(a, "owned-"+strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ",", ""))
				pod.Name = strings.ToLower(pod.Name)
				tc.mutate(pod)
				_, err := pods.Create(h.ctx, pod, metav1.CreateOptions{})
				refused(t, "a mirror pod owned by "+tc.name, err, e.rule)
			}
			own, err := pods.Create(h.ctx, h.mirrorPodOf(a, "owned"), metav1.CreateOptions{})
			allowed(t, "a mirror pod owned by its own Node", err)
			_ = h.admin.CoreV1().Pods("default").Delete(context.Background(), own.Name, metav1.DeleteOptions{})
		})
	}
}

// TestANodeEvictsOnlyItsOwnPods: a node may evict the pods bound to it
// (the kubelet's node-pressure eviction and graceful shutdown do), and no
// other node's.
func TestANodeEvictsOnlyItsOwnPods(t *testing.T) {
	for _, e := range standaloneCases("node pods") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a, b := h.mustRegister("evict-a"), h.mustRegister("evict-b")
			other := h.adminPod(h.mirrorPodOf(b, "on-b"))
			own := h.adminPod(h.mirrorPodOf(a, "on-a"))
			evictions := h.nodeClient(a).PolicyV1().Evictions("default")
			evict := func(name string) func(context.Context) error {
				return func(ctx context.Context) error {
					return evictions.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})
				}
			}
			refused(t, "evicting another node's pod", h.eventuallyAnswered("an answer about "+other.Name, evict(other.Name)), e.rule)
			if _, err := h.admin.CoreV1().Pods("default").Get(h.ctx, other.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s after a refused eviction: %v", other.Name, err)
			}
			allowed(t, "evicting its own pod", h.eventuallyAnswered("an answer about "+own.Name, evict(own.Name)))
		})
	}
}
