package agent_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// flappingTrial is long enough for every fault below to happen while the
// configuration is still on trial; each test checks that it was.
const flappingTrial = "--trial-period=10s"

// onTrial waits until cm is active and on trial.
func (n *node) onTrial(cm *corev1.ConfigMap) {
	n.t.Helper()
	n.waitReport(cm.Name+" on trial", func(o framework.Report) bool {
		return is(o.Status.Active, cm) && reason(o, corev1.ConditionFalse, status.ReasonTrialInProgress)
	})
}

// stillOnTrial fails the test when cm's trial has ended: a fault meant to
// happen during the trial came too late to prove anything.
func (n *node) stillOnTrial(cm *corev1.ConfigMap) {
	n.t.Helper()
	if o := n.observe(); !is(o.Status.Active, cm) || !reason(o, corev1.ConditionFalse, status.ReasonTrialInProgress) {
		n.t.Fatalf("the trial of %s ended before the faults were over (the machine is too slow for %s): %v", cm.Name, flappingTrial, o)
	}
}

// The failure threshold of these nodes is 3 failed probes (framework
// default), one probe every 200ms.

// TestAdminRestartAndBlipsDuringTrial: an administrator restarts the kubelet
// and its health check fails once more, on its own, during a trial: the
// kubelet flaps, it does not crash-loop, and the configuration passes.
func TestAdminRestartAndBlipsDuringTrial(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}, stubStartupDelay: 20 * time.Millisecond})
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
// configuration passes. (Reboots are covered by the controller's table
// test, where the boot ID can change.)
func TestAgentRestartForgetsFailures(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}})
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

// TestCrashLoopingConfigRollsBack: a configuration that makes the kubelet
// crash again and again, coming back healthy in between (as under
// systemd's Restart=always), is rolled back on the failures it causes, not
// because the kubelet never came up.
func TestCrashLoopingConfigRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{flappingTrial}})
	loop := n.configMap("kubelet-loop", "maxPods: 42\nstaticPodURL: http://kubeletstub.invalid/crashloop?up=500ms&down=300ms\n")
	n.assign("kubelet-loop")
	o := n.waitReport("the crash-looping config rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, loop) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, status.ReasonRolledBack)
	})
	if !strings.Contains(o.Status.Error, "failed 3 health checks") {
		t.Errorf("the status does not blame the failures: %q", o.Status.Error)
	}
	n.eventually("the kubelet to run the local configuration again", func() (bool, string) {
		r := n.restarts()
		return len(r) == 3 && r[1] == "crashloop" && r[2] == "healthy", strings.Join(r, " ")
	})
}
