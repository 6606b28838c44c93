package noderestrictiondiff

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// lease writes a Lease of this node or another, in kube-node-lease or not.
func (g *generator) lease() *nodeWrite {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: pick(g, "kube-node-lease", "kube-node-lease", "kube-system"), Name: pick(g, ownNode, ownNode, otherNode)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(ownNode)}}
	wr := write("write a Lease", coordinationv1.SchemeGroupVersion, "leases", "Lease")
	wr.namespace = l.Namespace
	return wr.withObjects(g.operation(admissionv1.Create, admissionv1.Update), l.Name, l, l.DeepCopy())
}

// csiNode writes a CSINode of this node or another, or its status.
func (g *generator) csiNode() *nodeWrite {
	c := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: pick(g, ownNode, ownNode, otherNode)},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "disk.example.com", NodeID: "id"}}}}
	updated := c.DeepCopy()
	if g.coin() {
		updated.Spec.Drivers[0].Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To[int32](8)}
	}
	wr := write("write a CSINode", storagev1.SchemeGroupVersion, "csinodes", "CSINode")
	if g.oneIn(4) {
		wr.subresource = "status"
	}
	return wr.withObjects(g.operation(admissionv1.Create, admissionv1.Update), c.Name, updated, c)
}

var (
	csrKeyOnce sync.Once
	csrKey     *ecdsa.PrivateKey
)

// csrRequest is a PEM certificate request for cn, or bytes that are not
// one.
func (g *generator) csrRequest(cn string) []byte {
	if g.oneIn(10) {
		return []byte("not a certificate request")
	}
	csrKeyOnce.Do(func() { csrKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader) })
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, csrKey)
	if err != nil {
		panic(err)
	}
	blockType := "CERTIFICATE REQUEST"
	if g.oneIn(20) {
		blockType = "NEW CERTIFICATE REQUEST"
	}
	return pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
}

// csr asks a signer for a certificate in this node's name or another's.
func (g *generator) csr() *nodeWrite {
	signer := pick(g, "kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet", "example.com/signer")
	cn := pick(g, "system:node:"+ownNode, "system:node:"+ownNode, "system:node:"+otherNode, "system:node:", "admin")
	c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-" + cn},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: g.csrRequest(cn),
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}}}
	wr := write("ask for a certificate", certificatesv1.SchemeGroupVersion, "certificatesigningrequests", "CertificateSigningRequest")
	return wr.withObjects(g.operation(admissionv1.Create), c.Name, c, c.DeepCopy())
}

// resourceSlice publishes devices for this node, another, or none.
func (g *generator) resourceSlice() *nodeWrite {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}}}
	switch g.r.IntN(4) {
	case 0:
		s.Spec.AllNodes = ptr.To(true)
	case 1:
		s.Spec.NodeName = ptr.To(otherNode)
	default:
		s.Spec.NodeName = ptr.To(ownNode)
	}
	wr := write("write a ResourceSlice", resourcev1.SchemeGroupVersion, "resourceslices", "ResourceSlice")
	return wr.withObjects(g.operation(admissionv1.Create, admissionv1.Delete), s.Name, s, s.DeepCopy())
}

// token asks for a service account's token bound to a pod of the world (or
// to something else, or nothing), for an audience its pod uses, RBAC
// grants, or neither.
func (g *generator) token() *nodeWrite {
	pod := pick(g, g.w.pods...)
	ref := &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	switch g.r.IntN(12) {
	case 0:
		ref = nil
	case 1:
		ref.Kind, ref.Name = "Secret", "s"
	case 2:
		ref.APIVersion = "v2"
	case 3:
		ref.Name = ""
	case 4:
		ref.UID = ""
	case 5:
		ref.UID = "uid-of-a-deleted-pod"
	case 6:
		ref.Name, ref.UID = "ghost", "uid-ghost"
	}
	var audiences []string
	switch n := g.r.IntN(8); {
	case n < 2:
	case n < 7:
		audiences = []string{pick(g, "", "vault", "secrets", "disk", "ebs", "granted", "payments", apiAudience)}
	default:
		audiences = []string{"vault", "disk"}
	}
	tr := &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "app"},
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, BoundObjectRef: ref}}
	wr := write("ask for a token", corev1.SchemeGroupVersion, "serviceaccounts", "TokenRequest")
	wr.kind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
	wr.subresource, wr.namespace = "token", namespace
	if g.oneIn(8) {
		wr.subresource = ""
	}
	op := g.operation(admissionv1.Create)
	if wr.subresource == "" || op != admissionv1.Create {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "app", UID: uid("sa", "app")}}
		wr.kind = corev1.SchemeGroupVersion.WithKind("ServiceAccount")
		return wr.withObjects(op, "app", sa, sa.DeepCopy())
	}
	return wr.withObjects(op, "app", tr, nil)
}

// pvc writes a claim's status (what the kubelet records after an
// expansion, or more), or the claim itself.
func (g *generator) pvc() *nodeWrite {
	old := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data", UID: uid("pvc", "data"), ResourceVersion: "7", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	updated := old.DeepCopy()
	for range 1 + g.r.IntN(2) {
		switch g.r.IntN(10) {
		case 0:
			updated.ResourceVersion = ""
		case 1:
			updated.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		case 2:
			updated.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
		case 3:
			updated.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		case 4:
			updated.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizeInProgress}
		case 5:
			updated.Labels["app"] = "payments"
		case 6:
			updated.Finalizers = []string{"example.com/keep"}
		case 7:
			updated.Status.Phase = corev1.ClaimLost
		case 8:
			updated.Annotations = map[string]string{"example.com/a": "b"}
		default:
			updated.Status.CurrentVolumeAttributesClassName = ptr.To("fast")
		}
	}
	wr := write("write a claim", corev1.SchemeGroupVersion, "persistentvolumeclaims", "PersistentVolumeClaim")
	wr.namespace = namespace
	if !g.oneIn(5) {
		wr.subresource = "status"
	}
	return wr.withObjects(g.operation(admissionv1.Update), old.Name, updated, old)
}

// podCertificateRequest asks for a certificate for a pod of the world,
// naming (or misnaming) the pod, its service account and the node.
func (g *generator) podCertificateRequest() *nodeWrite {
	pod := pick(g, g.w.pods...)
	spec := certificatesv1.PodCertificateRequestSpec{
		SignerName: pick(g, "example.com/mesh", "example.com/mesh", "example.com/granted", "example.com/other"),
		PodName:    pod.Name, PodUID: pod.UID,
		ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: uid("sa", pod.Spec.ServiceAccountName),
		NodeName: types.NodeName(ownNode), NodeUID: uid("node", ownNode),
		StubPKCS10Request: []byte("r"),
	}
	switch g.r.IntN(10) {
	case 0:
		spec.NodeName, spec.NodeUID = otherNode, uid("node", otherNode)
	case 1:
		spec.NodeUID = "uid-of-a-deleted-node"
	case 2:
		spec.PodUID = "uid-of-a-deleted-pod"
	case 3:
		spec.ServiceAccountName, spec.ServiceAccountUID = "default", uid("sa", "default")
	case 4:
		spec.ServiceAccountUID = "uid-of-a-deleted-sa"
	case 5:
		spec.PodName = "ghost"
	}
	r := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "pcr"}, Spec: spec}
	wr := write("ask for a pod certificate", certificatesv1.SchemeGroupVersion, "podcertificaterequests", "PodCertificateRequest")
	wr.namespace = namespace
	if g.oneIn(10) {
		wr.subresource = "status"
	}
	return wr.withObjects(g.operation(admissionv1.Create), r.Name, r, r.DeepCopy())
}
