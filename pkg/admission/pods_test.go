package admission

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// mirrorPod is a mirror pod of node as its kubelet creates one: bound to
// it, owned by its Node as controller.
func mirrorPod(node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "static-" + node,
			Annotations:     map[string]string{mirrorPodAnnotation: "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n1UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func withVolume(source corev1.VolumeSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v", VolumeSource: source})
	}
}

func TestAdmitPod(t *testing.T) {
	boundToN2 := mirrorPod("n2")
	boundToN2.Name = "on-n2"
	a := clusterAdmitter(t, nil, node("n1", n1UID), boundToN2, mirrorPod("n1"))
	create := func(pod *corev1.Pod, want string) write {
		return write{user: nodeN1, op: admissionv1.Create, res: "pods", namespace: "kube-system", object: pod, wantRefusal: want}
	}
	status := func(old, pod *corev1.Pod, want string) write {
		return write{user: nodeN1, op: admissionv1.Update, res: "pods", sub: "status", namespace: "kube-system", name: old.Name,
			old: old, object: pod, wantRefusal: want}
	}
	eviction := func(name string, want string) write {
		return write{user: nodeN1, op: admissionv1.Create, res: "pods", sub: "eviction", namespace: "kube-system", name: name,
			object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}, wantRefusal: want}
	}
	run(t, a, map[string]write{
		"a mirror pod of its own": create(mirrorPod("n1"), ""),
		"not a mirror pod":        create(mirrorPod("n1", func(p *corev1.Pod) { p.Annotations = nil }), "only create mirror pods"),
		"bound to another node":   create(mirrorPod("n2"), `bound to "n2"`),
		"no owner": create(mirrorPod("n1", func(p *corev1.Pod) { p.OwnerReferences = nil }),
			"exactly one owner reference"),
		"two owners": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: n1UID})
		}), "exactly one owner reference"),
		"owned by another object": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.OwnerReferences[0] = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}
		}), "owned by apps/v1 ReplicaSet rs"),
		"owned by another node": create(mirrorPod("n1", func(p *corev1.Pod) { p.OwnerReferences[0].Name = "n2" }), "owned by v1 Node n2"),
		"owned, not as controller": create(mirrorPod("n1", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }),
			"is its controller"),
		"blocking its owner's deletion": create(mirrorPod("n1", func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) }),
			"blockOwnerDeletion"),
		"owned by its Node with a wrong UID": create(mirrorPod("n1", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "uid-of-old-n1" }),
			`UID "uid-of-old-n1"`),
		"a ConfigMap volume": create(mirrorPod("n1", withVolume(corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-a"}}})), `configmap "kubelet-a"`),
		"a projected ConfigMap": create(mirrorPod("n1", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-b"}}}}}})), `configmap "kubelet-b"`),
		"a projected downward API only": create(mirrorPod("n1", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{}}}}})), ""),
		"a host path": create(mirrorPod("n1", withVolume(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes"}})), ""),
		"a CephFS secret": create(mirrorPod("n1", withVolume(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{
			Monitors: []string{"m"}, SecretRef: &corev1.LocalObjectReference{Name: "ceph"}}})), `secret "ceph"`),
		"a CSI volume":              create(mirrorPod("n1", withVolume(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}})), `csidriver "d"`),
		"a volume of no known type": create(mirrorPod("n1", withVolume(corev1.VolumeSource{})), "type this webhook does not know"),
		"an env ConfigMap": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-c"}}}}
		}), `configmap "kubelet-c"`),
		"an env var from a ConfigMap in an ephemeral container": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Env: []corev1.EnvVar{{Name: "E",
				ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-d"}, Key: "k"}}}}}}}
		}), `configmap "kubelet-d"`),
		"a secret key": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}}
		}), `secret "s"`),
		"a service account": create(mirrorPod("n1", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), "service account"),
		"a resource claim": create(mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
		}), `resourceclaim "gpu"`),

		"delete its own": {user: nodeN1, op: admissionv1.Delete, res: "pods", namespace: "kube-system", name: "static-n1", old: mirrorPod("n1")},
		"delete another node's": {user: nodeN1, op: admissionv1.Delete, res: "pods", namespace: "kube-system", name: "on-n2", old: boundToN2,
			wantRefusal: `bound to "n2"`},
		"update the spec": {user: nodeN1, op: admissionv1.Update, res: "pods", namespace: "kube-system", name: "static-n1",
			old: mirrorPod("n1"), object: mirrorPod("n1"), wantRefusal: "only creates and deletes mirror pods"},

		"status of its own":        status(mirrorPod("n1"), mirrorPod("n1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), ""),
		"status of another node's": status(boundToN2, boundToN2, `bound to "n2"`),
		"relabel through status": status(mirrorPod("n1"), mirrorPod("n1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "payments"} }),
			"may not change the labels"),
		"claim statuses through status": status(mirrorPod("n1"), mirrorPod("n1", func(p *corev1.Pod) {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("stolen")}}
		}), "resourceClaimStatuses"),
		"extended claim status through status": status(mirrorPod("n1"), mirrorPod("n1", func(p *corev1.Pod) {
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "x"}
		}), "extendedResourceClaimStatus"),
		"delete through status": {user: nodeN1, op: admissionv1.Delete, res: "pods", sub: "status", namespace: "kube-system", name: "static-n1",
			old: mirrorPod("n1"), wantRefusal: "pods/status"},

		"evict its own":          eviction("static-n1", ""),
		"evict another node's":   eviction("on-n2", `bound to "n2"`),
		"evict a pod not there":  eviction("gone", "not found"),
		"another subresource":    {user: nodeN1, op: admissionv1.Create, res: "pods", sub: "binding", namespace: "kube-system", name: "on-n2", object: &corev1.Binding{}, wantRefusal: "pods/binding"},
		"ephemeral containers":   {user: nodeN1, op: admissionv1.Update, res: "pods", sub: "ephemeralcontainers", namespace: "kube-system", name: "static-n1", old: mirrorPod("n1"), object: mirrorPod("n1"), wantRefusal: "pods/ephemeralcontainers"},
		"an administrator's pod": {user: alice, op: admissionv1.Create, res: "pods", namespace: "default", object: &corev1.Pod{}},
	})
}

func TestPodStatusAllowsClaimStatusesUnchanged(t *testing.T) {
	a := clusterAdmitter(t, nil)
	old := mirrorPod("n1", func(p *corev1.Pod) {
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
	})
	updated := old.DeepCopy()
	updated.Status.Phase = corev1.PodRunning
	run(t, a, map[string]write{"unchanged claims": {user: nodeN1, op: admissionv1.Update, res: "pods", sub: "status",
		namespace: "kube-system", name: old.Name, old: old, object: updated}})
}

func TestDecodePodRefusesDuplicateFields(t *testing.T) {
	req := &admissionv1.AdmissionRequest{Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object: runtime.RawExtension{Raw: []byte(`{"spec":{"nodeName":"n1","nodeName":"n2"}}`)}}
	if _, err := DecodeRequest(req); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate nodeName: %v", err)
	}
	if _, err := required[corev1.Pod](nil, "object"); err == nil {
		t.Fatal("no object: no error")
	}
}
