package rollout

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// status is the status to write: the counts as observed, the target, and
// the conditions, each stamped with Now only when its status changes.
func (d *decider) status() v1alpha1.KubeletConfigRolloutStatus {
	r := d.in.Rollout
	c := d.counts
	target := d.target
	st := v1alpha1.KubeletConfigRolloutStatus{
		ObservedGeneration: r.Generation,
		Target:             &target,
		Selected:           int32(c.selected),
		Updated:            int32(c.updated),
		InTrial:            int32(c.inTrial),
		Failed:             int32(c.failed),
		LastProgressTime:   &d.progressTime,
	}
	d.pool.ascend(d.pool.byState[StateSkipped], func(m *member) bool {
		st.SkippedNodes = append(st.SkippedNodes, v1alpha1.SkippedNode{Name: m.obs.Name, Message: Truncate(d.skipped[m.obs.Name], maxSkipMessage)})
		return true
	})
	st.UnfitNodes = d.unfit()
	for _, cond := range r.Status.Conditions {
		st.Conditions = append(st.Conditions, *cond.DeepCopy())
	}

	reason, progressing, message := d.state()
	complete := c.selected > 0 && c.updated == c.selected && d.failure == nil
	conditions := []metav1.Condition{
		{Type: v1alpha1.ConditionProgressing, Status: boolStatus(progressing), Reason: reason, Message: message},
		d.completeCondition(complete, reason),
		d.failedCondition(),
		d.pausedCondition(),
	}
	for _, cond := range conditions {
		cond.ObservedGeneration = r.Generation
		cond.LastTransitionTime = d.in.Now
		meta.SetStatusCondition(&st.Conditions, cond)
	}
	return st
}

// state is the reason of the Progressing condition, whether the rollout is
// progressing, and why in words. The first that applies wins: a failure,
// a pause, a missing target, nothing selected, everything updated, only
// conflicts left, the canary, the rest.
func (d *decider) state() (reason string, progressing bool, message string) {
	c := d.counts
	target := d.targetName()
	conflicts := d.conflictNote()
	switch {
	case d.failure != nil:
		switch {
		case len(d.reverts) > 0:
			return v1alpha1.ReasonReverting, false, fmt.Sprintf("failed; re-pointing %d Nodes to their previous sources: %s",
				len(d.reverts), names(changedNodes(d.reverts))) + conflicts
		case d.spec.onFailure == v1alpha1.FailureRevert:
			return v1alpha1.ReasonReverted, false, fmt.Sprintf("failed; every Node this rollout moved to %s is back on its previous source", target) + conflicts
		default:
			return v1alpha1.ReasonHalted, false, "failed; onFailure is Halt, so every Node is left as it is" + conflicts
		}
	case d.spec.paused:
		return v1alpha1.ReasonPaused, false, "paused: " + d.progress() + d.unfitNote() + conflicts
	case d.targetIneligible:
		return v1alpha1.ReasonTargetNotEligible, false, fmt.Sprintf("ConfigMap %s lacks the label %s=%s, so no Node may be assigned it",
			target, contract.EligibleLabel, contract.EligibleLabelValue) + conflicts
	case d.targetMissing:
		return v1alpha1.ReasonTargetNotFound, false, fmt.Sprintf("ConfigMap %s does not exist", target) + conflicts
	case c.selected == 0:
		return v1alpha1.ReasonNoNodesSelected, false, "the node selector picks no Node"
	case c.updated == c.selected:
		return v1alpha1.ReasonComplete, false, fmt.Sprintf("all %d selected Nodes run %s", c.selected, d.targetVersion())
	case c.degraded > 0 && c.updated+c.degraded+c.skipped == c.managed:
		return v1alpha1.ReasonNodesDegraded, false, fmt.Sprintf("every Node this rollout may move took %s, and %d of them degraded since; nothing is left to assign",
			d.targetVersion(), c.degraded) + d.skipNote() + conflicts
	case c.updated+c.skipped == c.managed && c.skipped > 0:
		return v1alpha1.ReasonNodesSkipped, false, fmt.Sprintf("every Node this rollout may move runs %s", d.targetVersion()) + d.skipNote() + conflicts
	case c.updated == c.managed:
		return v1alpha1.ReasonNodesInConflict, false, fmt.Sprintf("every Node this rollout may move runs %s", d.targetVersion()) + conflicts
	case d.deadlineExceeded():
		return v1alpha1.ReasonProgressDeadlineExceeded, false, fmt.Sprintf("no Node was assigned %s or became updated for %s (spec.progressDeadlineSeconds): ",
			d.targetName(), d.spec.deadline) + d.progress() + d.moveNote() + d.skipNote() + d.unfitNote() + conflicts
	case c.updated < min(d.spec.canary, c.managed-c.skipped):
		return v1alpha1.ReasonCanary, true, fmt.Sprintf("canary of %d: ", min(d.spec.canary, c.managed-c.skipped)) + d.progress() + d.moveNote() + d.skipNote() + d.unfitNote() + conflicts
	default:
		return v1alpha1.ReasonRollingOut, true, d.progress() + d.moveNote() + d.skipNote() + d.unfitNote() + conflicts
	}
}

func (d *decider) completeCondition(complete bool, state string) metav1.Condition {
	if complete {
		return metav1.Condition{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllNodesUpdated,
			Message: fmt.Sprintf("all %d selected Nodes run %s", d.counts.selected, d.targetVersion())}
	}
	return metav1.Condition{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Reason: state, Message: d.progress()}
}

func (d *decider) failedCondition() metav1.Condition {
	if d.failure != nil {
		return *d.failure
	}
	return metav1.Condition{Type: v1alpha1.ConditionFailed, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoFailure,
		Message: fmt.Sprintf("no Node has failed %s", d.targetName())}
}

func (d *decider) pausedCondition() metav1.Condition {
	if d.spec.paused {
		return metav1.Condition{Type: v1alpha1.ConditionPaused, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSpecPaused,
			Message: "spec.paused is true: no Node is assigned the target"}
	}
	return metav1.Condition{Type: v1alpha1.ConditionPaused, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNotPaused,
		Message: "spec.paused is false"}
}

// progress is the counts in words.
func (d *decider) progress() string {
	c := d.counts
	return fmt.Sprintf("%d of %d Nodes updated, %d in trial, %d unavailable (at most %d)",
		c.updated, c.selected, c.inTrial, c.unavailable, d.spec.maxUnavailable)
}

// moveNote says which Nodes are assigned now, or, when none is, which
// Nodes the rollout waits on.
func (d *decider) moveNote() string {
	if len(d.assignments) > 0 {
		return "; assigning " + names(changedNodes(d.assignments))
	}
	if d.pool.waiting.Len() == 0 {
		return ""
	}
	return "; waiting on " + d.pool.listed(d.pool.waiting, func(m *member) string {
		if m.verdict.Detail != "" {
			return m.obs.Name + " (" + m.verdict.Detail + ")"
		}
		return m.obs.Name + " (in trial)"
	})
}

// skipNote names the Nodes skipped for their own state, and the Nodes
// that report the target failed outside a trial of this rollout's.
func (d *decider) skipNote() string {
	note := ""
	if degraded := d.pool.byState[StateDegraded]; degraded.Len() > 0 {
		note = fmt.Sprintf("; %d Nodes report a failure of their own, which fails no other Node: %s", degraded.Len(),
			d.pool.listed(degraded, func(m *member) string { return m.obs.Name + " (" + m.verdict.Detail + ")" }))
	}
	skipped := d.pool.byState[StateSkipped]
	if skipped.Len() == 0 {
		return note
	}
	return note + fmt.Sprintf("; %d Nodes skipped, refused the target by admission for their own state: %s", skipped.Len(),
		d.pool.listed(skipped, func(m *member) string { return m.obs.Name }))
}

// maxSkipMessage bounds each refusal kept in the status, which holds one
// per skipped Node.
const maxSkipMessage = 512

// Truncate cuts s to n bytes, marking the cut, for messages kept in an
// object (a status, an Event) whose size is bounded.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// conflictNote names the Nodes left alone because another rollout selects
// them too, for every rollout involved to say the same.
func (d *decider) conflictNote() string {
	conflicted := d.pool.byState[StateConflicted]
	if conflicted.Len() == 0 {
		return ""
	}
	return fmt.Sprintf("; %d Nodes left alone, selected by other rollouts too: %s", conflicted.Len(),
		d.pool.listed(conflicted, func(m *member) string { return m.obs.Name + " (" + m.verdict.Detail + ")" }))
}

func (d *decider) targetName() string {
	return d.target.Namespace + "/" + d.target.Name
}

func (d *decider) targetVersion() string {
	return fmt.Sprintf("%s (resourceVersion %s)", d.targetName(), d.target.ResourceVersion)
}

func changedNodes(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.Node
	}
	return out
}

func boolStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// ChangesState reports whether the decision changes the rollout's state
// against the status stored now: it reverts (the reverted Nodes no longer
// show the failure, so the Failed condition explaining them goes first),
// the rollout has failed, or the generation, the target, or any
// condition's status or reason changes (the canary, the first batch after
// it, a pause shown). Stored over the rollout's resourceVersion before any
// Node moves, such a status fails if the spec changed since it was read.
//
// A decision that only moves a rollout on in the state it is in changes
// the counts and the message alone: the next Nodes of the same batch after
// one was updated. Such a status fences little, since a pause or an edit
// can land just after it as well as just before, and writing it first
// would add a round trip to the apiserver to every reaction. It may go out
// beside the Node changes or after them, and several such statuses may be
// folded into the last one: a controller that stops before writing it
// loses nothing, since the Nodes' bookkeeping says what it moved and the
// next decision counts them again.
func (d Decision) ChangesState(stored v1alpha1.KubeletConfigRolloutStatus) bool {
	if len(d.Revert) > 0 {
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
