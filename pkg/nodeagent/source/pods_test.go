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

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
)

func boundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods"},
	}
}

// TestSourceListsBoundPods: with ReadPods, an online observation offers a
// list of the pods bound to the Node, made with the spec.nodeName field
// selector the node authorizer allows, across namespaces; the Source opens
// no pod watch and lists nothing until the list is asked for.
func TestSourceListsBoundPods(t *testing.T) {
	client := fake.NewClientset(node(""), boundPod("a", "node-1"), boundPod("elsewhere", "node-2"))
	s := runSource(t, client, Options{ReadPods: true})
	obs := eventually(t, s, "online", func(o reconciler.Observation) bool { return o.Online })
	if n := podActions(client); len(n) != 0 {
		t.Fatalf("pods read before the trial asked: %v", n)
	}
	if obs.Pods == nil {
		t.Fatal("the observation offers no pod list")
	}
	// The fake clientset does not filter by field; the selector is what
	// the apiserver filters on.
	if _, err := obs.Pods(t.Context()); err != nil {
		t.Fatal(err)
	}
	actions := podActions(client)
	if len(actions) != 1 {
		t.Fatalf("pod actions %v, want one list", actions)
	}
	list, ok := actions[0].(k8stesting.ListActionImpl)
	if !ok || list.GetNamespace() != "" || list.GetListRestrictions().Fields.String() != "spec.nodeName=node-1" {
		t.Errorf("%s pods in %q, want a list in every namespace with spec.nodeName=node-1", actions[0].GetVerb(), actions[0].GetNamespace())
	}
}

// TestSourceWithoutPods: without ReadPods the observation offers no pod
// list and no pod is read.
func TestSourceWithoutPods(t *testing.T) {
	client := fake.NewClientset(node(""), boundPod("a", "node-1"))
	s := runSource(t, client, Options{})
	obs := eventually(t, s, "online", func(o reconciler.Observation) bool { return o.Online })
	if obs.Pods != nil {
		t.Error("the observation offers a pod list without being asked to")
	}
	if n := podActions(client); len(n) != 0 {
		t.Errorf("pods read: %v", n)
	}
}

func runSource(t *testing.T, client *fake.Clientset, opts Options) *Source {
	t.Helper()
	s, err := New(kubeclienttest.Wrap(client), "node-1", opts, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func podActions(client *fake.Clientset) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() != "create" {
			out = append(out, a)
		}
	}
	return out
}
