package controller

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
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
// Progressing) changed, and a Warning when it failed.
func (c *Controller) stateEvents(r *v1alpha1.KubeletConfigRollout, st *v1alpha1.KubeletConfigRolloutStatus) {
	progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	failed := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailed)
	if progressing == nil || failed == nil {
		return
	}
	old := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionFailed)
	if failed.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue || !sameTarget(r.Status.Target, st.Target)) {
		c.event(r, nil, corev1.EventTypeWarning, "RolloutFailed", "Sync", failed.Message)
	}
	key := progressing.Reason
	c.statesMu.Lock()
	changed := c.states[r.Name] != key
	c.states[r.Name] = key
	c.statesMu.Unlock()
	if oldP := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing); changed && (oldP == nil || oldP.Reason != key) {
		eventType := corev1.EventTypeNormal
		if progressing.Reason == v1alpha1.ReasonTargetNotFound {
			eventType = corev1.EventTypeWarning
		}
		c.event(r, nil, eventType, progressing.Reason, "Sync", progressing.Message)
	}
}

func sameTarget(a, b *contract.ObjectRef) bool {
	return a != nil && b != nil && *a == *b
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
	c.recorder.Eventf(regarding, related, eventType, reason, action, "%s", truncate(note, 1000))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
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
