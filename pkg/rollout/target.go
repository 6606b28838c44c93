package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TargetOf is Input.Target and Input.TargetIneligible for the ConfigMap a
// rollout's spec.configMapRef names, given as read (nil when it does not
// exist): its version, or nil when it does not exist or is not eligible,
// since a ConfigMap without the label nodeguard.dev/kubelet-config=true can
// never be assigned and a rollout of it waits as for a missing one.
// Metadata is all it needs, so a metadata-only informer's objects do.
func TargetOf(cm metav1.Object) (target *contract.ObjectRef, ineligible bool) {
	if cm == nil {
		return nil, false
	}
	if !contract.IsEligible(cm.GetLabels()) {
		return nil, true
	}
	return &contract.ObjectRef{Namespace: cm.GetNamespace(), Name: cm.GetName(), UID: string(cm.GetUID()), ResourceVersion: cm.GetResourceVersion()}, false
}
