package drain

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The reasons a pod blocks a drain, as `kubectl drain` words them, with the
// switch that lifts each.
const (
	blockedUnmanaged    = "no controller recreates it (kubectl drain --force; " + contract.DrainForceAnnotation + ")"
	blockedLocalStorage = "its emptyDir data would be lost (kubectl drain --delete-emptydir-data; " + contract.DrainDeleteEmptyDirDataAnnotation + ")"
)

// Blocked is a pod the drain may not evict: deleting it loses what nothing
// brings back, and the assignment did not allow it.
type Blocked struct {
	Namespace, Name string
	// Why says what would be lost, and which switch allows it.
	Why string
}

// String is "namespace/name".
func (b Blocked) String() string { return b.Namespace + "/" + b.Name }

// Filter sorts the pods bound to the Node by `kubectl drain
// --ignore-daemonsets`'s rules (k8s.io/kubectl/pkg/drain, filters.go) under
// opts, kubectl's two switches: the pods that stay (MustLeave: DaemonSet,
// mirror and finished pods) are left out; a pod with emptyDir volumes
// blocks the drain unless opts.DeleteEmptyDirData, and a pod without a
// controller owner unless opts.Force; every other pod is to be evicted.
// Blocked is sorted by namespace and name.
//
// Two differences from kubectl, both because the agent drains with its
// node's rights: a pod whose controller is a DaemonSet stays even when that
// DaemonSet is gone (kubectl reads DaemonSets, which a node may not; such
// an orphan holds the Node's resources as before, and the trial judges the
// Node with it), and a pod already being deleted blocks nothing (someone
// else deleted it; the drain waits for it to go).
//
// kubectl's Helper is not used: it needs a clientset of every API group
// (the agent links core/v1 alone, docs/agent.md, Memory), it lists and
// judges in one call that also reads DaemonSets, and it works in the same
// call as it evicts; the agent takes a drain one step a pass.
// TestFilterAgreesWithKubectl holds this to kubectl's own filters.
func Filter(pods []*corev1.Pod, opts contract.DrainOptions) (evict []*corev1.Pod, blocked []Blocked) {
	for _, pod := range pods {
		if leave, _ := MustLeave(pod); !leave {
			continue
		}
		if pod.DeletionTimestamp == nil {
			var why []string
			if hasLocalStorage(pod) && !opts.DeleteEmptyDirData {
				why = append(why, blockedLocalStorage)
			}
			if metav1.GetControllerOf(pod) == nil && !opts.Force {
				why = append(why, blockedUnmanaged)
			}
			if len(why) > 0 {
				blocked = append(blocked, Blocked{Namespace: pod.Namespace, Name: pod.Name, Why: strings.Join(why, ", and ")})
				continue
			}
		}
		evict = append(evict, pod)
	}
	sort.Slice(blocked, func(i, j int) bool { return blocked[i].String() < blocked[j].String() })
	return evict, blocked
}

// hasLocalStorage is kubectl's: a pod with an emptyDir volume, whatever its
// medium.
func hasLocalStorage(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// DescribeBlocked says in one line which pods block a drain and why.
func DescribeBlocked(blocked []Blocked) string {
	parts := make([]string, len(blocked))
	for i, b := range blocked {
		parts[i] = b.String() + " (" + b.Why + ")"
	}
	return strings.Join(parts, ", ")
}

// BlockedNames lists the blocked pods as "namespace/name".
func BlockedNames(blocked []Blocked) []string {
	names := make([]string, len(blocked))
	for i, b := range blocked {
		names[i] = b.String()
	}
	return names
}
