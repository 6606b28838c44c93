package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// tokenCluster holds pods using audiences in each way NodeRestriction
// follows: a projected token, an inline CSI volume, a claim's CSI volume,
// an ephemeral volume's claim.
func tokenCluster() []runtime.Object {
	pod := func(name, nodeName string, volumes ...corev1.VolumeSource) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: nodeName, ServiceAccountName: "app"}}
		for i, v := range volumes {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + string(rune('a'+i)), VolumeSource: v})
		}
		return p
	}
	projected := func(audience string) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, Path: "t"}}}}}
	}
	claimSource := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	driver := func(name, audience string) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: audience}}}}
	}
	ephemeral := corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}
	return []runtime.Object{
		pod("web", "n1", projected(""), projected("vault")),
		pod("elsewhere", "n2", projected("")),
		pod("inline", "n1", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets.example.com"}}),
		pod("claimed", "n1", claimSource("data")),
		pod("scratch", "n1", ephemeral),
		pod("unbound", "n1", claimSource("pending")),
		driver("secrets.example.com", "secrets"),
		driver("disk.example.com", "disk"),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scratch-va"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.example.com"}}}},
	}
}

func TestAdmitServiceAccountToken(t *testing.T) {
	granted := func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		a := spec.ResourceAttributes
		return spec.User == "system:node:n1" && a.Verb == tokenAudienceVerb && a.Resource == "granted" && a.Name == "app" && a.Namespace == "default"
	}
	a := clusterAdmitter(t, granted, tokenCluster()...)
	token := func(ref *authenticationv1.BoundObjectReference, audiences []string, want string) write {
		return write{user: nodeN1, op: admissionv1.Create, res: "serviceaccounts", sub: "token", namespace: "default", name: "app",
			object:      &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref, Audiences: audiences}},
			wantRefusal: want, wantRuleName: RuleNodeTokens}
	}
	boundTo := func(name string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID("uid-" + name)}
	}
	run(t, a, map[string]write{
		"bound to its pod, the default audience": token(boundTo("web"), nil, ""),
		"bound to its pod, a projected audience": token(boundTo("web"), []string{"vault"}, ""),
		// What a kubelet sends for a projected token without an audience,
		// as the webhook receives it.
		"no audience, filled in by the apiserver":        token(boundTo("web"), []string{testAPIAudience}, ""),
		"no audience, for a pod without a default token": token(boundTo("inline"), []string{testAPIAudience}, `does not use audience ""`),
		"an inline CSI driver's audience":                token(boundTo("inline"), []string{"secrets"}, ""),
		"a claim's CSI driver's audience":                token(boundTo("claimed"), []string{"disk"}, ""),
		"an ephemeral claim's audience":                  token(boundTo("scratch"), []string{"disk"}, ""),
		"an audience RBAC grants":                        token(boundTo("web"), []string{"granted"}, ""),
		"bound to no object":                             token(nil, nil, "bound to a pod"),
		"bound to a Secret": token(&authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: "s", UID: "u"}, nil,
			"bound to a pod"),
		"bound to a pod without UID": token(&authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web"}, nil, "by UID"),
		"bound to a pod with another UID": token(&authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "old"}, nil,
			`UID is "uid-web"`),
		"bound to another node's pod": token(boundTo("elsewhere"), nil, `runs on "n2"`),
		"bound to a pod not there":    token(boundTo("gone"), nil, "not found"),
		"an audience nothing grants":  token(boundTo("web"), []string{"payments"}, `does not use audience "payments"`),
		"two audiences":               token(boundTo("web"), []string{"vault", ""}, "at most one audience"),
		"a claim without a volume":    token(boundTo("unbound"), []string{"granted"}, "looking for audience"),
		"another subresource": {user: nodeN1, op: admissionv1.Update, res: "serviceaccounts", namespace: "default", name: "app",
			object: &corev1.ServiceAccount{}, old: &corev1.ServiceAccount{}},
	})
}
