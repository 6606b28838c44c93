package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// NodeObservation is what Decide needs to know about one selected Node.
// ObserveNode fills it from a Node; tests may build it directly.
type NodeObservation struct {
	Name string
	// ResourceVersion is the Node's, carried into the Changes decided on
	// it as a precondition.
	ResourceVersion string
	// Ready is true when the Node's Ready condition is True.
	Ready bool

	// ConfigSource is the nodeguard.dev/config-source annotation as it is,
	// nil when absent. It is what a revert restores.
	ConfigSource *string
	// Assignment is what the Node runs by contract.AssignmentOf: the
	// annotation, or a legacy spec.configSource. Assigned is false when
	// nothing (or nothing readable) is assigned.
	Assignment contract.Assignment
	Assigned   bool

	// Status is the agent's nodeguard.dev/config-status, nil when not
	// reported or unreadable.
	Status *contract.ConfigStatus
	// KubeletConfigReady is the agent's condition, nil when not reported.
	KubeletConfigReady *Condition

	// Rollout is the nodeguard.dev/rollout annotation, "" when absent.
	Rollout string
	// PreviousConfigSource is the nodeguard.dev/previous-config-source
	// annotation, nil when absent.
	PreviousConfigSource *string
	// TrialPassed is the nodeguard.dev/trial-passed annotation, "" when
	// absent: the target version the Node passed its trial on, as the
	// rollout that moved it recorded (TrialPassedValue).
	TrialPassed string

	// OtherRollouts names the other KubeletConfigRollouts whose selectors
	// pick this Node.
	OtherRollouts []string
}

// SameButVersion reports whether two observations of a Node differ at most
// in the resourceVersion, which Decide only carries into its Changes: no
// decision can tell them apart.
func SameButVersion(a, b NodeObservation) bool {
	a.ResourceVersion, b.ResourceVersion = "", ""
	return reflect.DeepEqual(a, b)
}

// Condition is a Node condition as Decide reads it.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// ObserveNode reads what Decide needs from a selected Node. otherRollouts
// are the names of the other rollouts that select it. The errors say what
// could not be read (a malformed assignment or status annotation); the
// observation is usable all the same, with that part empty, since the
// agent reports the same problem in its condition.
func ObserveNode(node *corev1.Node, otherRollouts []string) (NodeObservation, error) {
	obs := NodeObservation{
		Name:            node.Name,
		ResourceVersion: node.ResourceVersion,
		Rollout:         node.Annotations[v1alpha1.RolloutAnnotation],
		TrialPassed:     node.Annotations[v1alpha1.TrialPassedAnnotation],
		OtherRollouts:   otherRollouts,
	}
	if value, ok := node.Annotations[contract.ConfigSourceAnnotation]; ok {
		obs.ConfigSource = &value
	}
	if value, ok := node.Annotations[v1alpha1.PreviousConfigSourceAnnotation]; ok {
		obs.PreviousConfigSource = &value
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		switch c.Type {
		case corev1.NodeReady:
			obs.Ready = c.Status == corev1.ConditionTrue
		case contract.ConditionKubeletConfigReady:
			obs.KubeletConfigReady = &Condition{Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}

	var errs []error
	assignment, ok, err := contract.AssignmentOf(node)
	if err != nil {
		errs = append(errs, fmt.Errorf("node %s: %w", node.Name, err))
	}
	obs.Assignment, obs.Assigned = assignment, ok
	if raw, ok := node.Annotations[contract.ConfigStatusAnnotation]; ok {
		var status contract.ConfigStatus
		if err := json.Unmarshal([]byte(raw), &status); err != nil {
			errs = append(errs, fmt.Errorf("node %s: annotation %s: %w", node.Name, contract.ConfigStatusAnnotation, err))
		} else {
			obs.Status = &status
		}
	}
	return obs, errors.Join(errs...)
}
