package rollout

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func guardedNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", UID: "uid-a", ResourceVersion: "10",
			Labels: map[string]string{"pool": "blue"},
			Annotations: map[string]string{
				contract.ConfigSourceAnnotation: "kubelet-configs/v1",
				contract.TrialPassedAnnotation:  "old",
				contract.ConfigStatusAnnotation: `{"active":"kubelet-configs/v1"}`,
			},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
			{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionTrue, Reason: "ConfigActive", Message: "running kubelet-configs/v1"},
		}},
	}
}

// applyPatch applies patch to node's JSON as the apiserver does (the same
// JSON patch library) and returns the patched Node.
func applyPatch(t *testing.T, node *corev1.Node, patch []byte) (*corev1.Node, error) {
	t.Helper()
	doc, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("the patch does not decode: %v\n%s", err, patch)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	var patched corev1.Node
	if err := json.Unmarshal(out, &patched); err != nil {
		t.Fatal(err)
	}
	return &patched, nil
}

// A guarded change applies over whatever moved that the decision does not
// read, and over nothing it reads.
func TestGuardedPatchTestsWhatTheDecisionRead(t *testing.T) {
	source, rollout := "kubelet-configs/v2", "r"
	change := Change{Node: "a", ResourceVersion: "10", Annotations: map[string]*string{
		contract.ConfigSourceAnnotation:         &source,
		contract.RolloutAnnotation:              &rollout,
		contract.TrialPassedAnnotation:          nil, // present: removed
		contract.PreviousConfigSourceAnnotation: nil, // absent: nothing to do
	}}
	patch, ok, err := change.GuardedPatch(guardedNode())
	if err != nil || !ok {
		t.Fatalf("GuardedPatch = %v, %v; want a patch", ok, err)
	}

	for _, tc := range []struct {
		name    string
		since   func(n *corev1.Node)
		applies bool
	}{
		{"nothing", func(*corev1.Node) {}, true},
		{"a kubelet's status report", func(n *corev1.Node) {
			n.ResourceVersion = "11"
			n.Status.Conditions[1].LastHeartbeatTime = metav1.NewTime(time.Unix(1000, 0))
			n.Status.Conditions[0].Status = corev1.ConditionTrue
			n.Status.Allocatable = corev1.ResourceList{}
			n.Spec.Unschedulable = true
		}, true},
		{"another Node of the name", func(n *corev1.Node) { n.UID = "uid-b" }, false},
		{"a label added", func(n *corev1.Node) { n.Labels["zone"] = "z" }, false},
		{"a label changed", func(n *corev1.Node) { n.Labels["pool"] = "green" }, false},
		{"an annotation added", func(n *corev1.Node) { n.Annotations[contract.PreviousConfigSourceAnnotation] = "x" }, false},
		{"an annotation removed", func(n *corev1.Node) { delete(n.Annotations, contract.TrialPassedAnnotation) }, false},
		{"the agent's status", func(n *corev1.Node) { n.Annotations[contract.ConfigStatusAnnotation] = `{}` }, false},
		{"NotReady", func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionFalse }, false},
		{"the agent's condition", func(n *corev1.Node) { n.Status.Conditions[2].Message = "rolled back" }, false},
		{"the conditions reordered", func(n *corev1.Node) {
			c := n.Status.Conditions
			c[0], c[1] = c[1], c[0]
		}, false},
		{"a condition fewer", func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:2] }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := guardedNode()
			tc.since(node)
			patched, err := applyPatch(t, node, patch)
			if !tc.applies {
				if err == nil {
					t.Fatal("applied, want the guard to fail")
				}
				return
			}
			if err != nil {
				t.Fatalf("guard failed: %v", err)
			}
			want := map[string]string{
				contract.ConfigSourceAnnotation: source,
				contract.RolloutAnnotation:      rollout,
				contract.ConfigStatusAnnotation: node.Annotations[contract.ConfigStatusAnnotation],
			}
			if len(patched.Annotations) != len(want) {
				t.Errorf("annotations = %v, want %v", patched.Annotations, want)
			}
			for k, v := range want {
				if patched.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, patched.Annotations[k], v)
				}
			}
			if patched.ResourceVersion != node.ResourceVersion || !patched.Spec.Unschedulable == node.Spec.Unschedulable {
				t.Errorf("the patch changed what it does not set")
			}
		})
	}
}

// A change renders the same patch every time: its annotations in their
// keys' order, not the map's.
func TestGuardedPatchIsTheSameEveryTime(t *testing.T) {
	value := "v"
	change := Change{Node: "a", ResourceVersion: "10", Annotations: map[string]*string{}}
	for _, key := range []string{"e.dev/e", "b.dev/b", "d.dev/d", "a.dev/a", "c.dev/c", contract.TrialPassedAnnotation} {
		change.Annotations[key] = &value
	}
	change.Annotations[contract.TrialPassedAnnotation] = nil
	first, ok, err := change.GuardedPatch(guardedNode())
	if err != nil || !ok {
		t.Fatalf("GuardedPatch = %v, %v; want a patch", ok, err)
	}
	var ops []jsonPatchOp
	if err := json.Unmarshal(first, &ops); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, op := range ops {
		if op.Op != "test" {
			paths = append(paths, op.Path)
		}
	}
	if !slices.IsSorted(paths) || len(paths) != len(change.Annotations) {
		t.Errorf("changed paths = %v, want every annotation's, in order", paths)
	}
	for range 20 {
		again, _, _ := change.GuardedPatch(guardedNode())
		if string(again) != string(first) {
			t.Fatalf("the patch differs between renderings:\n%s\n%s", first, again)
		}
	}
}

// A Node whose JSON would leave out what the guard must test is not
// guarded: MergePatch's resourceVersion is the guard then.
func TestGuardedPatchLeavesWhatItCannotTest(t *testing.T) {
	change := Change{Node: "a", ResourceVersion: "10"}
	for name, edit := range map[string]func(n *corev1.Node){
		"no labels":                    func(n *corev1.Node) { n.Labels = map[string]string{} },
		"no annotations":               func(n *corev1.Node) { n.Annotations = nil },
		"no Ready condition":           func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[2:] },
		"a status but no condition":    func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:2] },
		"no UID":                       func(n *corev1.Node) { n.UID = "" },
		"another Node than the change": func(n *corev1.Node) { n.Name = "b" },
	} {
		node := guardedNode()
		edit(node)
		if patch, ok, err := change.GuardedPatch(node); ok || err != nil {
			t.Errorf("%s: GuardedPatch = %s, %v, %v; want not ok", name, patch, ok, err)
		}
	}
	// Never reported: the agent's first report brings its status
	// annotation, which the guard tests.
	node := guardedNode()
	node.Status.Conditions = node.Status.Conditions[:2]
	delete(node.Annotations, contract.ConfigStatusAnnotation)
	if _, ok, err := change.GuardedPatch(node); !ok || err != nil {
		t.Errorf("a Node its agent never reported on: %v, %v; want a patch", ok, err)
	}
}

// A legacy spec.configSource is tested as it was.
func TestGuardedPatchTestsALegacyConfigSource(t *testing.T) {
	node := guardedNode()
	node.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kubelet-configs", Name: "v1", KubeletConfigKey: "kubelet"}}
	patch, ok, err := Change{Node: "a"}.GuardedPatch(node)
	if err != nil || !ok {
		t.Fatalf("GuardedPatch = %v, %v", ok, err)
	}
	if _, err := applyPatch(t, node, patch); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	node.Spec.ConfigSource.ConfigMap.Name = "v2"
	if _, err := applyPatch(t, node, patch); err == nil {
		t.Error("applied over another configSource, want the guard to fail")
	}
}

// The apiserver answers a patch it cannot apply with 422 naming no object;
// a Node found invalid, or refused by an admission policy, names it.
func TestIsGuardFailure(t *testing.T) {
	failed := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /metadata/labels failed: test failed", 0, false)
	if !IsGuardFailure(failed) {
		t.Errorf("IsGuardFailure(%v) = false", failed)
	}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "a", field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "x", "bad")})
	for _, err := range []error{invalid, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "a", nil), nil} {
		if IsGuardFailure(err) {
			t.Errorf("IsGuardFailure(%v) = true", err)
		}
	}
}

func TestEscapePointer(t *testing.T) {
	for key, want := range map[string]string{
		contract.ConfigSourceAnnotation: "nodeguard.dev~1config-source",
		"a~b/c":                         "a~0b~1c",
		"~1":                            "~01",
		"plain":                         "plain",
	} {
		if got := escapePointer(key); got != want {
			t.Errorf("escapePointer(%q) = %q, want %q", key, got, want)
		}
	}
}
