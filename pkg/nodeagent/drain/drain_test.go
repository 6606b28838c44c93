package drain

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
)

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func ownedBy(kind, apiVersion string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		controller := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: "owner", UID: "owner-uid", Controller: &controller}}
	}
}

func TestMustLeave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		leave bool
	}{
		{"bare pod", pod("a"), true},
		{"ReplicaSet pod", pod("a", ownedBy("ReplicaSet", "apps/v1")), true},
		{"StatefulSet pod", pod("a", ownedBy("StatefulSet", "apps/v1")), true},
		{"DaemonSet pod", pod("a", ownedBy("DaemonSet", "apps/v1")), false},
		{"a CRD kind named DaemonSet is no DaemonSet", pod("a", ownedBy("DaemonSet", "example.com/v1")), true},
		{"mirror pod", pod("a", func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "hash"} }), false},
		{"succeeded", pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"failed", pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"pending", pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if leave, why := MustLeave(tc.pod); leave != tc.leave {
				t.Errorf("MustLeave = %v (%s), want %v", leave, why, tc.leave)
			}
		})
	}
}

// evictions answers the fake clientset's evictions: a pod named in
// blocked gets the API's 429, others are deleted.
func evictions(t *testing.T, clientset *fake.Clientset, blocked map[string]bool, sent *[]string) {
	clientset.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(clienttesting.CreateAction)
		if !ok || action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		eviction, ok := create.GetObject().(*policyv1.Eviction)
		if !ok {
			t.Fatalf("an eviction with a %T body", create.GetObject())
		}
		*sent = append(*sent, eviction.Name)
		if eviction.DeleteOptions == nil || eviction.DeleteOptions.Preconditions == nil || eviction.DeleteOptions.Preconditions.UID == nil {
			t.Errorf("the eviction of %s does not pin the pod's UID", eviction.Name)
		}
		if blocked[eviction.Name] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		err := clientset.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), eviction.Namespace, eviction.Name)
		return true, nil, err
	})
}

func TestEvict(t *testing.T) {
	ctx := context.Background()
	terminating := pod("terminating", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now })
	pods := []*corev1.Pod{
		pod("web"), pod("budgeted"), terminating,
		pod("ds", ownedBy("DaemonSet", "apps/v1")),
		pod("static", func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	}
	var objects []runtime.Object
	for _, p := range pods {
		objects = append(objects, p)
	}
	clientset := fake.NewClientset(objects...)
	var sent []string
	evictions(t, clientset, map[string]bool{"budgeted": true}, &sent)
	d, err := New(kubeclienttest.Wrap(clientset), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	progress := d.Evict(ctx, pods)
	if want := []string{"web", "budgeted"}; !reflect.DeepEqual(sent, want) {
		t.Errorf("evictions sent for %v, want %v (DaemonSet, mirror, finished and terminating pods are not evicted)", sent, want)
	}
	want := []Pending{
		{Namespace: "default", Name: "budgeted", Blocked: true, Why: "eviction refused: Cannot evict pod as it would violate the pod's disruption budget."},
		{Namespace: "default", Name: "terminating", Why: "terminating"},
		{Namespace: "default", Name: "web", Why: "terminating"},
	}
	if !reflect.DeepEqual(progress.Pending, want) {
		t.Errorf("pending = %+v, want %+v", progress.Pending, want)
	}
	if progress.Done() {
		t.Error("Done with pods pending")
	}

	// The next step sees what is left: web is gone.
	left, err := d.ListPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	progress = d.Evict(ctx, left)
	if got := progress.Names(); !reflect.DeepEqual(got, []string{"default/budgeted", "default/terminating"}) {
		t.Errorf("second step pending %v", got)
	}
	if progress.Done() || !progress.Pending[0].Blocked {
		t.Errorf("the budgeted pod must stay blocked: %+v", progress.Pending)
	}
	if done := d.Evict(ctx, []*corev1.Pod{pods[3], pods[4], pods[5]}); !done.Done() {
		t.Errorf("only pods that stay: pending %v", done.Names())
	}
}

func TestEvictGonePodCountsAsGone(t *testing.T) {
	clientset := fake.NewClientset() // the listed pod no longer exists
	clientset.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), "web")
	})
	d, _ := New(kubeclienttest.Wrap(clientset), "node-1")
	if progress := d.Evict(context.Background(), []*corev1.Pod{pod("web")}); !progress.Done() {
		t.Errorf("a pod already gone is pending: %+v", progress.Pending)
	}
}

func TestEvictOtherErrorIsBlocked(t *testing.T) {
	clientset := fake.NewClientset(pod("web"))
	clientset.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "web", errors.New("node-1 may not evict it"))
	})
	d, _ := New(kubeclienttest.Wrap(clientset), "node-1")
	progress := d.Evict(context.Background(), []*corev1.Pod{pod("web")})
	if progress.Done() || !progress.Pending[0].Blocked {
		t.Fatalf("a refused eviction must hold the drain: %+v", progress.Pending)
	}
}

func node(unschedulable bool, annotations map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "7", Annotations: annotations},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
	}
}

func TestCordonAndUncordon(t *testing.T) {
	ctx := context.Background()
	clientset := fake.NewClientset(node(false, nil))
	d, _ := New(kubeclienttest.Wrap(clientset), "node-1")
	cordoned, err := d.Cordon(ctx, node(false, nil), "kube-system/a")
	if err != nil {
		t.Fatal(err)
	}
	if !cordoned.Spec.Unschedulable || !CordonedByAgent(cordoned) || cordoned.Annotations[contract.CordonedAnnotation] != "kube-system/a" {
		t.Fatalf("after Cordon: unschedulable=%v annotations=%v", cordoned.Spec.Unschedulable, cordoned.Annotations)
	}
	uncordoned, err := d.Uncordon(ctx, cordoned)
	if err != nil {
		t.Fatal(err)
	}
	if uncordoned.Spec.Unschedulable || CordonedByAgent(uncordoned) {
		t.Fatalf("after Uncordon: unschedulable=%v annotations=%v", uncordoned.Spec.Unschedulable, uncordoned.Annotations)
	}
}

func TestAdministratorsCordonIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	admins := node(true, nil)
	clientset := fake.NewClientset(admins)
	d, _ := New(kubeclienttest.Wrap(clientset), "node-1")
	if _, err := d.Cordon(ctx, admins, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Uncordon(ctx, admins); err != nil {
		t.Fatal(err)
	}
	for _, action := range clientset.Actions() {
		if action.GetVerb() == "patch" {
			t.Errorf("the administrator's cordon was written to: %v", action)
		}
	}
}

func TestCordonIsConditionalOnWhatWasRead(t *testing.T) {
	clientset := fake.NewClientset(node(false, nil))
	var patch []byte
	clientset.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch = action.(clienttesting.PatchAction).GetPatch()
		return false, nil, nil
	})
	d, _ := New(kubeclienttest.Wrap(clientset), "node-1")
	if _, err := d.Cordon(context.Background(), node(false, nil), "x"); err != nil {
		t.Fatal(err)
	}
	if want := `"resourceVersion":"7"`; !strings.Contains(string(patch), want) {
		t.Errorf("cordon patch %s: want the resourceVersion read (%s), so an administrator's cordon in between is never claimed", patch, want)
	}
}
