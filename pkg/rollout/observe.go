package rollout

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	// TrialEnds is the nodeguard.dev/trial-ends annotation, parsed; zero
	// when absent or malformed: when the trial period of the assignment
	// the rollout that moved the Node made ends.
	TrialEnds time.Time

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
	return ObserveNodeWith(node, otherRollouts, contract.ParseConfigStatus)
}

// ObserveNodeWith is ObserveNode with the config-status annotation's text
// decoded by decode, which may hand out the status decoded from the same
// text before: decoding it is most of a reading's cost, and most of a
// Node's updates (heartbeats, the controller's own patches) leave it as it
// was. The observation shares what decode returns, which no reader
// modifies.
func ObserveNodeWith(node *corev1.Node, otherRollouts []string, decode func(raw string) (*contract.ConfigStatus, error)) (NodeObservation, error) {
	obs := NodeObservation{
		Name:            node.Name,
		ResourceVersion: node.ResourceVersion,
		Rollout:         node.Annotations[contract.RolloutAnnotation],
		TrialPassed:     node.Annotations[contract.TrialPassedAnnotation],
		OtherRollouts:   otherRollouts,
	}
	if value, ok := node.Annotations[contract.ConfigSourceAnnotation]; ok {
		obs.ConfigSource = &value
	}
	if value, ok := node.Annotations[contract.PreviousConfigSourceAnnotation]; ok {
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
	if value, ok := node.Annotations[contract.TrialEndsAnnotation]; ok {
		ends, err := time.Parse(time.RFC3339, value)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: annotation %s: %w", node.Name, contract.TrialEndsAnnotation, err))
		} else {
			obs.TrialEnds = ends
		}
	}
	assignment, ok, err := contract.AssignmentOf(node)
	if err != nil {
		errs = append(errs, fmt.Errorf("node %s: %w", node.Name, err))
	}
	obs.Assignment, obs.Assigned = assignment, ok
	if raw, ok := node.Annotations[contract.ConfigStatusAnnotation]; ok {
		status, err := decode(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: annotation %s: %w", node.Name, contract.ConfigStatusAnnotation, err))
		} else {
			obs.Status = status
		}
	}
	return obs, errors.Join(errs...)
}

// ObserveSelected is Input.Nodes for the rollout named self: the Nodes
// among nodes that selector (Selector's, of that rollout) picks, each
// observed with the other rollouts that pick it too. nodes may be all
// Nodes or already filtered by the selector; rollouts are all the
// rollouts, self included or not. Anything that reads a rollout's Nodes
// (the controller, kubectl nodeguard rollout status) assembles them this
// way, so that all of them judge the same Nodes the same way.
//
// The error joins what could not be read on the Nodes (see ObserveNode);
// every selected Node is observed all the same.
func ObserveSelected(selector labels.Selector, self string, rollouts []*v1alpha1.KubeletConfigRollout, nodes []*corev1.Node) ([]NodeObservation, error) {
	var out []NodeObservation
	var errs []error
	for _, node := range nodes {
		set := labels.Set(node.Labels)
		if !selector.Matches(set) {
			continue
		}
		obs, err := ObserveNode(node, OtherRollouts(rollouts, self, set))
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, obs)
	}
	return out, errors.Join(errs...)
}

// Selector is the rollout's node selector. An empty selector is an error
// rather than every Node: the CRD refuses it, and a rollout that got past
// that (an apiserver without the CRD's validation rules, a unit test)
// must not take the whole cluster.
func Selector(r *v1alpha1.KubeletConfigRollout) (labels.Selector, error) {
	s := &r.Spec.NodeSelector
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return nil, errors.New("spec.nodeSelector is empty")
	}
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("spec.nodeSelector: %w", err)
	}
	return selector, nil
}

// OtherRollouts names, sorted, the rollouts other than self whose
// selectors pick a Node with these labels: what NodeObservation's
// OtherRollouts wants. A rollout whose selector does not parse selects
// nothing; its own status says why.
func OtherRollouts(rollouts []*v1alpha1.KubeletConfigRollout, self string, nodeLabels labels.Set) []string {
	var out []string
	for _, r := range rollouts {
		if r.Name == self {
			continue
		}
		if selector, err := Selector(r); err == nil && selector.Matches(nodeLabels) {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TargetOf is Input.Target and Input.TargetIneligible for the ConfigMap a
// rollout's spec.configMapRef names, given as read (nil when it does not
// exist): its version, or nil when it does not exist or is not eligible,
// since a ConfigMap without the label nodeguard.dev/kubelet-config=true can
// never be assigned and a rollout of it waits as for a missing one.
// Metadata is all it needs, so a metadata-only informer's objects do.
func TargetOf(cm metav1.Object) (target *contract.ConfigMapVersion, ineligible bool) {
	if cm == nil {
		return nil, false
	}
	if !contract.IsEligible(cm.GetLabels()) {
		return nil, true
	}
	return &contract.ConfigMapVersion{Namespace: cm.GetNamespace(), Name: cm.GetName(), UID: string(cm.GetUID()), ResourceVersion: cm.GetResourceVersion()}, false
}
