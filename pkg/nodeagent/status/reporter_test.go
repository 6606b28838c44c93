package status

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
)

func newNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{"other": "kept"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}},
	}
}

func getNode(t *testing.T, client *fake.Clientset) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

func countPatches(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func TestReporterWritesAnnotationAndCondition(t *testing.T) {
	client := fake.NewClientset(newNode())
	cached := func() *corev1.Node { return getNode(t, client) }
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", cached, nil)
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return clock }

	ref := &contract.ConfigMapVersion{Namespace: "kube-system", Name: "a", UID: "u", ResourceVersion: "1"}
	report := Report{
		Status:    contract.ConfigStatus{Assigned: ref, Active: ref},
		Condition: Condition{Status: corev1.ConditionFalse, Reason: contract.ReasonTrialInProgress, Message: "on trial"},
	}
	if err := r.Write(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, client)
	var got contract.ConfigStatus
	if err := json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &got); err != nil {
		t.Fatalf("annotation: %v", err)
	}
	if *got.Active != *ref || got.LastKnownGood != nil || node.Annotations["other"] != "kept" {
		t.Fatalf("annotations = %v", node.Annotations)
	}
	cond := findCondition(node)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != contract.ReasonTrialInProgress || !cond.LastTransitionTime.Time.Equal(clock) {
		t.Fatalf("condition = %+v", cond)
	}
	if len(node.Status.Conditions) != 2 {
		t.Fatalf("the kubelet's conditions were not kept: %+v", node.Status.Conditions)
	}

	// Same report: no write at all.
	before := countPatches(client)
	if err := r.Write(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	if countPatches(client) != before {
		t.Fatal("an unchanged report was written again")
	}

	// Same status, new message: the transition time stays.
	clock = clock.Add(time.Minute)
	report.Condition.Message = "still on trial"
	if err := r.Write(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	cond = findCondition(getNode(t, client))
	if !cond.LastTransitionTime.Time.Equal(clock.Add(-time.Minute)) || !cond.LastHeartbeatTime.Time.Equal(clock) {
		t.Fatalf("times after a message change: %+v", cond)
	}
	// New status: the transition time moves.
	report.Condition = Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonConfigActive, Message: "ok"}
	if err := r.Write(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	if cond = findCondition(getNode(t, client)); !cond.LastTransitionTime.Time.Equal(clock) {
		t.Fatalf("transition time after a status change: %+v", cond)
	}
}

func TestReporterRetriesConflicts(t *testing.T) {
	client := fake.NewClientset(newNode())
	conflicts := 2
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "node-1", nil)
		}
		return false, nil, nil
	})
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", func() *corev1.Node { return nil }, nil)
	err := r.Write(context.Background(), Report{Condition: Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig}})
	if err != nil {
		t.Fatalf("conflicts were not retried: %v", err)
	}
	if conflicts != 0 {
		t.Fatal("the reactor was not reached")
	}
}

func TestReporterReportsOtherErrors(t *testing.T) {
	client := fake.NewClientset(newNode())
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-1", nil)
	})
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", func() *corev1.Node { return nil }, nil)
	if err := r.Write(context.Background(), Report{}); !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want the Forbidden error", err)
	}
}

func TestReporterEvents(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	r := NewReporter(kubeclienttest.Wrap(fake.NewClientset()), "node-1", func() *corev1.Node { return nil }, recorder)
	r.Event(context.Background(), Event{Type: corev1.EventTypeWarning, Reason: contract.ReasonRolledBack, Message: "kubelet unhealthy"})
	if got := <-recorder.Events; got != "Warning RolledBack kubelet unhealthy" {
		t.Fatalf("event %q", got)
	}
	// A nil reporter (no client yet) still logs without panicking.
	var none *Reporter
	none.Event(context.Background(), Event{Type: corev1.EventTypeNormal, Reason: "x", Message: "y"})
}

func TestReporterRunWritesTheLatest(t *testing.T) {
	client := fake.NewClientset(newNode())
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", func() *corev1.Node { return nil }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Set(Report{Condition: Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig}})
	deadline := time.Now().Add(10 * time.Second)
	for findCondition(getNode(t, client)) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the report was not written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// A report that changes both the annotation and the condition is one write
// of nodes/status: the Node passes in one event, never half-reported.
func TestReporterWritesAReportInOnePatch(t *testing.T) {
	client := fake.NewClientset(newNode())
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", func() *corev1.Node { return getNode(t, client) }, nil)
	ref := &contract.ConfigMapVersion{Namespace: "kube-system", Name: "a", UID: "u", ResourceVersion: "1"}
	client.ClearActions()
	err := r.Write(context.Background(), Report{
		Status:    contract.ConfigStatus{Assigned: ref, Active: ref, LastKnownGood: ref},
		Condition: Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonConfigActive},
	})
	if err != nil {
		t.Fatal(err)
	}
	var patches []k8stesting.PatchAction
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, p)
		}
	}
	if len(patches) != 1 || patches[0].GetSubresource() != "status" {
		t.Fatalf("patches = %v, want one of nodes/status", patches)
	}
	node := getNode(t, client)
	if node.Annotations[contract.ConfigStatusAnnotation] == "" || findCondition(node) == nil {
		t.Fatalf("the one patch did not carry both: annotations %v, conditions %v", node.Annotations, node.Status.Conditions)
	}
}

// An apiserver that drops metadata from a status write (stood in for by a
// reactor: v1.37's nodes/status keeps it) still gets the annotation, on
// the Node itself.
func TestReporterWritesTheAnnotationOnTheNodeWhenStatusDropsIt(t *testing.T) {
	client := fake.NewClientset(newNode())
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		node, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "node-1")
		if err != nil {
			return true, nil, err
		}
		node = node.DeepCopyObject()
		cond := corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig}
		node.(*corev1.Node).Status.Conditions = append(node.(*corev1.Node).Status.Conditions, cond)
		return true, node, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), node, "")
	})
	r := NewReporter(kubeclienttest.Wrap(client), "node-1", func() *corev1.Node { return nil }, nil)
	if err := r.Write(context.Background(), Report{Condition: Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig}}); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, client)
	if node.Annotations[contract.ConfigStatusAnnotation] == "" || findCondition(node) == nil {
		t.Fatalf("annotations %v, conditions %v: want both", node.Annotations, node.Status.Conditions)
	}
	if n := countPatches(client); n != 2 {
		t.Errorf("%d patches, want the status write and the annotation's", n)
	}
}
