package admission

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/config"
)

func rawPod(t *testing.T, pod *corev1.Pod) runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

func mirrorPod(node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "static-" + node,
			Annotations: map[string]string{mirrorPodAnnotation: "hash"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func TestAdmitPod(t *testing.T) {
	n1 := authenticationv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	for _, tc := range []struct {
		name       string
		user       authenticationv1.UserInfo
		op         admissionv1.Operation
		sub        string
		object     *corev1.Pod
		old        *corev1.Pod
		wantRefuse string
	}{
		{name: "a mirror pod of its own", user: n1, op: admissionv1.Create, object: mirrorPod("n1")},
		{name: "not a mirror pod", user: n1, op: admissionv1.Create,
			object: mirrorPod("n1", func(p *corev1.Pod) { p.Annotations = nil }), wantRefuse: "only create mirror pods"},
		{name: "bound to another node", user: n1, op: admissionv1.Create, object: mirrorPod("n2"), wantRefuse: `bound to "n2"`},
		{name: "a ConfigMap volume", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-a"}}}}}
		}), wantRefuse: `configmap "kubelet-a"`},
		{name: "a projected ConfigMap", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-b"}}}}}}}}
		}), wantRefuse: `configmap "kubelet-b"`},
		{name: "an env ConfigMap", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-c"}}}}
		}), wantRefuse: `configmap "kubelet-c"`},
		{name: "a secret key", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}}
		}), wantRefuse: `secret "s"`},
		{name: "a service account", user: n1, op: admissionv1.Create,
			object: mirrorPod("n1", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), wantRefuse: "service account"},
		{name: "owned by another object", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}}
		}), wantRefuse: "owned by ReplicaSet"},
		{name: "owned by its Node", user: n1, op: admissionv1.Create, object: mirrorPod("n1", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1"}}
		})},
		{name: "delete its own", user: n1, op: admissionv1.Delete, old: mirrorPod("n1")},
		{name: "delete another node's", user: n1, op: admissionv1.Delete, old: mirrorPod("n2"), wantRefuse: `bound to "n2"`},
		{name: "status of its own", user: n1, op: admissionv1.Update, sub: "status", old: mirrorPod("n1"), object: mirrorPod("n1")},
		{name: "status of another node's", user: n1, op: admissionv1.Update, sub: "status", old: mirrorPod("n2"), object: mirrorPod("n2"), wantRefuse: `bound to "n2"`},
		{name: "update the spec", user: n1, op: admissionv1.Update, old: mirrorPod("n1"), object: mirrorPod("n1"), wantRefuse: "only creates and deletes mirror pods"},
		{name: "evict", user: n1, op: admissionv1.Create, sub: "eviction", wantRefuse: "pods/eviction"},
		{name: "a node without a name", user: authenticationv1.UserInfo{Username: "system:node:", Groups: []string{"system:nodes"}},
			op: admissionv1.Create, object: mirrorPod(""), wantRefuse: "does not name a node"},
		{name: "not a node", user: authenticationv1.UserInfo{Username: "alice"}, op: admissionv1.Create, object: &corev1.Pod{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &admissionv1.AdmissionRequest{
				UserInfo: tc.user, Operation: tc.op, SubResource: tc.sub, Namespace: "kube-system", Name: "p",
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			}
			if tc.object != nil {
				req.Object = rawPod(t, tc.object)
			}
			if tc.old != nil {
				req.OldObject = rawPod(t, tc.old)
			}
			a := New(func() *config.Policy { return &config.Policy{} }, nil, nil)
			got := a.Admit(t.Context(), req)
			if tc.wantRefuse == "" {
				if !got.Allowed {
					t.Fatalf("refused: %s: %s", got.Rule, got.Message)
				}
				return
			}
			if got.Allowed || !strings.Contains(got.Message, tc.wantRefuse) {
				t.Fatalf("got %+v, want a refusal mentioning %q", got, tc.wantRefuse)
			}
		})
	}
}

func TestDecodePodRefusesDuplicateFields(t *testing.T) {
	raw := runtime.RawExtension{Raw: []byte(`{"spec":{"nodeName":"n1","nodeName":"n2"}}`)}
	if _, err := decodePod(raw, "object"); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate nodeName: %v", err)
	}
	if _, err := decodePod(runtime.RawExtension{}, "object"); err == nil {
		t.Fatal("no object: no error")
	}
}
