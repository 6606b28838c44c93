package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The objects of the /validate benchmarks, shared by test/loadtest and the
// stock-OPA comparison in hack/bench so that both measure the same reviews.

// StatusUpdateNode is a Node as a kubelet's status update carries it: 40
// images, four conditions and three managed-fields entries (about 8 KB of
// JSON), assigned assigned ("namespace/name").
func StatusUpdateNode(name, assigned string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "10",
		Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux"},
		Annotations: map[string]string{contract.ConfigSourceAnnotation: assigned}}}
	node.Status.NodeInfo.KubeletVersion = KubeletVersion
	for i := range 40 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{SizeBytes: int64(1e6 + i),
			Names: []string{fmt.Sprintf("registry.example.com/team/app-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example.com/team/app-%d:v%d", i, i)}})
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
			Reason: "KubeletHasSufficient" + string(c), Message: "kubelet has sufficient resources"})
	}
	for _, manager := range []string{"kubelet", "kube-controller-manager", "kubeadm"} {
		node.ManagedFields = append(node.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:status":{"f:conditions":{},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{}}}}`)}})
	}
	return node
}

// KubeletConfig4K is a valid KubeletConfiguration of about 4 KiB of YAML.
func KubeletConfig4K() string {
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	b.WriteString("kubeAPIQPS: 50\nkubeAPIBurst: 100\nserializeImagePulls: false\nmaxParallelImagePulls: 5\n")
	b.WriteString("evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 10%\n")
	b.WriteString("systemReserved:\n  cpu: 500m\n  memory: 1Gi\n")
	b.WriteString("allowedUnsafeSysctls:\n")
	for i := 0; b.Len() < 4000; i++ {
		fmt.Fprintf(&b, "  - net.ipv4.conf.interface%d.rp_filter\n", i)
	}
	return b.String()
}

// PoolConfigMap is an eligible ConfigMap holding KubeletConfig4K followed
// by extra (more YAML fields).
func PoolConfigMap(namespace, name, extra string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: map[string]string{contract.ConfigMapKey: KubeletConfig4K() + extra},
	}
}
