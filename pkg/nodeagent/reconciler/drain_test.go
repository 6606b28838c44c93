package reconciler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
)

const (
	// staticCPU needs a drain: the kubelet's CPU manager checkpoint
	// records the none policy.
	staticCPU = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
	// staticCPUPlus is another static configuration: between the two, a
	// restart suffices.
	staticCPUPlus = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nregistryPullQPS: 7\n"
)

// replicated is a running pod a ReplicaSet recreates: a drain evicts it
// without being told it may.
func replicated(name string) *corev1.Pod {
	controller := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: &controller}}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// fakeDrainer is the Node and its pods as the API would keep them.
type fakeDrainer struct {
	node *corev1.Node
	pods []*corev1.Pod
	// blocked pods are refused eviction (a budget).
	blocked map[string]bool
	log     *[]string
}

func newFakeDrainer(log *[]string, pods ...string) *fakeDrainer {
	d := &fakeDrainer{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, blocked: map[string]bool{}, log: log}
	for _, name := range pods {
		d.pods = append(d.pods, replicated(name))
	}
	return d
}

func (d *fakeDrainer) Cordon(_ context.Context, node *corev1.Node, why string) (*corev1.Node, error) {
	if node.Spec.Unschedulable {
		return node, nil
	}
	d.node = d.node.DeepCopy()
	d.node.Spec.Unschedulable = true
	if d.node.Annotations == nil {
		d.node.Annotations = map[string]string{}
	}
	d.node.Annotations[contract.CordonedAnnotation] = why
	*d.log = append(*d.log, "cordon")
	return d.node, nil
}

func (d *fakeDrainer) Uncordon(_ context.Context, node *corev1.Node) (*corev1.Node, error) {
	if !drain.CordonedByAgent(node) {
		return node, nil
	}
	d.node = d.node.DeepCopy()
	d.node.Spec.Unschedulable = false
	delete(d.node.Annotations, contract.CordonedAnnotation)
	*d.log = append(*d.log, "uncordon")
	return d.node, nil
}

func (d *fakeDrainer) ListPods(context.Context) ([]*corev1.Pod, error) { return d.pods, nil }

func (d *fakeDrainer) Evict(_ context.Context, pods []*corev1.Pod) drain.Progress {
	var progress drain.Progress
	evicted := map[string]bool{}
	for _, p := range pods {
		if d.blocked[p.Name] {
			progress.Pending = append(progress.Pending, drain.Pending{Namespace: p.Namespace, Name: p.Name, Blocked: true, Why: "eviction refused: budget"})
			continue
		}
		evicted[p.Name] = true
		*d.log = append(*d.log, "evict "+p.Name)
	}
	d.pods = slices.DeleteFunc(d.pods, func(p *corev1.Pod) bool { return evicted[p.Name] })
	return progress
}

// online is the observation of a node assigned cm (nil: nothing), as the
// drainer's API has its Node.
func (d *fakeDrainer) online(cm *corev1.ConfigMap) Observation {
	obs := unassigned
	if cm != nil {
		obs = assigned(cm)
	}
	obs.Node, obs.Drainer = d.node.DeepCopy(), d
	return obs
}

// newDrainEnv is a node whose kubelet runs the local configuration, with
// the API's Node and pods behind a fake drainer; log gets the drainer's
// and the restarter's steps from then on.
func newDrainEnv(t *testing.T, pods ...string) (*env, *fakeDrainer, *[]string) {
	t.Helper()
	e := newEnv(t)
	log := &[]string{}
	e.restarter.log = log
	d := newFakeDrainer(log, pods...)
	e.settle(func() Observation { return d.online(nil) })
	return e, d, log
}

// settle runs the first passes on the local configuration (the first
// start writes the kubelet's file), then forgets the restarts they made.
func (e *env) settle(obs func() Observation) {
	e.t.Helper()
	for range 3 {
		e.sync(obs())
	}
	e.restarter.count = 0
	if e.restarter.log != nil {
		*e.restarter.log = nil
	}
}

func (e *env) writeState(name, content string) {
	e.t.Helper()
	if err := os.MkdirAll(e.rootDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.rootDir, name), []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) hasState(name string) bool {
	_, err := os.Stat(filepath.Join(e.rootDir, name))
	return err == nil
}

func TestChangeThatNeedsADrain(t *testing.T) {
	e, d, log := newDrainEnv(t, "web-0", "web-1")
	e.writeState("cpu_manager_state", `{"policyName":"none"}`)
	e.writeState("memory_manager_state", `{"policyName":"None"}`)

	cm := configMap("static", "u-s", "1", staticCPU)
	d.blocked["web-1"] = true
	r := e.sync(d.online(cm))
	if r.Report.Condition.Reason != contract.ReasonDraining || r.Report.Status.Phase != contract.PhaseDraining {
		t.Fatalf("while a budget holds a pod: %+v phase %q", r.Report.Condition, r.Report.Status.Phase)
	}
	if !slices.Equal(r.Report.Status.PendingPods, []string{"default/web-1"}) || !strings.Contains(r.Report.Condition.Message, "web-1") {
		t.Errorf("pending %v, message %q: want web-1 named", r.Report.Status.PendingPods, r.Report.Condition.Message)
	}
	if !slices.Equal(*log, []string{"cordon", "evict web-0"}) || e.restarter.count != 0 || strings.Contains(e.kubeletFile(), "static") {
		t.Fatalf("after the first step: %v, %d restarts; want cordoned and evicted, nothing written or restarted", *log, e.restarter.count)
	}
	if !hasEvent(r, contract.ReasonDraining) {
		t.Errorf("no %s event", contract.ReasonDraining)
	}

	delete(d.blocked, "web-1")
	r = e.sync(d.online(cm))
	if r.Report.Status.Phase != contract.PhaseRestarting || e.restarter.count != 0 {
		t.Fatalf("once drained: phase %q, %d restarts; want Restarting, the restart in the next pass", r.Report.Status.Phase, e.restarter.count)
	}
	r = e.sync(d.online(cm))
	refS := refOf(cm)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refS, active: refS, restarts: 1, fileHas: "cpuManagerPolicy: static"})
	if want := []string{"cordon", "evict web-0", "evict web-1", "stop", "start"}; !slices.Equal(*log, want) {
		t.Errorf("steps %v, want %v", *log, want)
	}
	if e.hasState("cpu_manager_state") {
		t.Error("cpu_manager_state survived the change of CPU manager policy")
	}
	if !e.hasState("memory_manager_state") {
		t.Error("memory_manager_state was removed, though the memory manager did not change")
	}
	if r.Report.Status.Phase != contract.PhaseTrialInProgress || !d.node.Spec.Unschedulable {
		t.Errorf("during the trial: phase %q, cordoned %v; want TrialInProgress and still cordoned", r.Report.Status.Phase, d.node.Spec.Unschedulable)
	}

	r = e.passTrial(d.online(cm))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refS, active: refS, lkg: refS, restarts: 1, fileHas: "cpuManagerPolicy: static"})
	if d.node.Spec.Unschedulable || drain.CordonedByAgent(d.node) {
		t.Error("the node is still cordoned after the trial passed")
	}

	// static -> static: a restart alone, no drain.
	*log = nil
	plus := configMap("static-plus", "u-p", "2", staticCPUPlus)
	r = e.sync(d.online(plus))
	if !slices.Equal(*log, []string{"restart"}) {
		t.Errorf("a change within the static policy took %v, want a restart alone", *log)
	}
}

func TestDrainTimesOut(t *testing.T) {
	e, d, log := newDrainEnv(t, "db-0")
	d.blocked["db-0"] = true
	cm := configMap("static", "u-s", "1", staticCPU)
	e.sync(d.online(cm))
	if !d.node.Spec.Unschedulable {
		t.Fatal("not cordoned")
	}
	e.clock.Step(testDrainTimeout)
	r := e.sync(d.online(cm))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonDrainTimedOut, errorHas: "db-0", assigned: refOf(cm), restarts: 0})
	if !slices.Equal(r.Report.Status.PendingPods, []string{"default/db-0"}) {
		t.Errorf("pendingPods %v, want the blocking pod", r.Report.Status.PendingPods)
	}
	if d.node.Spec.Unschedulable || drain.CordonedByAgent(d.node) {
		t.Error("left cordoned after the drain timed out")
	}
	if strings.Contains(e.kubeletFile(), "static") {
		t.Error("the change was written though its drain timed out")
	}
	// Not retried until the ConfigMap changes, and the status keeps
	// naming the pod.
	*log = nil
	r = e.sync(d.online(cm))
	if len(*log) != 0 || !slices.Equal(r.Report.Status.PendingPods, []string{"default/db-0"}) || r.Report.Condition.Reason != contract.ReasonDrainTimedOut {
		t.Errorf("the next pass: %v, %+v, pending %v", *log, r.Report.Condition, r.Report.Status.PendingPods)
	}
}

func TestFailedTrialGoesBackThroughADrain(t *testing.T) {
	e, d, log := newDrainEnv(t)
	cm := configMap("static", "u-s", "1", staticCPU)
	e.sync(d.online(cm)) // drained at once: no pods
	e.sync(d.online(cm)) // restarted into it
	e.writeState("cpu_manager_state", `{"policyName":"static"}`)
	*log = nil

	e.prober.err = errUnhealthy
	e.clock.Step(testTerms.Grace + testProbePeriod)
	r := e.sync(d.online(cm))
	if !hasEvent(r, contract.ReasonRolledBack) {
		t.Fatalf("the trial did not fail: %+v", r.Report.Condition)
	}
	for range 3 {
		if !strings.Contains(e.kubeletFile(), "static") {
			break
		}
		r = e.sync(d.online(cm))
	}
	if strings.Contains(e.kubeletFile(), "static") {
		t.Fatalf("not back on the local configuration after the rollback's drain: %v", *log)
	}
	if !slices.Contains(*log, "stop") || !slices.Contains(*log, "start") || e.hasState("cpu_manager_state") {
		t.Errorf("going back: %v, state left %v; want the kubelet stopped, its CPU manager checkpoint removed, started", *log, e.hasState("cpu_manager_state"))
	}
	e.sync(d.online(cm))
	if d.node.Spec.Unschedulable {
		t.Error("left cordoned after the rollback")
	}
}

func TestDrainNeverRestartsOnly(t *testing.T) {
	e, d, log := newDrainEnv(t, "web-0")
	d.node.Annotations = map[string]string{contract.DrainAnnotation: contract.DrainNever}
	cm := configMap("static", "u-s", "1", staticCPU)
	e.sync(d.online(cm))
	if !slices.Equal(*log, []string{"restart"}) {
		t.Errorf("with %s=%s: %v, want a restart alone", contract.DrainAnnotation, contract.DrainNever, *log)
	}
}

func TestDrainAlwaysDrainsARestartOnlyChange(t *testing.T) {
	e := newEnv(t)
	e.drainMode = contract.DrainAlways
	e.startAgent()
	log := &[]string{}
	e.restarter.log = log
	d := newFakeDrainer(log)
	e.settle(func() Observation { return d.online(nil) })
	d.pods = newFakeDrainer(log, "web-0").pods
	cm := configMap("a", "u-a", "1", goodA)
	e.sync(d.online(cm))
	e.sync(d.online(cm))
	if want := []string{"cordon", "evict web-0", "restart"}; !slices.Equal(*log, want) {
		t.Errorf("--drain=Always: %v, want %v", *log, want)
	}
}

// TestAgentRestartMidDrain: a new agent, started at any point of a drain,
// finishes it and leaves the Node uncordoned; one started after the
// change was written but before the restart still removes the state the
// change invalidates.
func TestAgentRestartMidDrain(t *testing.T) {
	for stop := 1; stop <= 4; stop++ {
		e, d, _ := newDrainEnv(t)
		e.writeState("cpu_manager_state", `{"policyName":"none"}`)
		cm := configMap("static", "u-s", "1", staticCPU)
		for range stop {
			e.sync(d.online(cm))
		}
		e.startAgent()
		for range 3 {
			e.sync(d.online(cm))
		}
		e.passTrial(d.online(cm))
		e.sync(d.online(cm))
		if d.node.Spec.Unschedulable || e.hasState("cpu_manager_state") || !strings.Contains(e.kubeletFile(), "static") {
			t.Errorf("restarted after %d passes: cordoned %v, stale state %v, file %q", stop, d.node.Spec.Unschedulable, e.hasState("cpu_manager_state"), e.kubeletFile())
		}
	}
}

// TestKilledBetweenWriteAndRestart: an agent that wrote the kubelet's file
// for a drained change and died before the restart leaves a file that no
// longer differs from the change; the next agent still stops the kubelet
// and removes the state the change invalidates, from the drain record.
func TestKilledBetweenWriteAndRestart(t *testing.T) {
	e, d, log := newDrainEnv(t)
	e.writeState("cpu_manager_state", `{"policyName":"none"}`)
	cm := configMap("static", "u-s", "1", staticCPU)
	e.sync(d.online(cm)) // drained: the restart is next
	e.restarter.err = errUnhealthy
	if _, err := e.c.Sync(quiet(t.Context()), d.online(cm)); err == nil {
		t.Fatal("the restart did not fail")
	}
	if !strings.Contains(e.kubeletFile(), "static") {
		t.Fatal("the file was not written before the restart")
	}
	e.restarter.err = nil
	e.startAgent()
	e.sync(d.online(cm))
	if e.hasState("cpu_manager_state") || !slices.Contains(*log, "stop") {
		t.Errorf("the new agent restarted without removing the CPU manager's checkpoint: %v", *log)
	}
	e.passTrial(d.online(cm))
	e.sync(d.online(cm))
	if d.node.Spec.Unschedulable {
		t.Error("left cordoned")
	}
}

// TestNothingToApplyLiftsTheCordon: a drain under way for a change that
// can no longer be rendered, nor anything else (the node's own
// configuration is gone), applies
// nothing, so it holds the Node no longer.
func TestNothingToApplyLiftsTheCordon(t *testing.T) {
	e, d, _ := newDrainEnv(t, "db-0")
	d.blocked["db-0"] = true
	cm := configMap("static", "u-s", "1", staticCPU)
	e.sync(d.online(cm))
	if !d.node.Spec.Unschedulable {
		t.Fatal("not cordoned for the drain")
	}
	if err := os.Remove(filepath.Join(e.dir, "local.yaml")); err != nil {
		t.Fatal(err)
	}
	r := e.sync(d.online(cm))
	if r.Report.Status.Error == "" {
		t.Errorf("condition %+v: the broken configuration is not reported", r.Report.Condition)
	}
	if d.node.Spec.Unschedulable || drain.CordonedByAgent(d.node) {
		t.Error("the Node stays cordoned for a change that cannot be applied")
	}
}

// TestInvalidDrainModeIsSaidOnce: an unknown nodeguard.dev/drain value
// falls back to the agent's --drain, with one Warning, not one a pass.
func TestInvalidDrainModeIsSaidOnce(t *testing.T) {
	e, d, _ := newDrainEnv(t, "db-0")
	d.blocked["db-0"] = true
	d.node.Annotations = map[string]string{contract.DrainAnnotation: "Sometimes"}
	cm := configMap("static", "u-s", "1", staticCPU)
	warnings := 0
	// A drain that waits on a budget plans the change every pass.
	for range 3 {
		for _, ev := range e.sync(d.online(cm)).Events {
			if ev.Reason == contract.ReasonAssignmentInvalid {
				warnings++
			}
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings about the drain mode in three passes, want 1", warnings)
	}
}
