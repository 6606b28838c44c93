package admission

import (
	"context"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// BenchmarkConfigMapUpdate is an update of an eligible ConfigMap holding a
// 4 KiB configuration, decided by the built-in rules with a forbidden field
// set (so that the old object's configuration is read too): with the
// checker's outcomes remembered, as a re-apply finds them, and with every
// configuration decoded anew. The difference is what keeps the cache in
// kubeletconfig.Checker.
func BenchmarkConfigMapUpdate(b *testing.B) {
	t := &testing.T{}
	data, err := os.ReadFile("../kubeletconfig/testdata/kubelet-4k.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cm := reviewtest.EligibleConfigMap("x", string(data))
	old := reviewtest.EligibleConfigMap("x", string(data))
	req := reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Update, cm, old).Build(t)
	settings := settings.Default()
	settings.ForbiddenDynamicFields = []string{"staticPodPath"}
	a := newAdmitter(t, settings)
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := admitReview(context.Background(), a, req); !r.Allowed {
				b.Fatal(r.Message)
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.configs = kubeletconfig.NewChecker(1)
			if r := admitReview(context.Background(), a, req); !r.Allowed {
				b.Fatal(r.Message)
			}
		}
	})
}

// BenchmarkAdmitNodeStatusUpdate measures the in-process decision for the
// most frequent request in a cluster, a kubelet's status update, from the
// decoded AdmissionRequest (objects still raw JSON) to the answer.
func BenchmarkAdmitNodeStatusUpdate(b *testing.B) {

	a := newAdmitter(&testing.T{}, &settings.Settings{MinKubeletVersion: version137})
	node := reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"))
	for i := 0; i < 40; i++ {
		node.Status.Images = append(node.Status.Images, reviewtest.Image(i))
	}
	// A kubelet's Node carries managed fields for itself and the control
	// plane; they sit in metadata, which every rule reads.
	fields := `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.0.0/24\"":{}}},"f:status":{"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{}}}}`
	for _, manager := range []string{"kubelet", "kube-controller-manager", "kubeadm"} {
		node.ManagedFields = append(node.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}})
	}
	req := reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "status", "n1", node, node).Build(&testing.T{})
	b.ReportAllocs()
	for b.Loop() {
		if r := admitReview(context.Background(), a, req); !r.Allowed {
			b.Fatal(r.Message)
		}
	}
}
