package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", ResourceVersion: "7", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestAdmitPVC(t *testing.T) {
	status := func(updated *corev1.PersistentVolumeClaim, want string) write {
		return write{user: nodeN1, op: admissionv1.Update, res: "persistentvolumeclaims", sub: "status", namespace: "default", name: "data",
			old: claim(), object: updated, wantRefusal: want, wantRuleName: RuleNodePVCs}
	}
	run(t, clusterAdmitter(t, nil), map[string]write{
		"capacity and conditions after an expansion": status(claim(func(c *corev1.PersistentVolumeClaim) {
			c.ResourceVersion = ""
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
			c.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
			c.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizeInProgress}
		}), ""),
		"relabel": status(claim(func(c *corev1.PersistentVolumeClaim) { c.Labels["app"] = "payments" }), "may only change status.capacity"),
		"a finalizer": status(claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{"example.com/keep"} }),
			"may only change status.capacity"),
		"the phase": status(claim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost }), "may only change status.capacity"),
		"create a claim": {user: nodeN1, op: admissionv1.Create, res: "persistentvolumeclaims", namespace: "default", object: claim(),
			wantRefusal: "may only update a claim's status"},
		"update a claim": {user: nodeN1, op: admissionv1.Update, res: "persistentvolumeclaims", namespace: "default", name: "data",
			old: claim(), object: claim(), wantRefusal: "may only update a claim's status"},
		"delete a claim": {user: nodeN1, op: admissionv1.Delete, res: "persistentvolumeclaims", namespace: "default", name: "data",
			old: claim(), wantRefusal: "may only update a claim's status"},
		"delete through status": {user: nodeN1, op: admissionv1.Delete, res: "persistentvolumeclaims", sub: "status", namespace: "default",
			name: "data", old: claim(), wantRefusal: "persistentvolumeclaims/status"},
	})
}
