package reconciler

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

var (
	maxPods150 = configMap("kubelet-150", "uid-150", "150", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 150\n")
	ref150     = refOf(maxPods150)
)

// A flag on the kubelet's command line wins over the file: the kubelet
// restarted with maxPods 50 in its file runs 20, and the trial fails naming
// the field, both values and the flag, before its period is over.
func TestTrialFailsWhenAFlagShadowsAField(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.running.flags = map[string]any{"maxPods": 20}
	e.running.flagz = map[string]string{"max-pods": "20"}
	e.sync(assigned(maxPods150))
	e.clock.Step(testProbePeriod)
	r := e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, assigned: ref150, restarts: 3,
		errorHas: "the kubelet does not run it: maxPods: 150 asked, 20 running (set by the kubelet's command line: --max-pods=20)"})
	if !hasEvent(r, contract.ReasonRolledBack) {
		t.Error("no RolledBack Event")
	}
	if r.Report.Status.Running != nil {
		t.Errorf("status.running = %+v for the local configuration, want none", r.Report.Status.Running)
	}
}

// A clean change passes once the running configuration is read and shows
// it; the status says so.
func TestTrialPassesWhenTheKubeletRunsIt(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(maxPods150))
	r := e.passTrial(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: ref150, active: ref150, lkg: ref150, restarts: 2})
	if rc := r.Report.Status.Running; rc == nil || rc.State != contract.RunningMatches {
		t.Errorf("status.running = %+v, want Matches", rc)
	}
	if !strings.Contains(r.Report.Condition.Message, "the kubelet runs it") {
		t.Errorf("condition message %q does not say the kubelet runs it", r.Report.Condition.Message)
	}
}

// A trial whose kubelet cannot be read does not pass, and says why; it
// passes once the kubelet can be read.
func TestTrialWaitsForTheRunningConfiguration(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.running.err = errors.New("the kubelet's authorizer refused the node (403 Forbidden)")
	e.sync(assigned(maxPods150))
	e.clock.Step(testTerms.Period)
	r := e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonConfigUnverified, assigned: ref150, active: ref150, restarts: 2,
		errorHas: "cannot tell that the kubelet runs it: its running configuration cannot be read: the kubelet's authorizer refused the node (403 Forbidden)"})
	if rc := r.Report.Status.Running; rc == nil || rc.State != contract.RunningUnknown || !strings.Contains(rc.Error, "403") {
		t.Errorf("status.running = %+v, want Unknown with the error", rc)
	}
	if r.Report.Status.Phase != contract.PhaseTrialInProgress {
		t.Errorf("phase = %q, want the trial still on", r.Report.Status.Phase)
	}
	e.running.err = nil
	e.clock.Step(testProbePeriod)
	r = e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: ref150, active: ref150, lkg: ref150, restarts: 2})
}

// Outside trials: a kubelet restarted by hand with the agent's file edited
// is drift, reported at the next check, and the file is restored.
func TestDriftInTheAgentsFileIsRestored(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(maxPods150))
	e.passTrial(assigned(maxPods150))

	edited := strings.Replace(e.kubeletFile(), "maxPods: 150", "maxPods: 30", 1)
	if err := os.WriteFile(e.kubeletCfg, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	e.running.start() // an administrator's restart
	e.clock.Step(time.Minute)
	r := e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonConfigDrifted, assigned: ref150, active: ref150, lkg: ref150, restarts: 3,
		fileHas: "maxPods: 150", errorHas: "maxPods: 150 asked, 30 running (the agent's file " + e.kubeletCfg + " was changed since the agent wrote it: it says 30); restoring the agent's file"})
	if !hasEvent(r, contract.ReasonConfigDrifted) || !hasEvent(r, contract.EventConfigApplied) {
		t.Errorf("events %+v, want ConfigDrifted and KubeletConfigApplied", r.Events)
	}
	// Read again a probe period after the restart: it runs as applied.
	e.clock.Step(testProbePeriod)
	r = e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: ref150, active: ref150, lkg: ref150, restarts: 3})
	if rc := r.Report.Status.Running; rc == nil || rc.State != contract.RunningMatches {
		t.Errorf("status.running = %+v, want Matches", rc)
	}
}

// Drift the agent does not own (a flag) is reported, not fought: no
// restart, the file left as it is, and it clears once the kubelet runs
// the configuration again.
func TestDriftFromAFlagIsReportedNotFought(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(maxPods150))
	e.passTrial(assigned(maxPods150))
	file := e.kubeletFile()

	e.running.flags = map[string]any{"maxPods": 20}
	e.running.flagz = map[string]string{"max-pods": "20"}
	e.running.start()
	e.clock.Step(time.Minute)
	r := e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonConfigDrifted, assigned: ref150, active: ref150, lkg: ref150, restarts: 2,
		errorHas: "--max-pods=20); the agent changes nothing it does not own"})
	rc := r.Report.Status.Running
	if rc == nil || rc.State != contract.RunningDiffers || len(rc.Differences) != 1 ||
		rc.Differences[0] != (contract.FieldDifference{Field: "maxPods", Asked: "150", Running: "20", Source: "set by the kubelet's command line: --max-pods=20"}) {
		t.Errorf("status.running = %+v", rc)
	}
	if e.kubeletFile() != file {
		t.Error("the agent rewrote its file for drift it does not own")
	}
	// Checked once a period, not once a pass: the next pass reads nothing.
	reads := e.running.readCount
	e.sync(assigned(maxPods150))
	if e.running.readCount != reads {
		t.Errorf("read the kubelet %d times in a pass before the period was over", e.running.readCount-reads)
	}
	if r.RequeueAfter <= 0 || r.RequeueAfter > time.Minute {
		t.Errorf("RequeueAfter = %v, want the next check within the period", r.RequeueAfter)
	}

	e.running.flags, e.running.flagz = nil, nil
	e.running.start()
	e.clock.Step(time.Minute)
	r = e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: ref150, active: ref150, lkg: ref150, restarts: 2})
}

// Outside trials, a kubelet that cannot be read is reported; the local
// configuration is the node's own, and never read.
func TestUnreadableRunningConfiguration(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.running.err = errors.New("the kubelet does not serve /configz")
	e.running.readCount = 0
	e.clock.Step(time.Minute)
	r := e.sync(unassigned)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 1})
	if e.running.readCount != 0 {
		t.Errorf("the local configuration was compared %d times", e.running.readCount)
	}

	e.running.err = nil
	e.sync(assigned(maxPods150))
	e.passTrial(assigned(maxPods150))
	e.running.err = errors.New("the kubelet does not serve /configz")
	e.clock.Step(time.Minute)
	r = e.sync(assigned(maxPods150))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonConfigUnverified, assigned: ref150, active: ref150, lkg: ref150, restarts: 2,
		errorHas: "the agent cannot tell that the kubelet runs ConfigMap kube-system/kubelet-150"})
}

// The restart-or-drain classification compares what the kubelet runs,
// not the file the agent last wrote: a kubelet that already runs the
// static CPU manager (its command line says so) is not drained for a
// configuration that asks for it.
func TestClassificationReadsTheRunningConfiguration(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	static := configMap("kubelet-static", "uid-static", "7", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
	e.running.flags = map[string]any{"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}
	e.running.flagz = map[string]string{"cpu-manager-policy": "static", "reserved-cpus": "0"}
	r := e.sync(assigned(static))
	if r.Report.Status.Phase != contract.PhaseTrialInProgress || hasEvent(r, contract.ReasonDraining) {
		t.Fatalf("phase %q, events %+v: want a restart, no drain", r.Report.Status.Phase, r.Events)
	}

	// The same change on a kubelet that runs none needs the drain.
	e2 := newEnv(t)
	e2.sync(unassigned)
	r = e2.sync(assigned(static))
	if r.Report.Status.Phase != contract.PhaseDraining {
		t.Fatalf("phase %q: want a drain", r.Report.Status.Phase)
	}
}
