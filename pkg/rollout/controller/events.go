package controller

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

func sourceName(source *string) string {
	if source == nil {
		return "(none: the Node's local configuration or its legacy spec.configSource)"
	}
	if *source == "" {
		return `"" (the local configuration)`
	}
	return *source
}

// stateEvents records an Event on the rollout when its state (the reason of
// Progressing) changed, and a Warning when it failed, once status is written.
func (c *Controller) stateEvents(r *v1alpha1.KubeletConfigRollout, st *rolloutState, status *v1alpha1.KubeletConfigRolloutStatus) {
	progressing := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionProgressing)
	failed := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionFailed)
	if progressing == nil || failed == nil {
		return
	}
	old := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionFailed)
	if failed.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue || status.Target == nil || !contract.SameVersion(r.Status.Target, status.Target)) {
		c.event(r, nil, corev1.EventTypeWarning, "RolloutFailed", "Sync", failed.Message)
	}
	if names := unfitNames(status.UnfitNodes); len(names) > 0 && !slices.Equal(names, unfitNames(r.Status.UnfitNodes)) {
		c.event(r, nil, corev1.EventTypeWarning, "NodesUnfit", "Sync", fmt.Sprintf("%s would leave %d Nodes unable to hold the pods they run: %s",
			targetName(status.Target), len(names), describeUnfit(status.UnfitNodes)))
	}
	changed := st.progressed(progressing.Reason)
	if oldP := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing); changed && (oldP == nil || oldP.Reason != progressing.Reason) {
		eventType := corev1.EventTypeNormal
		switch progressing.Reason {
		case v1alpha1.ReasonTargetNotFound, v1alpha1.ReasonTargetNotEligible, v1alpha1.ReasonProgressDeadlineExceeded, v1alpha1.ReasonNodesSkipped,
			v1alpha1.ReasonNodesDegraded:
			eventType = corev1.EventTypeWarning
		}
		c.event(r, nil, eventType, progressing.Reason, "Sync", progressing.Message)
	}
}

// verdicts records what follows from the verdicts a decision changed:
// the metrics, and a Warning on each Node that became Degraded (it reports
// the target failed outside a trial of this rollout's: shown for that Node,
// failing nothing) or Skipped (admission refused it the target for its
// own state).
func (c *Controller) verdicts(r *v1alpha1.KubeletConfigRollout, st *rolloutState, d rollout.Decision, now time.Time) {
	v := st.decided(d.Nodes, d.Left)
	nothingToAssign := len(d.Assign) == 0 && (v.counts[rollout.StatePending] == 0 || r.Spec.Paused ||
		meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionFailed))
	st.reactions.decided(d.Nodes, v.previous, st.handedOverRead, nothingToAssign, now)
	c.metrics.observe(r.Name, d.Nodes, v, now)
	for _, res := range d.Nodes {
		if (res.State != rollout.StateDegraded && res.State != rollout.StateSkipped) || v.previous[res.Name] == res.State {
			continue
		}
		reason := "NodeFailedOutsideTrial"
		if res.State == rollout.StateSkipped {
			reason = "NodeSkipped"
		}
		c.event(c.cachedNode(res.Name), r, corev1.EventTypeWarning, reason, "Sync", fmt.Sprintf("rollout %s: %s", r.Name, res.Detail))
	}
}

func unfitNames(unfit []v1alpha1.UnfitNode) []string {
	names := make([]string, len(unfit))
	for i, u := range unfit {
		names[i] = u.Name
	}
	return names
}

func describeUnfit(unfit []v1alpha1.UnfitNode) string {
	parts := make([]string, len(unfit))
	for i, u := range unfit {
		parts[i] = u.Name + " (" + u.Message + ")"
	}
	return strings.Join(parts, "; ")
}

func targetName(target *contract.ConfigMapVersion) string {
	if target == nil {
		return "the target"
	}
	return target.Namespace + "/" + target.Name
}

// event records an Event regarding obj; Events are best effort.
func (c *Controller) event(regarding, related runtime.Object, eventType, reason, action, note string) {
	if c.recorder == nil || isNil(regarding) {
		return
	}
	if isNil(related) {
		related = nil
	}
	// The note goes through a format string: keep its own % signs.
	c.recorder.Eventf(regarding, related, eventType, reason, action, "%s", rollout.Truncate(note, 1000))
}

// isNil reports a nil object, a typed nil pointer included (a Node the
// decision names that the map does not hold).
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
