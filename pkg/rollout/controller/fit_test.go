package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestUnfitNodesAreReportedBeforeAnythingMoves: the controller reads the
// target's configuration and the pods bound to the selected Nodes, and
// reports in the status the Nodes the target would leave unable to hold
// them (each by its own reported capacity), with an Event; a pod's
// requests are all it keeps of it.
func TestUnfitNodesAreReportedBeforeAnythingMoves(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	r := newRollout("r")
	r.Spec.Paused = true
	withCapacity := func(n *corev1.Node, cpu string) *corev1.Node {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")}
		return n
	}
	h := start(t, r, func(kube *fake.Clientset, _ *fakeRollouts) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kubelet-configs", Name: "v2", UID: types.UID("uid-v2"), ResourceVersion: "7",
				Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
			Data: map[string]string{contract.ConfigMapKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeReserved:\n  cpu: 1950m\n"},
		}
		objs := []runtime.Object{cm}
		for i, node := range []string{"small", "small", "big"} {
			objs = append(objs, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d", i)},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
		for _, o := range objs {
			if err := kube.Tracker().Add(o); err != nil {
				t.Fatal(err)
			}
		}
	}, withCapacity(readyNode("small", blue), "2"), withCapacity(readyNode("big", blue), "64"))
	var status v1alpha1.KubeletConfigRolloutStatus
	h.eventually(t, "the unfit Node reported", func() (bool, string) {
		got, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status = got.Status
		return len(got.Status.UnfitNodes) > 0, fmt.Sprint(got.Status.UnfitNodes)
	})
	if len(status.UnfitNodes) != 1 || status.UnfitNodes[0].Name != "small" ||
		!strings.Contains(status.UnfitNodes[0].Message, "cpu: 600m requested, 50m allocatable, 550m short") {
		t.Errorf("unfitNodes %+v, want small alone, short of cpu", status.UnfitNodes)
	}
	pods, err := h.ctrl.podInformer.GetIndexer().ByIndex(nodeNameIndex, "small")
	if err != nil || len(pods) != 2 {
		t.Fatalf("pods cached on small: %d, %v", len(pods), err)
	}
	if pod := pods[0].(*corev1.Pod); len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "requests" {
		t.Errorf("a cached pod keeps more than its requests: %+v", pod.Spec)
	}
}
