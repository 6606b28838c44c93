package source

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
)

func node(assignment string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-custom.1"}},
	}
	if assignment != "" {
		n.Annotations[contract.ConfigSourceAnnotation] = assignment
	}
	return n
}

func configMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}}
}

// eventually polls observe until check accepts the observation.
func eventually(t *testing.T, s *Source, what string, check func(reconciler.Observation) bool) reconciler.Observation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs := s.Observe(t.Context())
		if check(obs) {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last observation %+v", what, obs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func setAssignment(t *testing.T, client *fake.Clientset, value string) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(n.Annotations, contract.ConfigSourceAnnotation)
	} else {
		n.Annotations[contract.ConfigSourceAnnotation] = value
	}
	if _, err := client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hasConfigMap(name string) func(reconciler.Observation) bool {
	return func(o reconciler.Observation) bool { return o.ConfigMap != nil && o.ConfigMap.Name == name }
}

func TestSourceFollowsTheAssignment(t *testing.T) {
	client := fake.NewClientset(node("ns-a/kubelet-a"), configMap("ns-a", "kubelet-a"), configMap("ns-b", "kubelet-b"))
	var changes atomic.Int64
	s, err := New(kubeclienttest.Wrap(client), "node-1", Options{}, func() { changes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	obs := eventually(t, s, "assigned ConfigMap A", hasConfigMap("kubelet-a"))
	if !obs.Online || obs.KubeletVersion == nil || obs.KubeletVersion.String() != "1.37.2" {
		t.Fatalf("observation %+v", obs)
	}

	setAssignment(t, client, "ns-b/kubelet-b")
	eventually(t, s, "reassigned to B", hasConfigMap("kubelet-b"))

	setAssignment(t, client, "ns-b/missing")
	eventually(t, s, "a missing ConfigMap", func(o reconciler.Observation) bool {
		return o.Assignment != nil && o.Assignment.ConfigMap.Name == "missing" && apierrors.IsNotFound(o.ConfigMapErr)
	})

	setAssignment(t, client, "not a reference")
	eventually(t, s, "a malformed assignment", func(o reconciler.Observation) bool { return o.AssignmentErr != nil })

	setAssignment(t, client, "")
	eventually(t, s, "no assignment", func(o reconciler.Observation) bool { return o.Online && o.Assignment == nil && o.AssignmentErr == nil })
	s.mu.Lock()
	if s.cm != nil {
		t.Error("a ConfigMap watch outlived the assignment")
	}
	s.mu.Unlock()
	if changes.Load() == 0 {
		t.Error("no change was signalled")
	}

	// Only named lists and watches were made.
	for _, action := range client.Actions() {
		verb := action.GetVerb()
		if verb != "list" && verb != "watch" {
			continue
		}
		var selector string
		switch a := action.(type) {
		case k8stesting.ListActionImpl:
			selector = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchActionImpl:
			selector = a.GetWatchRestrictions().Fields.String()
		}
		if !strings.HasPrefix(selector, "metadata.name=") {
			t.Errorf("%s %s without a name selector (%q)", verb, action.GetResource().Resource, selector)
		}
	}
	cancel()
	<-done
}

func TestRapidReassignmentsLeakNothing(t *testing.T) {
	client := fake.NewClientset(node(""), configMap("ns-a", "kubelet-a"), configMap("ns-b", "kubelet-b"))
	s, err := New(kubeclienttest.Wrap(client), "node-1", Options{}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	eventually(t, s, "online", func(o reconciler.Observation) bool { return o.Online })
	baseline := runtime.NumGoroutine()

	for i := range 100 {
		name := []string{"ns-a/kubelet-a", "ns-b/kubelet-b"}[i%2]
		setAssignment(t, client, name)
		want := name[strings.Index(name, "/")+1:]
		eventually(t, s, "assignment "+name, hasConfigMap(want))
	}
	eventually(t, s, "the last assignment", hasConfigMap("kubelet-b"))

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+10 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines grew from %d to %d over 100 reassignments", baseline, runtime.NumGoroutine())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
