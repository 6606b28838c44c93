package kubeclient_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
)

// TestEventSink: each Event goes to its own namespace, whatever the
// client's, with the verb the broadcaster asked for.
func TestEventSink(t *testing.T) {
	clientset := fake.NewClientset()
	sink := kubeclient.NewEventSink(context.Background(), kubeclienttest.Wrap(clientset))
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-1.1"}, Reason: "KubeletConfigApplied", Count: 1}
	if _, err := sink.Create(event); err != nil {
		t.Fatal(err)
	}
	event.Count = 2
	if _, err := sink.Update(event); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Patch(event, []byte(`{"count":3}`)); err != nil {
		t.Fatal(err)
	}
	got, err := clientset.CoreV1().Events("default").Get(context.Background(), "node-1.1", metav1.GetOptions{})
	if err != nil || got.Count != 3 {
		t.Fatalf("the Event after create, update and patch: %+v, %v", got, err)
	}
	var verbs []string
	for _, action := range clientset.Actions() {
		if action.GetNamespace() != "default" {
			t.Errorf("%s in namespace %q, want default", action.GetVerb(), action.GetNamespace())
		}
		verbs = append(verbs, action.GetVerb())
		if patch, ok := action.(k8stesting.PatchAction); ok && string(patch.GetPatchType()) != "application/strategic-merge-patch+json" {
			t.Errorf("patch type %s, want a strategic merge patch", patch.GetPatchType())
		}
	}
	if want := []string{"create", "update", "patch", "get"}; !slices.Equal(verbs, want) {
		t.Errorf("verbs %v, want %v", verbs, want)
	}
}
