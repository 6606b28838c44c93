package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// flappingTrial is long enough for every fault below to happen while the
// configuration is still on trial; each test checks that it was.
const flappingTrial = "--trial-period=10s"

// onTrial waits until cm is active and on trial.
func (n *node) onTrial(cm *corev1.ConfigMap) {
	n.t.Helper()
	n.waitReport(cm.Name+" on trial", func(o framework.Report) bool {
		return is(o.Status.Active, cm) && reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress)
	})
}

// stillOnTrial fails the test when cm's trial has ended: a fault meant to
// happen during the trial came too late to prove anything.
func (n *node) stillOnTrial(cm *corev1.ConfigMap) {
	n.t.Helper()
	if o := n.observe(); !is(o.Status.Active, cm) || !reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress) {
		n.t.Fatalf("the trial of %s ended before the faults were over (the machine is too slow for %s): %v", cm.Name, flappingTrial, o)
	}
}

// The failure threshold of these nodes is 3 failed probes (framework
// default), one probe every 200ms.

// blips is the stub's reason in these tests: a real kubelet's health check
// does not fail once on demand while the kubelet keeps running.
const blips = "health checks that fail once, on demand, while the kubelet runs"

// TestAdminRestartDuringTrial: an administrator restarts the real kubelet
// during a trial (systemctl restart kubelet): the kubelet goes down and
// comes back, it does not crash-loop, and the configuration passes.
func TestAdminRestartDuringTrial(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.onTrial(a)

	if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
		t.Fatal(err)
	}
	n.stillOnTrial(a)
	n.passed(a)
	got := n.restartRecords()
	if len(got) != 3 || got[2].Cause != "restart" || got[len(got)-1].Behavior != framework.KubeletRunning {
		t.Errorf("kubelet starts %+v, want the first, the agent's and the administrator's, still running", got)
	}
	for _, r := range got[:len(got)-1] {
		if r.Behavior != framework.KubeletStopped {
			t.Errorf("a run of the kubelet crashed: %+v", got)
		}
	}
}

// TestAdminRestartAndBlipsDuringTrial: an administrator restarts the kubelet
// and its health check fails once more, on its own, during a trial: the
// kubelet flaps, it does not crash-loop, and the configuration passes.
func TestAdminRestartAndBlipsDuringTrial(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}, stub: &framework.StubKubelet{Reason: blips, StartupDelay: 20 * time.Millisecond}})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.onTrial(a)

	if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.FailKubeletProbes(n.ctx, 1); err != nil {
		t.Fatal(err)
	}
	n.stillOnTrial(a)
	n.passed(a)
	if got := n.restarts(); len(got) != 3 {
		t.Errorf("kubelet starts %v, want the first, the agent's and the administrator's", got)
	}
}

// TestAgentRestartForgetsFailures: two failed probes, the agent restarts,
// two more. Four failures during one trial, but no agent saw three: the
// configuration passes. (Reboots are covered by the reconciler's table
// test, where the boot ID can change.)
func TestAgentRestartForgetsFailures(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}, stub: &framework.StubKubelet{Reason: blips}})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.onTrial(a)

	if err := n.FailKubeletProbes(n.ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := n.KillAgent(); err != nil {
		t.Fatal(err)
	}
	n.startAgent()
	if err := n.FailKubeletProbes(n.ctx, 2); err != nil {
		t.Fatal(err)
	}
	n.stillOnTrial(a)
	n.passed(a)
	if got := n.restarts(); len(got) != 2 {
		t.Errorf("kubelet starts %v: the restarted agent restarted the kubelet", got)
	}
}

// TestCrashLoopingConfigRollsBack: a configuration that passes admission
// but makes the real kubelet exit at start-up (reserved CPUs this machine
// does not have) crash-loops under Restart=always: it is rolled back, the
// kubelet runs the local configuration again and the Node is Ready again.
func TestCrashLoopingConfigRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}})
	loop := n.configMap("kubelet-loop", "maxPods: 42\n"+framework.CrashingKubelet())
	n.assign("kubelet-loop")
	o := n.waitReport("the crash-looping config rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, loop) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if o.Status.Error == "" {
		t.Errorf("the status does not say why: %+v", o.Status)
	}
	n.eventually("the kubelet to run the local configuration again", func() (bool, string) {
		r := n.restartRecords()
		return len(r) > 0 && r[len(r)-1].Behavior == framework.KubeletRunning && r[len(r)-1].SHA256 == n.localConfigSHA256(), fmt.Sprintf("%+v", r)
	})
	crashes := 0
	for _, r := range n.restartRecords() {
		if r.Behavior == framework.KubeletCrashed {
			crashes++
		}
	}
	if crashes < 1 {
		t.Errorf("the kubelet never crashed on the bad configuration: %+v", n.restartRecords())
	}
	n.waitNodeReady()
}

// TestCrashLoopHealthyBetweenCrashes: a configuration that makes the kubelet
// crash again and again, coming back healthy in between, is rolled back on
// the failures it causes, not because the kubelet never came up.
func TestCrashLoopHealthyBetweenCrashes(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial},
		stub: &framework.StubKubelet{Reason: "a kubelet that serves for a set time between crashes, which no configuration makes a real one do"}})
	// The stub reads its behaviour from staticPodURL, a dangerous field
	// the agent applies only where the ConfigMap allows it.
	loop := n.allowDangerous(n.configMap("kubelet-loop", "maxPods: 42\nstaticPodURL: http://kubeletstub.invalid/crashloop?up=500ms&down=300ms\n"), "staticPodURL")
	n.assign("kubelet-loop")
	o := n.waitReport("the crash-looping config rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, loop) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if !strings.Contains(o.Status.Error, "failed 3 health checks") {
		t.Errorf("the status does not blame the failures: %q", o.Status.Error)
	}
	n.eventually("the kubelet to run the local configuration again", func() (bool, string) {
		r := n.restarts()
		return len(r) == 3 && r[1] == "crashloop" && r[2] == "healthy", strings.Join(r, " ")
	})
}
