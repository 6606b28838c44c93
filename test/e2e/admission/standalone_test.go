package admission_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestANodeCannotCreateAnotherNodesLease: a node's Lease in
// kube-node-lease is its heartbeat; one that created another node's would
// keep that node looking alive to the node lifecycle controller. (The Node
// authorizer already keeps a node from renewing or deleting another's; it
// cannot tell whose a new Lease is.)
func TestANodeCannotCreateAnotherNodesLease(t *testing.T) {
	for _, e := range standaloneCases("node leases") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("lease-a")
			leases := h.nodeClient(a).CoordinationV1().Leases("kube-node-lease")
			lease := func(name string) *coordinationv1.Lease {
				return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(a), LeaseDurationSeconds: ptr[int32](40)}}
			}
			_, err := leases.Create(h.ctx, lease(h.pfx+"lease-b"), metav1.CreateOptions{})
			refused(t, "creating another node's Lease", err, e.rule)

			own, err := leases.Create(h.ctx, lease(a), metav1.CreateOptions{})
			allowed(t, "creating its own Lease", err)
			t.Cleanup(func() {
				_ = h.admin.CoordinationV1().Leases("kube-node-lease").Delete(context.Background(), a, metav1.DeleteOptions{})
			})
			own.Spec.RenewTime = &metav1.MicroTime{Time: own.CreationTimestamp.Time}
			_, err = leases.Update(h.ctx, own, metav1.UpdateOptions{})
			allowed(t, "renewing its own Lease", err)
		})
	}
}

// TestANodeCannotCreateAnotherNodesCSINode: a CSINode tells the scheduler
// which CSI drivers run on a node and how many volumes each may attach;
// another node's would misplace pods and volumes.
func TestANodeCannotCreateAnotherNodesCSINode(t *testing.T) {
	for _, e := range standaloneCases("node CSINodes") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("csinode-a")
			csiNodes := h.nodeClient(a).StorageV1().CSINodes()
			csiNode := func(name string) *storagev1.CSINode {
				return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}}}
			}
			_, err := csiNodes.Create(h.ctx, csiNode(h.pfx+"csinode-b"), metav1.CreateOptions{})
			refused(t, "creating another node's CSINode", err, e.rule)

			_, err = csiNodes.Create(h.ctx, csiNode(a), metav1.CreateOptions{})
			allowed(t, "creating its own CSINode", err)
			t.Cleanup(func() { _ = h.admin.StorageV1().CSINodes().Delete(context.Background(), a, metav1.DeleteOptions{}) })
		})
	}
}

// csrFor is a certificate request for CN cn with the node's key usages.
func csrFor(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: []string{"node.example"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestANodeCannotRequestAnotherNodesServingCertificate: once signed, a
// kubelet serving certificate in another node's name would let a node
// answer the apiserver's exec, attach and logs requests as that node.
func TestANodeCannotRequestAnotherNodesServingCertificate(t *testing.T) {
	for _, e := range standaloneCases("node CSRs") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("csr-a")
			csrs := h.nodeClient(a).CertificatesV1().CertificateSigningRequests()
			csr := func(name, cn string) *certificatesv1.CertificateSigningRequest {
				return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName, Request: csrFor(t, cn),
						Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}}
			}
			_, err := csrs.Create(h.ctx, csr(h.pfx+"for-b", "system:node:"+h.pfx+"csr-b"), metav1.CreateOptions{})
			refused(t, "requesting a serving certificate for another node", err, e.rule)

			_, err = csrs.Create(h.ctx, csr(h.pfx+"for-a", "system:node:"+a), metav1.CreateOptions{})
			allowed(t, "requesting its own serving certificate", err)
			t.Cleanup(func() {
				_ = h.admin.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), h.pfx+"for-a", metav1.DeleteOptions{})
			})
		})
	}
}

// TestANodeCannotPublishAnotherNodesResourceSlice: a ResourceSlice offers a
// node's devices to the scheduler; one for another node would offer devices
// that node does not have.
func TestANodeCannotPublishAnotherNodesResourceSlice(t *testing.T) {
	for _, e := range standaloneCases("node ResourceSlices") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a, b := h.mustRegister("slice-a"), h.mustRegister("slice-b")
			slices := h.nodeClient(a).ResourceV1().ResourceSlices()
			slice := func(nodeName string) *resourcev1.ResourceSlice {
				return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpu"},
					Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr(nodeName),
						Pool: resourcev1.ResourcePool{Name: nodeName, ResourceSliceCount: 1}}}
			}
			_, err := slices.Create(h.ctx, slice(b), metav1.CreateOptions{})
			refused(t, "publishing a ResourceSlice for another node", err, e.rule)

			_, err = slices.Create(h.ctx, slice(a), metav1.CreateOptions{})
			allowed(t, "publishing its own ResourceSlice", err)
			t.Cleanup(func() {
				_ = h.admin.ResourceV1().ResourceSlices().Delete(context.Background(), a+"-gpu", metav1.DeleteOptions{})
			})
		})
	}
}

// podUsing is a pod bound to node, as the scheduler binds one, that runs as
// service account "app" (created here) with a projected token of the
// apiserver's audience as the kubelet mounts one, and the given volumes. Not
// a mirror pod: the Node authorizer follows no mirror pod's references, and
// lets a node ask for tokens and write claims only through those.
func (h *harness) podUsing(node, name string, volumes ...corev1.Volume) *corev1.Pod {
	h.t.Helper()
	if _, err := h.admin.CoreV1().ServiceAccounts("default").Create(h.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	volumes = append(volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: h.pfx + name},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "app", AutomountServiceAccountToken: ptr(false), Volumes: volumes,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause"}}},
	}
}

// TestANodeCannotRequestATokenBoundToNoPod: a node asks for the tokens of
// the service accounts its pods run as, bound to those pods; a token bound
// to no pod would outlive them all, and keep that service account's rights
// for as long as it lives.
func TestANodeCannotRequestATokenBoundToNoPod(t *testing.T) {
	for _, e := range standaloneCases("node tokens") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("token-a")
			pod := h.adminPod(h.podUsing(a, "uses-app"))
			tokens := h.nodeClient(a).CoreV1().ServiceAccounts("default")
			request := func(ref *authenticationv1.BoundObjectReference) func(context.Context) error {
				return func(ctx context.Context) error {
					_, err := tokens.CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
					return err
				}
			}
			// The Node authorizer lets a node ask only for the service
			// accounts of its pods, once its graph has the pod.
			err := h.eventuallyAnswered("the authorizer to see "+pod.Name, request(nil))
			refused(t, "a token bound to no pod", err, e.rule)

			err = h.eventuallyAnswered("a token bound to its pod", request(&authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}))
			allowed(t, "a token bound to its own pod", err)
		})
	}
}

// TestANodeChangesOnlyTheStatusOfAClaim: a node records a volume's new
// size and conditions on the claims its pods use, and changes nothing else
// about them (labels, finalizers, phase), through the status or otherwise.
func TestANodeChangesOnlyTheStatusOfAClaim(t *testing.T) {
	for _, e := range standaloneCases("node PVCs") {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a := h.mustRegister("claim-a")
			claim, err := h.admin.CoreV1().PersistentVolumeClaims("default").Create(h.ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: h.pfx + "data", Labels: map[string]string{"app": "db"}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = h.admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
			})
			h.adminPod(h.podUsing(a, "uses-data", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}))
			claims := h.nodeClient(a).CoreV1().PersistentVolumeClaims("default")

			relabelled := claim.DeepCopy()
			relabelled.Labels["app"] = "payments"
			err = h.eventuallyAnswered("the authorizer to see the claim's pod", func(ctx context.Context) error {
				_, err := claims.UpdateStatus(ctx, relabelled, metav1.UpdateOptions{})
				return err
			})
			refused(t, "relabelling a claim through its status", err, e.rule)

			resized := claim.DeepCopy()
			resized.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
			_, err = claims.UpdateStatus(h.ctx, resized, metav1.UpdateOptions{})
			allowed(t, "recording a claim's new capacity", err)
		})
	}
}
