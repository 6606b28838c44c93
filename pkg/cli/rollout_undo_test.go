package cli

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// undoNodes: rolloutNodes, plus node-d that pool-blue moved and someone
// re-pointed since, node-e moved by another rollout, and node-f moved by
// pool-blue from the local configuration ("") and no longer selected.
func undoNodes(t *testing.T) []runtime.Object {
	objs := rolloutNodes(t)
	d := movedBy("pool-blue", nil)
	d[contract.ConfigSourceAnnotation] = testNamespace + "/hand-picked"
	local := ""
	f := rolloutNode("node-f", movedBy("pool-blue", &local))
	f.Labels = map[string]string{"pool": "green"}
	return append(objs, rolloutNode("node-d", d), rolloutNode("node-e", movedBy("zone-a", nil)), f)
}

// acknowledged is the status of a controller that has seen the pause.
func acknowledged(r *v1alpha1.KubeletConfigRollout) {
	rollingOut(r)
	r.Spec.Paused = true
	setConditions(r, "False/Paused/paused: 1 of 3", "False/Paused/1 of 3", "False/NoFailure/none", "True/SpecPaused/spec.paused is true")
}

func nodePatch(t *testing.T, p k8stesting.PatchAction) map[string]any {
	t.Helper()
	var patch struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
		t.Fatal(err)
	}
	return patch.Metadata
}

func TestRolloutUndo(t *testing.T) {
	kube := fake.NewClientset(undoNodes(t)...)
	rollouts := newRollouts(testRollout("pool-blue", rollingOut))
	r := runFakeClients(t, kube, rollouts, "rollout", "undo", "pool-blue", "--timeout=20ms")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", r.code, r.errOut, r.out)
	}
	want := `kubeletconfigrollout.nodeguard.dev/pool-blue: paused
node/node-a: kubelet-configs/v3 -> kubelet-configs/v2: reverted
node/node-b: kubelet-configs/v3 -> local: reverted
node/node-d: kubelet-configs/hand-picked: left as it is: its config-source no longer names the rollout's target kubelet-configs/v3: someone re-pointed it since
node/node-f: kubelet-configs/v3 -> local: reverted
4 node(s) moved by the rollout: 3 reverted, 1 left as it is
kubeletconfigrollout.nodeguard.dev/pool-blue stays paused: resuming it rolls kubelet-configs/v3 out again from the canary
`
	if r.out != want {
		t.Errorf("output:\n%s\nwant:\n%s", r.out, want)
	}
	// No controller here: undo waited its --timeout and said so.
	if !strings.Contains(r.errOut, "has not shown the pause in the status within 20ms") {
		t.Errorf("stderr %q", r.errOut)
	}
	if !pausedOf(t, rollouts, "pool-blue") {
		t.Error("the rollout is not paused")
	}
	patched := map[string]map[string]any{}
	for _, p := range patches(kube) {
		patched[p.GetName()] = nodePatch(t, p)
	}
	if len(patched) != 3 {
		t.Fatalf("patched %v, want node-a, node-b, node-f", patched)
	}
	for node, source := range map[string]any{"node-a": "kubelet-configs/v2", "node-b": nil, "node-f": ""} {
		md := patched[node]
		annotations, _ := md["annotations"].(map[string]any)
		if md["resourceVersion"] != "5" || annotations[contract.ConfigSourceAnnotation] != source ||
			annotations[contract.RolloutAnnotation] != nil || annotations[contract.PreviousConfigSourceAnnotation] != nil ||
			annotations[contract.TrialPassedAnnotation] != nil || len(annotations) != len(contract.BookkeepingAnnotations)+1 {
			t.Errorf("%s: patch %v", node, md)
		}
	}
	n, err := kube.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[contract.RolloutAnnotation]; ok || n.Annotations[contract.ConfigSourceAnnotation] != "kubelet-configs/v2" {
		t.Errorf("node-a after undo: %v", n.Annotations)
	}

	// Again: nothing left to undo, nothing written.
	before := len(patches(kube))
	r = runFakeClients(t, kube, rollouts, "rollout", "undo", "pool-blue", "--timeout=0")
	if r.code != ExitOK || !strings.Contains(r.out, "already paused") || !strings.Contains(r.out, "left as it is") || len(patches(kube)) != before {
		t.Errorf("undo again: exit %d, %d new patches:\n%s", r.code, len(patches(kube))-before, r.out)
	}
}

func TestRolloutUndoWaitsForTheController(t *testing.T) {
	kube := fake.NewClientset(undoNodes(t)...)
	rollouts := newRollouts(testRollout("pool-blue", rollingOut))
	// The controller shows the pause on the third read after the patch.
	gets := sequence(rollouts, testRollout("pool-blue", rollingOut), testRollout("pool-blue", rollingOut, pausedSpec),
		testRollout("pool-blue", rollingOut, pausedSpec), testRollout("pool-blue", acknowledged))
	r := runFakeClients(t, kube, rollouts, "rollout", "undo", "pool-blue")
	if r.code != ExitOK || r.errOut != "" || gets.Load() != 4 {
		t.Fatalf("exit %d after %d reads, stderr %q", r.code, gets.Load(), r.errOut)
	}
	var nodeListed bool
	for _, a := range kube.Actions() {
		nodeListed = nodeListed || (a.GetVerb() == "list" && a.GetResource().Resource == "nodes")
	}
	if !nodeListed || len(patches(kube)) != 3 {
		t.Errorf("listed %v, %d patches", nodeListed, len(patches(kube)))
	}
}

func TestRolloutUndoDryRun(t *testing.T) {
	for _, mode := range []string{"--dry-run", "--dry-run=server"} {
		kube := fake.NewClientset(undoNodes(t)...)
		rollouts := newRollouts(testRollout("pool-blue", rollingOut))
		r := runFakeClients(t, kube, rollouts, "rollout", "undo", "pool-blue", mode)
		if r.code != ExitOK || (mode == "--dry-run" && pausedOf(t, rollouts, "pool-blue")) {
			t.Fatalf("%s: exit %d: %s\n%s", mode, r.code, r.errOut, r.out)
		}
		if mode == "--dry-run" {
			for _, want := range []string{"pool-blue: would be paused\n", "node/node-a: kubelet-configs/v3 -> kubelet-configs/v2: would be reverted\n", "dry run (client): nothing was sent"} {
				if !strings.Contains(r.out, want) {
					t.Errorf("%s: output lacks %q:\n%s", mode, want, r.out)
				}
			}
			if len(patches(kube))+len(rolloutPatches(rollouts)) != 0 {
				t.Errorf("%s sent patches", mode)
			}
			continue
		}
		// The fake clients do not honour dryRun; what matters is that
		// every write asked for it.
		for _, want := range []string{"pause accepted by the server (dry run)", "node-a: kubelet-configs/v3 -> kubelet-configs/v2: accepted by the server (dry run)", "nothing was written"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("%s: output lacks %q:\n%s", mode, want, r.out)
			}
		}
		for _, p := range append(patches(kube), rolloutPatches(rollouts)...) {
			if impl, ok := p.(k8stesting.PatchActionImpl); !ok || len(impl.PatchOptions.DryRun) != 1 || impl.PatchOptions.DryRun[0] != metav1.DryRunAll {
				t.Errorf("%s: a patch of %s without dryRun=All", mode, p.GetName())
			}
		}
	}
}

func TestRolloutUndoRetriesOnConflict(t *testing.T) {
	kube := fake.NewClientset(undoNodes(t)...)
	var conflictedA, conflictedB atomic.Bool
	// node-a conflicts once; node-b conflicts because the controller
	// reverted it meanwhile, which the second read shows.
	kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.(k8stesting.PatchAction).GetName() {
		case "node-a":
			if conflictedA.Swap(true) {
				return false, nil, nil
			}
		case "node-b":
			if conflictedB.Swap(true) {
				return false, nil, nil
			}
			// The tracker, not the clientset, whose lock this reactor holds.
			obj, err := kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "node-b")
			if err != nil {
				t.Fatal(err)
			}
			node := obj.(*corev1.Node).DeepCopy()
			delete(node.Annotations, contract.RolloutAnnotation)
			delete(node.Annotations, contract.ConfigSourceAnnotation)
			if err := kube.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, node, ""); err != nil {
				t.Error(err)
			}
		default:
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, a.(k8stesting.PatchAction).GetName(), nil)
	})
	kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.PatchAction).GetName() == "node-f" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-f", nil)
		}
		return false, nil, nil
	})
	rollouts := newRollouts(testRollout("pool-blue", acknowledged))
	r := runFakeClients(t, kube, rollouts, "rollout", "undo", "pool-blue")
	if r.code != ExitRefused {
		t.Fatalf("exit %d: %s\n%s", r.code, r.errOut, r.out)
	}
	for _, want := range []string{
		"already paused",
		"node/node-a: kubelet-configs/v3 -> kubelet-configs/v2: reverted\n",
		"node/node-b: local: left as it is: no longer carries nodeguard.dev/rollout=pool-blue (reverted meanwhile?)\n",
		"node/node-f: kubelet-configs/v3 -> local: refused by the server\n    server: nodes \"node-f\" is forbidden",
		"1 refused, 0 failed",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}
