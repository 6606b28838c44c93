package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestPauseAndResume: a pause holds back new assignments, and a resume
// carries the rollout through.
func TestPauseAndResume(t *testing.T) {
	settle(t, blue...)
	cm := configMap(t, "pause-65", "maxPods: 65\n")
	createRollout(t, "pause", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 1})
	waitRollout(t, "pause", "the canary updated", func(r *v1alpha1.KubeletConfigRollout) bool { return r.Status.Updated >= 1 })
	patchRollout(t, "pause", map[string]any{"paused": true})
	r := waitRollout(t, "pause", "Paused", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionPaused, v1alpha1.ReasonSpecPaused) && progressing(r, v1alpha1.ReasonPaused)
	})
	target := configNamespace + "/" + cm.Name
	atPause := sources(t, blue)
	assigned := 0
	for _, src := range atPause {
		if src == target {
			assigned++
		}
	}
	if assigned == len(blue) {
		t.Fatalf("every Node was assigned before the pause took effect: %s", describe(r))
	}
	holds(t, 4*trialPeriod, "a paused rollout assigns nothing", func() (bool, string) {
		now := sources(t, blue)
		return fmt.Sprint(now) == fmt.Sprint(atPause), fmt.Sprintf("%v -> %v", atPause, now)
	})
	patchRollout(t, "pause", map[string]any{"paused": false})
	waitRollout(t, "pause", "Complete after the resume", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "") && !isTrue(r, v1alpha1.ConditionPaused, "")
	})
	waitRuns(t, blue, cm)
}

// nodeEvents records every Node event of a watch, in order.
type nodeEvents struct {
	mu     sync.Mutex
	events []*corev1.Node
	stop   func()
}

func recordNodes(t *testing.T) *nodeEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	rec := &nodeEvents{}
	list, err := env.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := env.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				rec.mu.Lock()
				rec.events = append(rec.events, n)
				rec.mu.Unlock()
			}
		}
	}()
	rec.stop = func() { cancel(); w.Stop(); <-done }
	t.Cleanup(rec.stop)
	return rec
}

// first is the index of the first recorded event that satisfies want, -1
// for none.
func (r *nodeEvents) first(want func(*corev1.Node) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, n := range r.events {
		if want(n) {
			return i
		}
	}
	return -1
}

func statusOf(n *corev1.Node) contract.ConfigStatus {
	var st contract.ConfigStatus
	_ = json.Unmarshal([]byte(n.Annotations[contract.ConfigStatusAnnotation]), &st)
	return st
}

// TestNewResourceVersionStartsOverFromTheCanary: an edit of the target
// (a new resourceVersion) while some Nodes are not yet assigned starts the
// rollout over from the canary: no further Node is assigned the new version
// until the canary runs it through its trial.
func TestNewResourceVersionStartsOverFromTheCanary(t *testing.T) {
	settle(t, blue...)
	cm := configMap(t, "edit-66", "maxPods: 66\n")
	createRollout(t, "edit", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 1})
	waitRollout(t, "edit", "the canary updated", func(r *v1alpha1.KubeletConfigRollout) bool { return r.Status.Updated >= 1 })
	patchRollout(t, "edit", map[string]any{"paused": true})
	waitRollout(t, "edit", "Paused", func(r *v1alpha1.KubeletConfigRollout) bool { return progressing(r, v1alpha1.ReasonPaused) })
	target := configNamespace + "/" + cm.Name
	var moved, waiting []string
	for name, src := range sources(t, blue) {
		if src == target {
			moved = append(moved, name)
		} else {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		t.Fatal("every Node was assigned before the pause")
	}
	edited := configMap(t, "edit-66", "maxPods: 67\n")
	waitRollout(t, "edit", "the new resourceVersion as target", func(r *v1alpha1.KubeletConfigRollout) bool {
		return r.Status.Target != nil && r.Status.Target.ResourceVersion == edited.ResourceVersion
	})
	// The agents follow the ConfigMap: the Nodes already assigned take the
	// edit at once (docs/rollouts.md); the canary of the new version is
	// among them.
	rec := recordNodes(t)
	patchRollout(t, "edit", map[string]any{"paused": false})
	waitRollout(t, "edit", "Complete on the new version", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "") && r.Status.Target.ResourceVersion == edited.ResourceVersion
	})
	waitRuns(t, blue, edited)
	rec.stop()
	canaryDone := rec.first(func(n *corev1.Node) bool {
		st := statusOf(n)
		return slices.Contains(moved, n.Name) && framework.RefersTo(st.LastKnownGood, edited)
	})
	nextAssigned := rec.first(func(n *corev1.Node) bool {
		return slices.Contains(waiting, n.Name) && n.Annotations[contract.ConfigSourceAnnotation] == target
	})
	if nextAssigned < 0 || canaryDone < 0 || nextAssigned < canaryDone {
		t.Errorf("a Node waiting (%v) was assigned (event %d) before a canary (%v) ran the new version (event %d)", waiting, nextAssigned, moved, canaryDone)
	}
}

// TestNodeJoiningTheSelectionGetsTheTarget: a Node labelled into a
// completed rollout's selection is assigned its target.
func TestNodeJoiningTheSelectionGetsTheTarget(t *testing.T) {
	settle(t, green...)
	const key = contract.Domain + "/e2e-join"
	label(t, key, ptr("yes"), "green-a")
	t.Cleanup(func() { label(t, key, nil, green...) })
	cm := configMap(t, "join-68", "maxPods: 68\n")
	createRollout(t, "join", rolloutSpec{selector: metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}, configMap: cm.Name})
	waitRollout(t, "join", "Complete on one Node", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "") && r.Status.Selected == 1
	})
	label(t, key, ptr("yes"), "green-b")
	waitRollout(t, "join", "Complete on both", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "") && r.Status.Selected == 2
	})
	waitRuns(t, green, cm)
}

// TestTwoRolloutsOverOneNode: a Node two rollouts select is left alone by
// both, and both say so.
func TestTwoRolloutsOverOneNode(t *testing.T) {
	settle(t, green...)
	const key = contract.Domain + "/e2e-overlap"
	label(t, key, ptr("yes"), "green-b")
	t.Cleanup(func() { label(t, key, nil, "green-b") })
	before := source(t, "green-b")
	wide := configMap(t, "wide-69", "maxPods: 69\n")
	narrow := configMap(t, "narrow-70", "maxPods: 70\n")
	createRollout(t, "wide", rolloutSpec{selector: pool("green"), configMap: wide.Name})
	createRollout(t, "narrow", rolloutSpec{selector: metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}, configMap: narrow.Name})
	// Runs before the deletions (cleanups run last first). Once either
	// rollout is gone the other one is free to move green-b, and the tests
	// after this one would find its kubelet restarting: both are paused
	// first, and the controller sees the pauses before either deletion.
	t.Cleanup(func() { pauseInCleanup(t, "wide", "narrow") })
	mentions := func(name, other string) func(*v1alpha1.KubeletConfigRollout) bool {
		return func(r *v1alpha1.KubeletConfigRollout) bool {
			c := condition(r, v1alpha1.ConditionProgressing)
			return c != nil && c.Reason == v1alpha1.ReasonNodesInConflict && strings.Contains(c.Message, "green-b") && strings.Contains(c.Message, other)
		}
	}
	waitRollout(t, "wide", "green-a updated, green-b left alone", func(r *v1alpha1.KubeletConfigRollout) bool {
		return mentions("wide", "narrow")(r) && r.Status.Updated == 1
	})
	waitRollout(t, "narrow", "green-b left alone", mentions("narrow", "wide"))
	waitRuns(t, []string{"green-a"}, wide)
	holds(t, 2*trialPeriod, "green-b is left alone", func() (bool, string) {
		got := source(t, "green-b")
		return got == before, got
	})
}

// TestNotReadyNodeCountsAgainstMaxUnavailable: a Node whose kubelet was
// stopped before the rollout started, marked by the node lifecycle
// controller, takes up maxUnavailable: nothing is assigned until it is back.
func TestNotReadyNodeCountsAgainstMaxUnavailable(t *testing.T) {
	settle(t, green...)
	stopped := time.Now()
	if out, err := nodes["green-b"].Systemctl(t.Context(), "stop"); err != nil {
		t.Fatalf("stopping the kubelet: %q, %v", out, err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			_, _ = nodes["green-b"].Systemctl(context.Background(), "start")
		}
	})
	if _, err := env.WaitNodeNotReady(t.Context(), "green-b", waitTimeout); err != nil {
		// Say what started the kubelet again, if anything did.
		restarts, jerr := nodes["green-b"].KubeletRestarts()
		var since []string
		for _, r := range restarts {
			if r.Time.After(stopped) {
				since = append(since, fmt.Sprintf("%s %s (%s)", r.Time.Format(time.RFC3339Nano), r.Cause, r.Behavior))
			}
		}
		unit, _ := nodes["green-b"].Systemctl(context.Background(), "status")
		t.Fatalf("%v; the unit is %q; kubelet starts since the stop at %s: %v %v", err, unit, stopped.Format(time.RFC3339Nano), since, jerr)
	}
	before := sources(t, green)
	cm := configMap(t, "notready-71", "maxPods: 71\n")
	createRollout(t, "notready", rolloutSpec{selector: pool("green"), configMap: cm.Name, maxUnavailable: 1})
	waitRollout(t, "notready", "waiting on green-b", func(r *v1alpha1.KubeletConfigRollout) bool {
		c := condition(r, v1alpha1.ConditionProgressing)
		return c != nil && strings.Contains(c.Message, "green-b (not Ready")
	})
	holds(t, 3*trialPeriod, "nothing is assigned while green-b is down", func() (bool, string) {
		now := sources(t, green)
		return fmt.Sprint(now) == fmt.Sprint(before), fmt.Sprint(now)
	})
	if out, err := nodes["green-b"].Systemctl(t.Context(), "start"); err != nil {
		t.Fatalf("starting the kubelet: %q, %v", out, err)
	}
	started = true
	waitRollout(t, "notready", "Complete once green-b is back", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "")
	})
	waitRuns(t, green, cm)
}

// TestDeletedRolloutLeavesAssignments: deleting a rollout mid-way leaves
// every assignment, and the bookkeeping, as it is.
func TestDeletedRolloutLeavesAssignments(t *testing.T) {
	settle(t, blue...)
	cm := configMap(t, "deleted-72", "maxPods: 72\n")
	createRollout(t, "deleted", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 1})
	waitRollout(t, "deleted", "the canary updated", func(r *v1alpha1.KubeletConfigRollout) bool { return r.Status.Updated >= 1 })
	deleteRollout(t, "deleted")
	if err := framework.Eventually(t.Context(), waitTimeout, "the rollout gone", func(ctx context.Context) (bool, string, error) {
		_, err := getRollout(ctx, "deleted")
		return err != nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	atDelete := sources(t, blue)
	target := configNamespace + "/" + cm.Name
	var moved []string
	for name, src := range atDelete {
		if src == target {
			moved = append(moved, name)
		}
	}
	if len(moved) == 0 || len(moved) == len(blue) {
		t.Fatalf("want the rollout deleted mid-way; assigned: %v", atDelete)
	}
	holds(t, 4*trialPeriod, "nothing moves after the delete", func() (bool, string) {
		now := sources(t, blue)
		return fmt.Sprint(now) == fmt.Sprint(atDelete), fmt.Sprint(now)
	})
	for _, name := range moved {
		if got := node(t, name).Annotations[contract.RolloutAnnotation]; got != "deleted" {
			t.Errorf("%s: bookkeeping %s=%q, want it kept", name, contract.RolloutAnnotation, got)
		}
	}
}

// TestAssignmentRefusedFailsTheRollout: admission refuses assigning the
// canary a configuration for what the configuration is, not for what the
// Node reports (a feature gate no kubelet nodeguard knows; the canary's
// version is unparseable, so rule 5 judges it against every kubelet, and the
// refusal carries no node-state cause); the rollout fails with
// AssignmentRefused naming it, and the other Node is untouched. (A refusal
// for the Node's own state skips that Node instead:
// TestANodeRefusedForItsOwnStateIsSkipped.)
func TestAssignmentRefusedFailsTheRollout(t *testing.T) {
	settle(t, "green-a")
	const key, old = contract.Domain + "/e2e-refused", "aaa-old"
	if _, err := env.Admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: old, Labels: map[string]string{key: "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Admin.CoreV1().Nodes().Delete(context.Background(), old, metav1.DeleteOptions{}) })
	// A version nodeguard cannot parse, and Ready. The node lifecycle
	// controller writes the new Node too, hence the retries.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Admin.CoreV1().Nodes().Get(t.Context(), old, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.NodeInfo.KubeletVersion = "garbage"
		now := metav1.NewTime(time.Now())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = env.Admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	label(t, key, ptr("yes"), "green-a")
	t.Cleanup(func() { label(t, key, nil, "green-a") })
	before := source(t, "green-a")
	cm := configMap(t, "no-such-gate", "featureGates:\n  NoSuchGate: true\n")
	createRollout(t, "refused", rolloutSpec{selector: metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}, configMap: cm.Name, maxUnavailable: 2})
	r := waitRollout(t, "refused", "Failed with AssignmentRefused", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionFailed, v1alpha1.ReasonAssignmentRefused)
	})
	msg := condition(r, v1alpha1.ConditionFailed).Message
	if !strings.Contains(msg, "Node "+old) || !strings.Contains(msg, "nodeguard rule 5") {
		t.Errorf("Failed does not name %s and the rule: %q", old, msg)
	}
	holds(t, 2*trialPeriod, "nothing is assigned after the refusal", func() (bool, string) {
		a, b := source(t, old), source(t, "green-a")
		return a == "<absent>" && b == before, a + " " + b
	})
}
