package noderestrictiondiff

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var coreV1 = schema.GroupVersion{Version: "v1"}

// pod is a write of pods itself: mostly a mirror pod's creation, varied in
// its binding, owners and references; else a delete or an update of a pod
// in the world, or another subresource.
func (g *generator) pod() *nodeWrite {
	switch n := g.r.IntN(10); {
	case n < 6:
		p := g.randomPod()
		wr := write("create a pod", coreV1, "pods", "Pod").withObjects(admissionv1.Create, p.Name, p, nil)
		wr.namespace = p.Namespace
		return wr
	case n < 8:
		old := pick(g, g.w.pods...).DeepCopy()
		op := g.operation(admissionv1.Delete)
		updated := old.DeepCopy()
		updated.Labels = map[string]string{"app": "changed"}
		wr := write("write a pod of the world", coreV1, "pods", "Pod").withObjects(op, old.Name, updated, old)
		wr.namespace = old.Namespace
		return wr
	default:
		old := pick(g, g.w.pods...).DeepCopy()
		sub := pick(g, "binding", "ephemeralcontainers", "resize", "proxy")
		wr := write("write pods/"+sub, coreV1, "pods", "Pod")
		wr.subresource, wr.namespace = sub, old.Namespace
		if sub == "binding" {
			binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name},
				Target: corev1.ObjectReference{Kind: "Node", Name: pick(g, ownNode, otherNode)}}
			wr.kind = coreV1.WithKind("Binding")
			return wr.withObjects(admissionv1.Create, old.Name, binding, nil)
		}
		return wr.withObjects(g.operation(admissionv1.Update), old.Name, old.DeepCopy(), old)
	}
}

// randomPod varies what the creation rule reads: the mirror annotation, the
// binding, the owner references and every kind of API reference.
func (g *generator) randomPod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, namespace, "kube-system"), Name: fmt.Sprintf("p-%d", g.r.IntN(1000))},
		Spec:       corev1.PodSpec{NodeName: pick(g, ownNode, ownNode, ownNode, otherNode, ""), Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	if !g.oneIn(6) {
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "h"}
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: ownNode, UID: uid("node", ownNode), Controller: ptr.To(true)}
	switch g.r.IntN(12) {
	case 0:
	case 1:
		owner.UID = "uid-of-a-deleted-node"
	case 2:
		owner.Controller = nil
	case 3:
		owner.Controller = ptr.To(false)
	case 4:
		owner.BlockOwnerDeletion = ptr.To(true)
	case 5:
		owner.BlockOwnerDeletion = ptr.To(false)
	case 6:
		owner.Kind, owner.APIVersion = "ReplicaSet", "apps/v1"
	case 7:
		owner.Name, owner.UID = otherNode, uid("node", otherNode)
	case 8:
		owner.APIVersion = "v1beta1"
	}
	switch g.r.IntN(10) {
	case 0:
	case 1:
		p.OwnerReferences = []metav1.OwnerReference{owner, {APIVersion: "v1", Kind: "Node", Name: ownNode, UID: "other"}}
	default:
		p.OwnerReferences = []metav1.OwnerReference{owner}
	}
	if g.oneIn(8) {
		p.Spec.ServiceAccountName = pick(g, "default", "app")
	}
	if g.oneIn(8) {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pick(g, "", "pull")}}
	}
	if g.oneIn(10) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("claim")}}
	}
	if g.oneIn(4) {
		g.addEnvReference(&p.Spec.Containers[0])
	}
	if g.oneIn(10) {
		ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "i"}}
		c := corev1.Container(ec.EphemeralContainerCommon)
		g.addEnvReference(&c)
		ec.EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{ec}
	}
	for i := range g.r.IntN(3) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: g.volumeSource()})
	}
	return p
}

func (g *generator) addEnvReference(c *corev1.Container) {
	name := pick(g, "", "cfg")
	switch g.r.IntN(4) {
	case 0:
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	case 1:
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	case 2:
		c.Env = []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}}
	default:
		c.Env = []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}}
	}
}

// volumeSource is one of the volume types, with and without the secrets
// those that take one can name.
func (g *generator) volumeSource() corev1.VolumeSource {
	secret := func() *corev1.LocalObjectReference {
		if g.coin() {
			return nil
		}
		return &corev1.LocalObjectReference{Name: "s"}
	}
	projected := func(p corev1.VolumeProjection) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{p}}}
	}
	switch g.r.IntN(22) {
	case 0:
		return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes"}}
	case 1:
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	case 2:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}
	case 3:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}
	case 4:
		return projected(corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{}})
	case 5:
		return projected(corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}})
	case 6:
		return projected(corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}})
	case 7:
		return projected(corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}})
	case 8:
		return projected(corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "b"}})
	case 9:
		return corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets.example.com"}}
	case 10:
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}
	case 11:
		return corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}
	case 12:
		return corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}, SecretRef: secret()}}
	case 13:
		return corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "s", ShareName: "share"}}
	case 14:
		return corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "iqn", SecretRef: secret()}}
	case 15:
		return corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i", SecretRef: secret()}}
	case 16:
		return corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "d", SecretRef: secret()}}
	case 17:
		return corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/p"}}
	case 18:
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}
	case 19:
		return corev1.VolumeSource{Glusterfs: &corev1.GlusterfsVolumeSource{EndpointsName: "e", Path: "p"}}
	case 20:
		return corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "i"}}
	default:
		return corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "v", SecretRef: secret()}}
	}
}

// podStatus is a status write of a pod in the world: a routine one, or one
// that relabels the pod or changes its resource claims.
func (g *generator) podStatus() *nodeWrite {
	old := pick(g, g.w.pods...).DeepCopy()
	if g.oneIn(3) {
		old.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: pick(g, nil, ptr.To("claim"))}}
	}
	updated := old.DeepCopy()
	updated.Status.Phase = pick(g, corev1.PodPending, corev1.PodRunning)
	switch g.r.IntN(8) {
	case 0:
		updated.Labels["app"] = "payments"
	case 1:
		updated.Labels["extra"] = "x"
	case 2:
		updated.Labels = nil
	case 3:
		updated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(pick(g, "claim", "other"))}}
	case 4:
		updated.Status.ResourceClaimStatuses = nil
	case 5:
		updated.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "x",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "r"}}}
	case 6:
		updated.Status.NodeAllocatableResourceClaimStatuses = []corev1.NodeAllocatableResourceClaimStatus{{ResourceClaimName: "x", Containers: []string{"c"}}}
	}
	wr := write("update a pod's status", coreV1, "pods", "Pod")
	wr.subresource, wr.namespace = "status", old.Namespace
	return wr.withObjects(g.operation(admissionv1.Update), old.Name, updated, old)
}

// podEviction evicts a pod of the world, or one that is nowhere, naming it
// in the request or only in the Eviction.
func (g *generator) podEviction() *nodeWrite {
	name := pick(g, g.w.pods...).Name
	if g.oneIn(8) {
		name = "ghost"
	}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	wr := write("evict a pod", coreV1, "pods", "Eviction")
	wr.kind = policyv1.SchemeGroupVersion.WithKind("Eviction")
	wr.subresource, wr.namespace = "eviction", namespace
	requestName := name
	if g.oneIn(4) {
		requestName = ""
	}
	op := g.operation(admissionv1.Create)
	wr.withObjects(op, requestName, eviction, eviction)
	return wr
}
