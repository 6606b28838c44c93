package source

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/controller"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
)

func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"big": "annotation"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods", Message: "Node didn't have enough resource: pods",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}},
	}
}

// TestSourceWatchesBoundPods: with WatchPods, the observation carries the
// pods bound to the Node, listed and watched with the spec.nodeName field
// selector the node authorizer allows, and slimmed to what the trial
// reads.
func TestSourceWatchesBoundPods(t *testing.T) {
	client := fake.NewClientset(node(""), boundPod("a"))
	s, err := New(kubeclienttest.Wrap(client), "node-1", Options{WatchPods: true}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	obs := eventually(t, s, "the pods", func(o controller.Observation) bool { return o.PodsSynced && len(o.Pods) == 1 })
	if obs.Node == nil || obs.Node.Name != "node-1" {
		t.Errorf("the observation has no Node: %+v", obs.Node)
	}
	p := obs.Pods[0]
	if p.Status.Reason != "OutOfpods" || p.Status.Phase != corev1.PodFailed || p.Status.Message == "" {
		t.Errorf("the pod's status was not kept: %+v", p.Status)
	}
	if q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "250m" {
		t.Errorf("the pod's requests were not kept: %+v", p.Spec.Containers)
	}
	if p.Labels != nil || p.Annotations != nil || p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Image != "" || p.Status.ContainerStatuses != nil {
		t.Errorf("the cached pod keeps what the trial never reads: %+v", p)
	}

	if _, err := client.CoreV1().Pods("default").Create(ctx, boundPod("b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "the new pod", func(o controller.Observation) bool { return len(o.Pods) == 2 })

	for _, action := range client.Actions() {
		if action.GetResource().Resource != "pods" {
			continue
		}
		var selector string
		switch a := action.(type) {
		case k8stesting.ListActionImpl:
			selector = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchActionImpl:
			selector = a.GetWatchRestrictions().Fields.String()
		default:
			if action.GetVerb() == "create" {
				continue
			}
			t.Errorf("the agent did %s on pods", action.GetVerb())
			continue
		}
		if selector != "spec.nodeName=node-1" || action.GetNamespace() != "" {
			t.Errorf("%s pods in %q with selector %q, want every namespace and spec.nodeName=node-1", action.GetVerb(), action.GetNamespace(), selector)
		}
	}
}

// TestSourceWithoutPods: without WatchPods no pod is read, and the
// observation says the pods are not known.
func TestSourceWithoutPods(t *testing.T) {
	client := fake.NewClientset(node(""), boundPod("a"))
	s, err := New(kubeclienttest.Wrap(client), "node-1", Options{}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	obs := eventually(t, s, "online", func(o controller.Observation) bool { return o.Online })
	if obs.PodsSynced || obs.Pods != nil {
		t.Errorf("pods observed without being asked for: %+v", obs.Pods)
	}
	for _, action := range client.Actions() {
		if action.GetResource().Resource == "pods" {
			t.Errorf("the agent did %s on pods", action.GetVerb())
		}
	}
}
