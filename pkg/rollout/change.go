package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Change is an edit of one Node's annotations: each key set to its value,
// or removed where the value is nil. The assignment and the bookkeeping are
// always in one Change, so that no Node ever carries one without the
// other.
type Change struct {
	Node string
	// ResourceVersion is the Node's when the change was decided; the patch
	// carries it, so it fails with a conflict if the Node moved since.
	ResourceVersion string
	Annotations     map[string]*string
}

// MergePatch renders the change as a JSON merge patch of the Node
// (types.MergePatchType), with its resourceVersion as a precondition.
func (c Change) MergePatch() ([]byte, error) {
	metadata := map[string]any{"annotations": c.Annotations}
	if c.ResourceVersion != "" {
		metadata["resourceVersion"] = c.ResourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return nil, fmt.Errorf("patch of node %s: %w", c.Node, err)
	}
	return patch, nil
}

// assign points the Node at the target, records what it had before, tells
// its agent how to drain and try it (drainAnnotation, the drain's
// switches, the trial's terms: whatever the spec leaves out is removed, so
// no term an earlier rollout or assignment left on the Node outlives this
// assignment), and when its trial period ends, counted from now.
func assign(rollout string, node *NodeObservation, target contract.ConfigMapRef, s spec, now time.Time) (Change, error) {
	source := target.String()
	trial, err := s.trial.Annotation()
	if err != nil {
		return Change{}, err
	}
	ends := FormatTrialEnds(now.Add(s.trialPeriod))
	annotations := map[string]*string{
		contract.ConfigSourceAnnotation: &source,
		contract.RolloutAnnotation:      &rollout,
		// nil when the Node had no config-source: a revert removes it
		// again, and a stale previous source from an earlier move goes.
		contract.PreviousConfigSourceAnnotation: node.ConfigSource,
		// A Node moved anew has passed no trial of this rollout's.
		contract.TrialPassedAnnotation: nil,
		contract.TrialEndsAnnotation:   &ends,
		contract.DrainAnnotation:       drainAnnotation(s.drain),
		contract.TrialAnnotation:       trial,
	}
	maps.Copy(annotations, s.drainOptions.Annotations())
	return Change{Node: node.Name, ResourceVersion: node.ResourceVersion, Annotations: annotations}, nil
}

// trialEndsLayout is RFC 3339 to the millisecond: a trial's end written to
// the second would hold every Node's slot up to a second past its trial
// (its agent reports a passed trial sooner), which on short trials is most
// of a reaction. Any RFC 3339 time parses, with or without the fraction.
const trialEndsLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTrialEnds writes a time as nodeguard.dev/trial-ends holds it:
// RFC 3339, in UTC, to the millisecond (rounded up, so that a Node is never
// counted before its period is over).
func FormatTrialEnds(t time.Time) string {
	if t.Truncate(time.Millisecond) != t {
		t = t.Truncate(time.Millisecond).Add(time.Millisecond)
	}
	return t.UTC().Format(trialEndsLayout)
}

// drainAnnotation is the nodeguard.dev/drain value an assignment writes
// for spec.drain: nil (removed) for Auto, since an absent annotation is the
// agent's own default and a mode an earlier rollout or assignment left on
// the Node must not outlive it; the mode itself otherwise.
func drainAnnotation(drain v1alpha1.DrainMode) *string {
	if drain == "" || drain == v1alpha1.DrainAuto {
		return nil
	}
	value := string(drain)
	return &value
}

// revert points the Node back at its previous source and drops the
// bookkeeping, after which the Node is no longer this rollout's to move.
// Every one of contract.BookkeepingAnnotations goes, nodeguard.dev/drain
// included: the mode was the rollout's word for its target, and the
// previous source is applied with the agent's own default.
func revert(node *NodeObservation) Change {
	annotations := map[string]*string{contract.ConfigSourceAnnotation: node.PreviousConfigSource}
	for _, key := range contract.BookkeepingAnnotations {
		annotations[key] = nil
	}
	return Change{Node: node.Name, ResourceVersion: node.ResourceVersion, Annotations: annotations}
}

// passed records that the Node passed its trial on the target: from then
// on, a failure it reports is its own and fails the pool no more. Unlike
// an assignment it carries no resourceVersion: the agent writes its Node
// as it passes (the very writes that show it Updated), so a precondition
// would mostly meet a conflict, and nothing needs one. The mark names the
// target's version and counts only while the Node is on that version by
// this rollout's move; an assignment and a revert remove it in the patch
// that moves the Node, so a mark landing after either is inert.
func passed(node *NodeObservation, target contract.ConfigMapVersion) Change {
	value := TrialPassedValue(target)
	return Change{
		Node:        node.Name,
		Annotations: map[string]*string{contract.TrialPassedAnnotation: &value},
	}
}

// TrialPassedValue is the nodeguard.dev/trial-passed annotation for a Node
// that passed its trial on target: "<namespace>/<name>@<resourceVersion>".
// A resourceVersion is unique across the cluster's objects, so the value
// names one version of one ConfigMap.
func TrialPassedValue(target contract.ConfigMapVersion) string {
	return target.Namespace + "/" + target.Name + "@" + target.ResourceVersion
}
