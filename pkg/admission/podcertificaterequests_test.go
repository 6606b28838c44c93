package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestAdmitPodCertificateRequest(t *testing.T) {
	pod := func(name, nodeName string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: nodeName, ServiceAccountName: "app", Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{
				Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/mesh"}}}}}}}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	granted := func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		return spec.ResourceAttributes.Verb == podCertificateSignerVerb && spec.ResourceAttributes.Resource == "example.com:granted"
	}
	a := clusterAdmitter(t, granted, node("n1", n1UID),
		pod("web", "n1"), pod("elsewhere", "n2"), pod("static", "n1", func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "h"} }),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app", UID: "uid-app"}})
	request := func(mutate func(*certificatesv1.PodCertificateRequestSpec), want string) write {
		spec := certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/mesh", PodName: "web", PodUID: "uid-web",
			ServiceAccountName: "app", ServiceAccountUID: "uid-app", NodeName: "n1", NodeUID: n1UID}
		if mutate != nil {
			mutate(&spec)
		}
		return write{user: nodeN1, op: admissionv1.Create, group: "certificates.k8s.io", res: "podcertificaterequests", namespace: "default",
			object:      &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r"}, Spec: spec},
			wantRefusal: want, wantRuleName: RuleNodePodCertificates}
	}
	run(t, a, map[string]write{
		"for its pod, from the signer it mounts": request(nil, ""),
		"from a signer RBAC grants":              request(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/granted" }, ""),
		"from another signer": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/other" },
			"mounts no pod certificate from signer example.com/other"),
		"in another node's name": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "n2" }, `in the name of node "n2"`),
		"with a wrong node UID":  request(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "x" }, `node UID "x"`),
		"for another node's pod": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "elsewhere", "uid-elsewhere" },
			`runs on "n2"`),
		"with a wrong pod UID": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "x" }, `pod UID "x"`),
		"for a mirror pod": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "static", "uid-static" },
			"mirror pod"),
		"for another service account": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "admin" },
			`service account "admin"`),
		"with a wrong service account UID": request(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountUID = "x" },
			`service account UID "x"`),
		"an update": {user: nodeN1, op: admissionv1.Update, group: "certificates.k8s.io", res: "podcertificaterequests", namespace: "default",
			name: "r", object: &certificatesv1.PodCertificateRequest{}, old: &certificatesv1.PodCertificateRequest{}, wantRefusal: "may only create"},
	})
}
