package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// NodeState is how a selected Node stands in a rollout; see the package
// documentation.
type NodeState string

const (
	StateUpdated     NodeState = "Updated"
	StateInTrial     NodeState = "InTrial"
	StateFailed      NodeState = "Failed"
	StatePending     NodeState = "Pending"
	StateUnavailable NodeState = "Unavailable"
	StateReverting   NodeState = "Reverting"
	StateUntouched   NodeState = "Untouched"
	StateConflicted  NodeState = "Conflicted"
	StateDegraded    NodeState = "Degraded"
	StateSkipped     NodeState = "Skipped"
)

// NodeResult is the verdict on one Node.
type NodeResult struct {
	Name  string
	State NodeState
	// Unavailable is true when the Node counts against maxUnavailable.
	Unavailable bool
	// Detail says why, in words: the agent's reason, "not Ready", the
	// other rollouts.
	Detail string
}

// judged is a Node with its verdict, while Decide works on it.
type judged struct {
	obs *NodeObservation
	NodeResult
	// failure is the condition reason of a Failed Node's rollout
	// failure, and failureMessage the agent's words for it.
	failure        string
	failureMessage string
}

// judge classifies a Node against the target, for the rollout named
// rollout; skipped are the Nodes admission refused the target for their
// own state, with the refusal. It knows nothing of the rollout's phase:
// Decide turns Pending into Untouched or Reverting when the rollout has
// failed.
func judge(obs *NodeObservation, target contract.ConfigMapVersion, rollout string, skipped map[string]string, now time.Time) judged {
	j := judged{obs: obs, NodeResult: NodeResult{Name: obs.Name}}
	if len(obs.OtherRollouts) > 0 {
		j.State = StateConflicted
		j.Detail = "also selected by " + strings.Join(obs.OtherRollouts, ", ")
		return j
	}
	cond := obs.KubeletConfigReady
	switch {
	case !assignedTo(obs, target):
		j.State = StatePending
	case reportsUpdated(obs.Status, target) && trialOver(obs, target, rollout, now):
		j.State = StateUpdated
		if drifted(obs) {
			// It took the target and passed its trial; the kubelet no
			// longer runs it as applied. The Node's word about itself:
			// shown, never failing the pool.
			j.State = StateDegraded
			j.failure, j.failureMessage = contract.ReasonConfigDrifted, cond.Message
		}
	case reportsFailed(obs, target):
		j.failure = failureReason(cond.Reason)
		j.failureMessage = failureWords(obs, j.failure)
		j.State = StateDegraded
		if inTrialOf(obs, target, rollout) {
			j.State = StateFailed
		}
	default:
		j.State = StateInTrial
	}

	var why []string
	switch {
	case j.State == StateDegraded && j.failure == contract.ReasonConfigDrifted:
		why = append(why, fmt.Sprintf("took %s, and its kubelet no longer runs it as applied (%s: %s)", versionOf(target), j.failure, j.failureMessage))
	case j.State == StateDegraded:
		// The Node's word about itself, outside a trial this rollout
		// started: shown for the Node, never failing the pool.
		why = append(why, fmt.Sprintf("reports %s failed (%s: %s) outside a trial of this rollout's", versionOf(target), j.failure, j.failureMessage))
	}
	// A change under way (a drain, a restart, a trial) makes the Node
	// unavailable whatever configuration it is about, and its phase says
	// more than the condition, which carries the same word as its reason.
	phase := phaseNote(obs.Status)
	if phase != "" {
		why = append(why, phase)
	}
	if !obs.Ready {
		why = append(why, "not Ready")
	}
	switch {
	case j.failure == contract.ReasonConfigDrifted:
		// Said above, with the agent's words.
	case cond != nil && cond.Status != corev1.ConditionTrue && (phase == "" || cond.Reason != obs.Status.Phase):
		note := fmt.Sprintf("%s=%s %s", contract.ConditionKubeletConfigReady, cond.Status, cond.Reason)
		if (cond.Reason == contract.ReasonDrainTimedOut || cond.Reason == contract.ReasonDrainBlocked) && obs.Status != nil && len(obs.Status.PendingPods) > 0 && j.State != StateDegraded {
			// A Degraded Node's failure words above name them already.
			note += ", blocked by " + names(obs.Status.PendingPods)
		}
		why = append(why, note)
	case j.State == StateInTrial && cond == nil && phase == "":
		why = append(why, "no status reported yet")
	}
	if j.State == StateInTrial && reportsUpdated(obs.Status, target) {
		// Its agent says it passed before the rollout's trial period
		// is over: too early to count, whatever it says.
		why = append(why, "reports the target passed; counted updated once its trial period ends at "+FormatTrialEnds(obs.TrialEnds))
	}
	j.Unavailable = len(why) > 0 || j.State == StateInTrial || j.State == StateFailed
	if j.State == StatePending && j.Unavailable {
		j.State = StateUnavailable
	}
	if refusal, ok := skipped[obs.Name]; ok && (j.State == StatePending || j.State == StateUnavailable) {
		// Refused the target for its own state: left as it is, and still
		// counted against maxUnavailable while it is down, as any Node.
		j.State = StateSkipped
		why = append(why, "skipped: "+refusal)
	}
	j.Detail = strings.Join(why, ", ")
	return j
}

// inTrialOf reports whether the Node is in a trial the rollout named
// rollout started on target: the rollout moved it there (movedBy) and has
// not recorded it passing a trial of that version. Only
// such a Node can fail the pool: a Node speaks for itself alone, and a
// failure it reports about a configuration someone else gave it, or after
// it passed, says nothing about the configuration's effect on the others.
func inTrialOf(obs *NodeObservation, target contract.ConfigMapVersion, rollout string) bool {
	return movedBy(obs, target, rollout) && obs.TrialPassed != TrialPassedValue(target)
}

// trialOver reports whether the trial period the rollout named rollout
// counts for its assignment of the Node is over at now. Only its own
// assignments are held to it: a Node assigned the target otherwise, or by
// a rollout that recorded no period, counts as its agent reports.
func trialOver(obs *NodeObservation, target contract.ConfigMapVersion, rollout string, now time.Time) bool {
	return !movedBy(obs, target, rollout) || obs.TrialEnds.IsZero() || !now.Before(obs.TrialEnds)
}

// versionOf names a target version in words.
func versionOf(target contract.ConfigMapVersion) string {
	return fmt.Sprintf("%s/%s (resourceVersion %s)", target.Namespace, target.Name, target.ResourceVersion)
}

// assignedTo reports whether the Node is assigned the target's ConfigMap,
// under the key the rollout writes.
func assignedTo(obs *NodeObservation, target contract.ConfigMapVersion) bool {
	return obs.Assigned && obs.Assignment.Key == contract.ConfigMapKey &&
		obs.Assignment.ConfigMap == contract.ConfigMapRef{Namespace: target.Namespace, Name: target.Name}
}

// reportsUpdated is the contract's "updated": the status reports the
// target active and last-known-good. An unknown version (the ConfigMap
// does not exist) is never reported.
func reportsUpdated(st *contract.ConfigStatus, target contract.ConfigMapVersion) bool {
	return st != nil && target.UID != "" && contract.SameVersion(st.Active, &target) && contract.SameVersion(st.LastKnownGood, &target)
}

// drifted reports a Node whose agent says its kubelet no longer runs what
// it applied (outside a trial: a trial that finds it fails instead).
func drifted(obs *NodeObservation) bool {
	cond := obs.KubeletConfigReady
	return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == contract.ReasonConfigDrifted
}

// reportsFailed needs the status and the condition to agree: a condition
// left from an earlier version must not fail this one (the agent writes
// both in one patch, but only what changed, and an older agent wrote them
// in two). The status must say the target is the
// assigned version, not the active one, with an error; the condition must
// say it failed validation or its trial. Other reasons (a download or a
// write that failed) are retried by the agent and keep the Node in trial.
func reportsFailed(obs *NodeObservation, target contract.ConfigMapVersion) bool {
	st, cond := obs.Status, obs.KubeletConfigReady
	if st == nil || cond == nil || target.UID == "" {
		return false
	}
	return contract.SameVersion(st.Assigned, &target) && !contract.SameVersion(st.Active, &target) && st.Error != "" &&
		cond.Status == corev1.ConditionFalse && failureReason(cond.Reason) != ""
}

// failureReason maps an agent's condition reason to the rollout's Failed
// reason, "" for a reason that is no failure of the target. A drain that
// timed out is one: the agent uncordoned the Node without applying the
// target, so the rollout cannot finish on it as things stand.
func failureReason(agentReason string) string {
	switch agentReason {
	case contract.ReasonRolledBack:
		return v1alpha1.ReasonTrialFailed
	case contract.ReasonValidationFailed:
		return v1alpha1.ReasonValidationFailed
	case contract.ReasonDrainTimedOut:
		return v1alpha1.ReasonDrainTimedOut
	case contract.ReasonDrainBlocked:
		return v1alpha1.ReasonDrainBlocked
	}
	return ""
}

// failureWords is the agent's account of a failure of the target: its
// condition's message, else its status error. For a drain that timed out
// the Failed condition must name the pods that blocked it, so those of
// status.pendingPods the message does not name already are added.
func failureWords(obs *NodeObservation, reason string) string {
	words := obs.KubeletConfigReady.Message
	if words == "" {
		words = obs.Status.Error
	}
	if reason != v1alpha1.ReasonDrainTimedOut && reason != v1alpha1.ReasonDrainBlocked {
		return words
	}
	var unnamed []string
	for _, pod := range obs.Status.PendingPods {
		if !strings.Contains(words, pod) {
			unnamed = append(unnamed, pod)
		}
	}
	if len(unnamed) > 0 {
		words += "; blocked by " + names(unnamed)
	}
	return words
}

// phaseNote says where a change under way on the Node stands, as its
// agent reports: the phase, and during a drain the pods it still waits on
// ("Draining, waiting on default/web-0"); "" when no change is under way.
func phaseNote(st *contract.ConfigStatus) string {
	if st == nil || st.Phase == "" {
		return ""
	}
	if st.Phase != contract.PhaseDraining || len(st.PendingPods) == 0 {
		return st.Phase
	}
	return st.Phase + ", waiting on " + names(st.PendingPods)
}
