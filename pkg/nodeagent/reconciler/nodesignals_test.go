package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// signalsPolicy judges trials by the Node and its pods too.
var signalsPolicy = trial.Terms{Period: testTerms.Period, Grace: testTerms.Grace, FailureThreshold: testTerms.FailureThreshold,
	Node: trial.NodeSignals{Ready: true, ReadyGrace: time.Minute, PressureConditions: trial.DefaultPressureConditions,
		PodFailureReasons: trial.DefaultPodFailureReasons, PodsStopped: true, Allocatable: true}}

// newSignalsEnv is a node whose agent judges trials by the Node and its
// pods.
func newSignalsEnv(t *testing.T) *env {
	e := newEnv(t)
	e.c.cfg.Trial = signalsPolicy
	return e
}

func readyNode(conditions ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status:     corev1.NodeStatus{Conditions: append([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, conditions...)},
	}
}

func pod(name string, phase corev1.PodPhase, reason string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: phase, Reason: reason, Message: "Node didn't have enough resource: pods"},
	}
}

// withNode adds the Node and its pods to an observation.
func withNode(obs Observation, node *corev1.Node, pods ...*corev1.Pod) Observation {
	obs.Node = node
	obs.Pods = func(context.Context) ([]*corev1.Pod, error) { return pods, nil }
	return obs
}

// TestRejectedPodRollsBack: a configuration the kubelet stays healthy with
// but that makes it reject a pod that ran before is rolled back, the
// status naming the pod and the kubelet's reason under RolledBack (the
// reason a rollout counts as a failed trial).
func TestRejectedPodRollsBack(t *testing.T) {
	e := newSignalsEnv(t)
	running := []*corev1.Pod{pod("a", corev1.PodRunning, ""), pod("b", corev1.PodRunning, "")}
	e.sync(withNode(unassigned, readyNode(), running...))
	r := e.sync(withNode(assigned(cmA), readyNode(), running...))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})

	e.clock.Step(testProbePeriod)
	r = e.sync(withNode(assigned(cmA), readyNode(), running[0], pod("b", corev1.PodFailed, "OutOfpods")))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack,
		errorHas: "pod default/b rejected by the kubelet: OutOfpods: Node didn't have enough resource: pods",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
	if !hasEvent(r, contract.ReasonRolledBack) {
		t.Error("no RolledBack event")
	}
	// It is not tried again.
	e.clock.Step(testTerms.Period)
	r = e.sync(withNode(assigned(cmA), readyNode(), running[0], pod("b", corev1.PodFailed, "OutOfpods")))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "OutOfpods",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}

// TestWhatWasThereBeforeDoesNotCount: a pod the kubelet rejected and a
// pressure condition raised before the configuration was applied are the
// node's, not the configuration's; its trial passes.
func TestWhatWasThereBeforeDoesNotCount(t *testing.T) {
	e := newSignalsEnv(t)
	pressure := corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure"}
	pods := []*corev1.Pod{pod("a", corev1.PodRunning, ""), pod("old", corev1.PodFailed, "OutOfpods")}
	before := withNode(assigned(cmA), readyNode(pressure), pods...)
	e.sync(withNode(unassigned, before.Node, pods...))
	e.sync(before)
	e.clock.Step(testProbePeriod)
	e.sync(before)
	r := e.passTrial(before)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 2})
}

// TestPressureRaisedRollsBack: a pressure condition raised during the
// trial fails it, naming the condition.
func TestPressureRaisedRollsBack(t *testing.T) {
	e := newSignalsEnv(t)
	e.sync(withNode(unassigned, readyNode()))
	e.sync(withNode(assigned(cmA), readyNode()))
	e.clock.Step(testProbePeriod)
	memory := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory", Message: "kubelet has insufficient memory available"}
	r := e.sync(withNode(assigned(cmA), readyNode(memory)))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack,
		errorHas: "the Node raised MemoryPressure=True KubeletHasInsufficientMemory: kubelet has insufficient memory available",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}

// TestNodeNotReadyRollsBack: a Node that does not become Ready again within
// the grace period of the restart fails the trial, although the kubelet
// answers its health checks.
func TestNodeNotReadyRollsBack(t *testing.T) {
	e := newSignalsEnv(t)
	notReady := readyNode()
	notReady.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}
	e.sync(withNode(unassigned, readyNode()))
	e.sync(withNode(assigned(cmA), readyNode()))
	for range 12 {
		e.clock.Step(testProbePeriod)
		r := e.sync(withNode(assigned(cmA), notReady))
		e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})
	}
	e.clock.Step(testProbePeriod)
	r := e.sync(withNode(assigned(cmA), notReady))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack,
		errorHas: "the Node has not been Ready for 1m0s (grace 1m0s): Ready=False KubeletNotReady: container runtime network not ready",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}

// TestAgentRestartTakesItsFirstLookAsTheBaseline: an agent restarted during
// a trial cannot know what the pods looked like before the restart; what
// it first sees is not held against the configuration, what fails after
// is.
func TestAgentRestartTakesItsFirstLookAsTheBaseline(t *testing.T) {
	e := newSignalsEnv(t)
	running := pod("a", corev1.PodRunning, "")
	e.sync(withNode(unassigned, readyNode(), running))
	e.sync(withNode(assigned(cmA), readyNode(), running))
	e.clock.Step(testProbePeriod)

	e.startAgent()
	e.c.cfg.Trial = signalsPolicy
	seen := withNode(assigned(cmA), readyNode(), running, pod("b", corev1.PodFailed, "OutOfpods"))
	r := e.sync(seen)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})

	e.clock.Step(testProbePeriod)
	r = e.sync(withNode(assigned(cmA), readyNode(), pod("a", corev1.PodFailed, "Evicted"), pod("b", corev1.PodFailed, "OutOfpods")))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack,
		errorHas: "pod default/a evicted by the kubelet: Evicted", assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}

// TestOfflineTrialIsJudgedByHealth: without the Node (the apiserver out of
// reach) the kubelet's health alone judges the trial, as before.
func TestOfflineTrialIsJudgedByHealth(t *testing.T) {
	e := newSignalsEnv(t)
	e.sync(withNode(unassigned, readyNode(), pod("a", corev1.PodRunning, "")))
	e.sync(withNode(assigned(cmA), readyNode(), pod("a", corev1.PodRunning, "")))
	e.clock.Step(testProbePeriod)
	e.sync(Observation{})
	r := e.passTrial(Observation{})
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 2})
}

// TestRunningPodEndedByTheKubeletRollsBack: a running pod the restarted
// kubelet rejected is killed, and its status then shows the phase its
// containers ended with and no reason; that fails the trial too.
func TestRunningPodEndedByTheKubeletRollsBack(t *testing.T) {
	e := newSignalsEnv(t)
	running := pod("a", corev1.PodRunning, "")
	e.sync(withNode(unassigned, readyNode(), running))
	e.sync(withNode(assigned(cmA), readyNode(), running))
	e.clock.Step(testProbePeriod)
	ended := pod("a", corev1.PodSucceeded, "")
	ended.Status.Message = ""
	r := e.sync(withNode(assigned(cmA), readyNode(), ended))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack,
		errorHas: "pod default/a stopped by the kubelet (Succeeded, restartPolicy Always, not deleted)",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}

// TestPodsAreListedOnlyForTrials: the agent lists the Node's pods just
// before a restart on trial and then once a probe period, with the probe;
// passes in between reuse the last list, and outside a trial none is made.
func TestPodsAreListedOnlyForTrials(t *testing.T) {
	e := newSignalsEnv(t)
	lists := 0
	counted := func(obs Observation) Observation {
		pods := []*corev1.Pod{pod("a", corev1.PodRunning, "")}
		obs.Node = readyNode()
		obs.Pods = func(context.Context) ([]*corev1.Pod, error) { lists++; return pods, nil }
		return obs
	}
	e.sync(counted(unassigned))
	e.sync(counted(unassigned))
	if lists != 0 {
		t.Fatalf("%d pod lists outside a trial", lists)
	}
	e.sync(counted(assigned(cmA)))
	if lists != 1 {
		t.Fatalf("%d pod lists for the restart, want 1 (the baseline)", lists)
	}
	e.sync(counted(assigned(cmA)))
	if lists != 1 {
		t.Errorf("%d pod lists after a pass within the probe period, want still 1", lists)
	}
	e.clock.Step(testProbePeriod)
	e.sync(counted(assigned(cmA)))
	if lists != 2 {
		t.Errorf("%d pod lists after a probe period, want 2", lists)
	}
	r := e.passTrial(counted(assigned(cmA)))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 2})
	after := lists
	e.clock.Step(testProbePeriod)
	e.sync(counted(assigned(cmA)))
	if lists != after {
		t.Errorf("%d pod lists after the trial ended", lists-after)
	}
}

// TestAFailedPodListLeavesThePodsUnknown: a list that fails neither fails
// the trial nor stops the Node's conditions from judging it.
func TestAFailedPodListLeavesThePodsUnknown(t *testing.T) {
	e := newSignalsEnv(t)
	failing := func(obs Observation, node *corev1.Node) Observation {
		obs.Node = node
		obs.Pods = func(context.Context) ([]*corev1.Pod, error) { return nil, errors.New("the apiserver is away") }
		return obs
	}
	e.sync(failing(unassigned, readyNode()))
	e.sync(failing(assigned(cmA), readyNode()))
	e.clock.Step(testProbePeriod)
	memory := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory"}
	r := e.sync(failing(assigned(cmA), readyNode(memory)))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "MemoryPressure",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
}
