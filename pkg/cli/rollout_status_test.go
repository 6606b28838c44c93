package cli

import (
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardfake "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/fake"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// rowOf returns the fields of the table row that starts with name.
func rowOf(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

func TestRolloutStatus(t *testing.T) {
	// zone-a selects none of pool-blue's Nodes, yet.
	zone := testRollout("zone-a", rollingOut)
	zone.Spec.NodeSelector.MatchLabels = map[string]string{"zone": "a"}
	kube := fake.NewClientset(rolloutNodes(t)...)
	r := runFakeClients(t, kube, newRollouts(testRollout("pool-blue", rollingOut), zone), "rollout", "status", "pool-blue")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", r.code, r.errOut, r.out)
	}
	for _, want := range []string{
		"Rollout:  pool-blue\n", "State:    RollingOut (progressing)\n", "Target:   kubelet-configs/v3@30\n",
		"Spec:     canary 1, maxUnavailable 1, onFailure Revert, drain Auto, paused false\n",
		"Nodes:    3 selected, 1 updated, 1 in trial, 0 failed\n",
		"Progressing   True     RollingOut   1 of 3 Nodes updated, 1 in trial",
		"Failed        False    NoFailure    no Node has failed",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	// The states are pkg/rollout's: the same Nodes through Decide.
	for node, want := range map[string][]string{
		"node-a": {"node-a", "Updated", "kubelet-configs/v3@30", "kubelet-configs/v3@30", "kubelet-configs/v3@30", "True", "<none>"},
		"node-b": {"node-b", "InTrial", "kubelet-configs/v3@30", "kubelet-configs/v3@30", "kubelet-configs/v2@20", "True", "KubeletConfigReady=False", "TrialInProgress"},
		"node-c": {"node-c", "Pending", "kubelet-configs/v2@20", "kubelet-configs/v2@20", "kubelet-configs/v2@20", "True", "<none>"},
	} {
		if got := rowOf(r.out, node); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %v, want %v", got, want)
		}
	}
	if rowOf(r.out, "node-z") != nil {
		t.Errorf("node-z is not selected but shown:\n%s", r.out)
	}

	// A Node another rollout selects too is Conflicted, as the controller
	// judges it.
	zone.Spec.NodeSelector.MatchLabels = map[string]string{"pool": "blue"}
	r = runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), newRollouts(testRollout("pool-blue", rollingOut), zone), "rollout", "status", "pool-blue")
	if got := rowOf(r.out, "node-c"); len(got) < 2 || got[1] != string(rollout.StateConflicted) || !strings.Contains(r.out, "also selected by zone-a") {
		t.Errorf("with zone-a selecting the pool too: row %v\n%s", got, r.out)
	}
}

// A Node draining for the target shows the phase and the pods the drain
// waits on, in the text and in -o json; the spec's drain mode is shown, and
// the mode the Node was given.
func TestRolloutStatusShowsTheDrain(t *testing.T) {
	objs := rolloutNodes(t)
	draining := rolloutNode("node-b", movedBy("pool-blue", nil))
	draining.Annotations[contract.DrainAnnotation] = contract.DrainAlways
	objs[1] = reporting(t, draining, contract.ConfigStatus{Assigned: v3, Active: v2, LastKnownGood: v2,
		Phase: contract.PhaseDraining, PendingPods: []string{"default/web-0", "default/web-1"}}, corev1.ConditionFalse, contract.ReasonDraining)
	always := func(r *v1alpha1.KubeletConfigRollout) { r.Spec.Drain = v1alpha1.DrainAlways }
	r := runFakeClients(t, fake.NewClientset(objs...), newRollouts(testRollout("pool-blue", rollingOut, always)), "rollout", "status", "pool-blue")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", r.code, r.errOut, r.out)
	}
	if !strings.Contains(r.out, "Spec:     canary 1, maxUnavailable 1, onFailure Revert, drain Always, paused false\n") {
		t.Errorf("the spec line does not say drain Always:\n%s", r.out)
	}
	want := []string{"node-b", "InTrial", "kubelet-configs/v3@30", "kubelet-configs/v2@20", "kubelet-configs/v2@20", "True", "Draining,", "waiting", "on", "default/web-0,", "default/web-1"}
	if got := rowOf(r.out, "node-b"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("row %v, want %v", got, want)
	}

	r = runFakeClients(t, fake.NewClientset(objs...), newRollouts(testRollout("pool-blue", rollingOut, always)), "rollout", "status", "pool-blue", "-o", "json")
	var doc RolloutStatus
	if err := yaml.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Nodes) != 3 {
		t.Fatalf("-o json: %v, %d nodes\n%s", err, len(doc.Nodes), r.out)
	}
	b := doc.Nodes[1]
	if b.Drain != contract.DrainAlways || !b.Unavailable || b.Detail != "Draining, waiting on default/web-0, default/web-1" ||
		b.Config.Reported == nil || b.Config.Reported.Phase != contract.PhaseDraining || len(b.Config.Reported.PendingPods) != 2 {
		t.Errorf("-o json: node-b %+v, reported %+v", b, b.Config.Reported)
	}
	if a := doc.Nodes[0]; a.Drain != "" {
		t.Errorf("-o json: node-a, without the annotation, has drain %q", a.Drain)
	}
}

func TestRolloutStatusFailedExitsWith3(t *testing.T) {
	r := runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), newRollouts(testRollout("pool-blue", failedRollout)), "rollout", "status", "pool-blue")
	if r.code != ExitRolloutFailed || !strings.Contains(r.errOut, "the rollout has failed: Node node-b: TrialFailed") {
		t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
	}
	if !strings.Contains(r.out, "State:    Reverting\n") || !strings.Contains(r.out, "TrialFailed") {
		t.Errorf("output:\n%s", r.out)
	}
}

func TestRolloutStatusStructured(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		r := runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), newRollouts(testRollout("pool-blue", rollingOut)), "rollout", "status", "pool-blue", "-o", format)
		if r.code != ExitOK {
			t.Fatalf("-o %s: exit %d: %s", format, r.code, r.errOut)
		}
		var doc struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			RolloutStatus
		}
		if err := yaml.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, r.out)
		}
		if doc.APIVersion != RolloutStatusAPIVersion || doc.Kind != RolloutStatusKind || doc.Rollout != "pool-blue" || doc.Generation != 2 {
			t.Errorf("-o %s: %s %s %s %d", format, doc.APIVersion, doc.Kind, doc.Rollout, doc.Generation)
		}
		if doc.Target == nil || *doc.Target != *v3 || doc.Status.Updated != 1 || doc.Spec.ConfigMapRef.Name != "v3" {
			t.Errorf("-o %s: target %v, status %+v", format, doc.Target, doc.Status)
		}
		if len(doc.Nodes) != 3 {
			t.Fatalf("-o %s: %d nodes", format, len(doc.Nodes))
		}
		a, b := doc.Nodes[0], doc.Nodes[1]
		if a.Node != "node-a" || a.State != rollout.StateUpdated || a.Rollout != "pool-blue" || a.PreviousConfigSource == nil || *a.PreviousConfigSource != "kubelet-configs/v2" {
			t.Errorf("-o %s: node-a %+v", format, a)
		}
		if b.State != rollout.StateInTrial || !b.Unavailable || b.PreviousConfigSource != nil || b.Config.Reported == nil || b.Config.Reported.LastKnownGood.Name != "v2" {
			t.Errorf("-o %s: node-b %+v", format, b)
		}
	}
}

// sequence makes every get of the rollout answer the next of states,
// then the last one for ever.
func sequence(client *nodeguardfake.Clientset, states ...*v1alpha1.KubeletConfigRollout) *atomic.Int32 {
	var gets atomic.Int32
	client.PrependReactor("get", "kubeletconfigrollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
		i := min(int(gets.Add(1))-1, len(states)-1)
		return true, states[i].DeepCopy(), nil
	})
	return &gets
}

func TestRolloutStatusWatch(t *testing.T) {
	stale := testRollout("pool-blue", completeRollout)
	stale.Generation = 3 // the controller has not seen the latest spec
	rollouts := newRollouts(testRollout("pool-blue", rollingOut))
	sequence(rollouts, stale, testRollout("pool-blue", rollingOut), testRollout("pool-blue", rollingOut), testRollout("pool-blue", completeRollout))
	r := runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), rollouts, "rollout", "status", "pool-blue", "-w")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", r.code, r.errOut, r.out)
	}
	lines := strings.Split(r.out, "\n")
	want := []string{
		`Waiting for rollout "pool-blue": the controller has not seen generation 3 yet`,
		`Waiting for rollout "pool-blue": RollingOut: 1 of 3 Nodes updated, 1 in trial`,
		"Rollout:  pool-blue",
		"State:    Complete",
	}
	if len(lines) < len(want) || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Errorf("output starts %q, want %q", lines[:min(len(lines), len(want))], want)
	}

	// Failed ends the watch too, with exit code 3; -o keeps the progress
	// off standard output.
	rollouts = newRollouts(testRollout("pool-blue", rollingOut))
	sequence(rollouts, testRollout("pool-blue", rollingOut), testRollout("pool-blue", failedRollout))
	r = runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), rollouts, "rollout", "status", "pool-blue", "--watch", "-o", "json")
	if r.code != ExitRolloutFailed || !strings.Contains(r.errOut, "Waiting for rollout") || !strings.HasPrefix(r.out, "{") {
		t.Errorf("failed: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}

	// A rollout past its progress deadline ends the watch with exit 1, as
	// kubectl rollout status does for a Deployment.
	stalled := func(r *v1alpha1.KubeletConfigRollout) {
		r.Status = v1alpha1.KubeletConfigRolloutStatus{ObservedGeneration: r.Generation, Target: v3, Selected: 3, Updated: 1, InTrial: 1}
		setConditions(r, "False/ProgressDeadlineExceeded/no Node was assigned or became updated for 10m0s; waiting on node-b", "False/ProgressDeadlineExceeded/1 of 3",
			"False/NoFailure/no Node has failed", "False/NotPaused/spec.paused is false")
	}
	rollouts = newRollouts(testRollout("pool-blue", rollingOut))
	sequence(rollouts, testRollout("pool-blue", rollingOut), testRollout("pool-blue", stalled))
	r = runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), rollouts, "rollout", "status", "pool-blue", "-w")
	if r.code != ExitError || !strings.Contains(r.errOut, "exceeded its progress deadline") || !strings.Contains(r.errOut, "waiting on node-b") {
		t.Errorf("stalled: exit %d, stderr %q", r.code, r.errOut)
	}

	// --timeout gives up with exit 1.
	rollouts = newRollouts(testRollout("pool-blue", rollingOut))
	r = runFakeClients(t, fake.NewClientset(rolloutNodes(t)...), rollouts, "rollout", "status", "pool-blue", "-w", "--timeout=30ms")
	if r.code != ExitError || !strings.Contains(r.errOut, "timed out after 30ms") {
		t.Errorf("timeout: exit %d, stderr %q", r.code, r.errOut)
	}
}

func TestRolloutStatusErrors(t *testing.T) {
	kube := fake.NewClientset(rolloutNodes(t)...)
	r := runFakeClients(t, kube, newRollouts(), "rollout", "status", "nope")
	if r.code != ExitError || !strings.Contains(r.errOut, `KubeletConfigRollout "nope" not found`) {
		t.Errorf("missing rollout: exit %d, stderr %q", r.code, r.errOut)
	}
	for _, args := range [][]string{
		{"rollout", "status"},
		{"rollout", "status", "a", "b"},
		{"rollout", "status", "pool-blue", "-o", "wide"},
		{"rollout", "status", "pool-blue", "--timeout=-1s"},
		{"rollout", "frobnicate"},
	} {
		r := runFakeClients(t, kube, newRollouts(testRollout("pool-blue")), args...)
		if r.code != ExitError || !strings.Contains(r.errOut, "--help' for usage") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, r.code, r.errOut)
		}
	}
	// A target that is not eligible is judged as the controller judges
	// it: as if it did not exist, so no Node is Updated.
	plain := testTarget()
	plain.Labels = nil
	objs := append(rolloutNodes(t)[:4], plain)
	r = runFakeClients(t, fake.NewClientset(objs...), newRollouts(testRollout("pool-blue", rollingOut)), "rollout", "status", "pool-blue", "-o", "json")
	if r.code != ExitOK || !strings.Contains(r.out, `"target": null`) || strings.Contains(r.out, `"state": "Updated"`) {
		t.Errorf("a target that is not eligible: exit %d:\n%s%s", r.code, r.out, r.errOut)
	}

	// No status yet, and a ConfigMap that does not exist: the Nodes are
	// still judged, against nothing.
	r = runFakeClients(t, fake.NewClientset(rolloutNodes(t)[:3]...), newRollouts(testRollout("pool-blue")), "rollout", "status", "pool-blue")
	if r.code != ExitOK || !strings.Contains(r.out, "is the rollout controller running?") || !strings.Contains(r.out, "(not rolled out yet)") {
		t.Errorf("no status: exit %d:\n%s%s", r.code, r.out, r.errOut)
	}
}
