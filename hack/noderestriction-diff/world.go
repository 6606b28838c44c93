package noderestrictiondiff

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The cluster both deciders look at: two nodes, pods on each and unbound,
// service accounts, claims, volumes and CSI drivers with the audiences the
// token rule follows. The generators draw names from here (and names that
// are nowhere, for the lookups that must fail).
const (
	ownNode   = "n1"
	otherNode = "n2"
	namespace = "apps"
)

// world is the cluster's objects, as v1 types.
type world struct {
	objects []runtime.Object
	pods    []*corev1.Pod
}

func uid(kind, name string) types.UID { return types.UID("uid-" + kind + "-" + name) }

func newWorld() *world {
	w := &world{}
	for _, name := range []string{ownNode, otherNode} {
		w.objects = append(w.objects, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid("node", name)}})
	}
	for _, sa := range []string{"default", "app"} {
		w.objects = append(w.objects, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa, UID: uid("sa", sa)}})
	}
	projected := func(audience string) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, Path: "token"}}}}}
	}
	claim := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	podCert := func(signer string) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: "ED25519", CredentialBundlePath: "b"}}}}}
	}
	ephemeral := corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}}
	ebs := corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}
	pod := func(name, nodeName string, mirror bool, volumes ...corev1.VolumeSource) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid("pod", name), Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{NodeName: nodeName, ServiceAccountName: "app", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}
		if mirror {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "h"}
		}
		for i, v := range volumes {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + string(rune('a'+i)), VolumeSource: v})
		}
		w.pods = append(w.pods, p)
		w.objects = append(w.objects, p)
	}
	pod("web", ownNode, false, projected(""), projected("vault"), podCert("example.com/mesh"))
	pod("remote", otherNode, false, projected(""), podCert("example.com/mesh"))
	pod("pending", "", false, projected(""))
	pod("static", ownNode, true)
	pod("inline", ownNode, false, corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets.example.com"}})
	pod("claimed", ownNode, false, claim("data"))
	pod("scratch", ownNode, false, ephemeral)
	pod("unbound-claim", ownNode, false, claim("unbound"))
	pod("missing-claim", ownNode, false, claim("nowhere"))
	pod("legacy", ownNode, false, ebs)
	for _, d := range []struct{ name, audience string }{
		{"secrets.example.com", "secrets"}, {"disk.example.com", "disk"}, {"ebs.csi.aws.com", "ebs"},
	} {
		w.objects = append(w.objects, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: d.name},
			Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: d.audience}}}})
	}
	for _, c := range []struct{ name, volume string }{{"data", "pv-data"}, {"scratch-va", "pv-data"}, {"unbound", ""}} {
		w.objects = append(w.objects, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: c.name, UID: uid("pvc", c.name)},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: c.volume}})
	}
	w.objects = append(w.objects, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.example.com", VolumeHandle: "h"}}}})
	return w
}

// granted is what the authorizers answer both deciders, for the verbs by
// which NodeRestriction lets RBAC widen a node's rights: node n1 may request
// tokens for audience "granted", and pod certificates from signer
// example.com/granted.
func granted(user, verb, resource string) bool {
	if user != "system:node:"+ownNode {
		return false
	}
	switch verb {
	case "request-serviceaccounts-token-audience":
		return resource == "granted"
	case "request-serviceaccounts-podcertificate-signer":
		return resource == "example.com:granted"
	}
	return false
}
