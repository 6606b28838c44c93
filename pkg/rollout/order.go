package rollout

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// StatusFirst reports whether the decision's status must be stored before
// any of its Node changes is sent, given the status stored now.
//
// It must when the decision reverts (the reverted Nodes no longer show the
// failure, so the Failed condition explaining them goes first), when the
// rollout has failed, and when the decision changes the rollout's state:
// a new generation or target, or any condition's status or reason (the
// canary, the first batch after it, a pause shown). Stored over the
// rollout's resourceVersion, that write fails if the spec changed since
// the cache showed it, before any Node moves on the old one.
//
// It need not when the decision only moves a rollout on in the state it is
// in, the counts and the message changing: the next Nodes of the same
// batch after one was updated. Such a status write fences little, since a
// pause or an edit can land just after it as well as just before, and it
// would add a round trip to the apiserver to every reaction. It goes out
// beside the assignments instead. A controller that stops between the two
// loses nothing: the Nodes' bookkeeping says what it moved, and the next
// decision recomputes the status from them.
func (d Decision) StatusFirst(stored v1alpha1.KubeletConfigRolloutStatus) bool {
	if len(d.Revert) > 0 || len(d.Assign) == 0 {
		return true
	}
	st := d.Status
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionFailed) {
		return true
	}
	if stored.ObservedGeneration != st.ObservedGeneration || !ptr.Equal(stored.Target, st.Target) {
		return true
	}
	for _, c := range st.Conditions {
		old := meta.FindStatusCondition(stored.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			return true
		}
	}
	return len(stored.Conditions) != len(st.Conditions)
}
