package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// GuardedPatch renders the change as a JSON patch of node
// (types.JSONPatchType), node being the Node as the decision read it. The
// patch applies only while the Node is still that Node in everything
// Decide reads of it (ObserveNode): its UID, its labels (which rollouts
// select it), its annotations (its assignment, the rollouts' bookkeeping,
// its agent's status), a legacy spec.configSource, and its Ready and
// KubeletConfigReady conditions. The apiserver tests these and applies
// the change in one step, over whatever resourceVersion the Node has by
// then: a write that moved none of them, above all a kubelet's status
// report, does not fail it, where MergePatch's resourceVersion
// precondition conflicts with every write.
//
// ok is false when a test cannot say what the decision read: a Node
// without labels or annotations (a JSON patch cannot test that a map is
// absent), without a Ready condition, or with the
// agent's status annotation but not its condition (which the agent writes
// together). MergePatch is the guard then.
func (c Change) GuardedPatch(node *corev1.Node) (patch []byte, ok bool, err error) {
	// An empty map is left out of the Node's JSON, where a test of it
	// would fail every time.
	if node == nil || node.Name != c.Node || node.UID == "" || len(node.Labels) == 0 || len(node.Annotations) == 0 {
		return nil, false, nil
	}
	ops := []jsonPatchOp{
		{Op: "test", Path: "/metadata/uid", Value: node.UID},
		// Whole maps: a member the decision read as absent is tested
		// absent, which a test of the member alone cannot do.
		{Op: "test", Path: "/metadata/labels", Value: node.Labels},
		{Op: "test", Path: "/metadata/annotations", Value: node.Annotations},
	}
	// A configSource cannot be set anew (the apiserver drops it on an
	// update of a Node without one since Dynamic Kubelet Config's removal),
	// so one absent stays absent and needs no test.
	if node.Spec.ConfigSource != nil {
		ops = append(ops, jsonPatchOp{Op: "test", Path: "/spec/configSource", Value: node.Spec.ConfigSource})
	}
	conditions, ok := conditionTests(node)
	if !ok {
		return nil, false, nil
	}
	ops = append(ops, conditions...)
	// In the keys' order, so that a change is the same patch every time
	// it is rendered (in an audit log, in a retry), not the map's order.
	for _, key := range slices.Sorted(maps.Keys(c.Annotations)) {
		value := c.Annotations[key]
		path := "/metadata/annotations/" + escapePointer(key)
		switch _, present := node.Annotations[key]; {
		case value != nil:
			// add replaces a member that is there.
			ops = append(ops, jsonPatchOp{Op: "add", Path: path, Value: *value})
		case present:
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path})
		}
	}
	patch, err = json.Marshal(ops)
	if err != nil {
		return nil, false, fmt.Errorf("patch of node %s: %w", c.Node, err)
	}
	return patch, true, nil
}

// conditionTests tests the conditions ObserveNode reads where they are in
// the list (a list reordered since fails them, which only costs the
// decision a second look): the status of Ready, whose heartbeat every
// kubelet status report moves, and the agent's KubeletConfigReady whole. ok is false when a condition the decision read
// as absent could appear without a tested member changing.
func conditionTests(node *corev1.Node) (ops []jsonPatchOp, ok bool) {
	ready, configReady := -1, -1
	for i, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			ready = i
		case contract.ConditionKubeletConfigReady:
			configReady = i
		}
	}
	if ready < 0 {
		return nil, false
	}
	if _, reported := node.Annotations[contract.ConfigStatusAnnotation]; configReady < 0 && reported {
		return nil, false
	}
	test := func(i int, field string, value any) jsonPatchOp {
		return jsonPatchOp{Op: "test", Path: fmt.Sprintf("/status/conditions/%d/%s", i, field), Value: value}
	}
	c := node.Status.Conditions[ready]
	ops = append(ops, test(ready, "type", c.Type), test(ready, "status", c.Status))
	if configReady >= 0 {
		// Whole: only the agent writes it, and a reason or message left
		// empty is left out of the Node's JSON, where a test of the
		// member alone could not say it is still empty.
		ops = append(ops, jsonPatchOp{Op: "test", Path: fmt.Sprintf("/status/conditions/%d", configReady), Value: node.Status.Conditions[configReady]})
	}
	return ops, true
}

// pointerEscaper escapes a map key for a JSON pointer (RFC 6901) in one
// pass, so that the "~" of an escaped "/" is not escaped again. One
// Replacer serves every patch: building one is most of an escape's cost.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a map key for a JSON pointer.
func escapePointer(key string) string {
	return pointerEscaper.Replace(key)
}

// IsGuardFailure reports whether err is the apiserver's answer to a
// GuardedPatch whose tests failed: the Node moved in something the
// decision read, as a conflict says of MergePatch. The apiserver answers a
// JSON patch it cannot apply with 422 Invalid naming no object and no
// field, unlike the 422 of a Node found invalid or refused by an admission
// policy, which name the Node.
func IsGuardFailure(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || (d.Kind == "" && d.Name == "" && len(d.Causes) == 0)
}
