package reconciler

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/statedir"
)

var (
	cmA  = configMap("kubelet-a", "uid-a", "10", goodA)
	cmB  = configMap("kubelet-b", "uid-b", "20", goodB)
	refA = refOf(cmA)
	refB = refOf(cmB)
)

func TestFreshNodeAdoptsTheLocalConfigWithoutRestart(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Dir(e.kubeletCfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.kubeletCfg, []byte(localConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.sync(unassigned)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 0, fileHas: "providerID: node-1"})
}

func TestFreshNodeWritesTheLocalConfig(t *testing.T) {
	e := newEnv(t)
	r := e.sync(unassigned)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 1, fileHas: localConfig})
	// Nothing changes: nothing happens.
	r = e.sync(unassigned)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 1})
}

func TestGoodConfigPassesItsTrial(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	r := e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2, fileHas: "registryPullQPS: 7"})
	if r.RequeueAfter != testProbePeriod {
		t.Errorf("RequeueAfter = %v during a trial, want the probe period", r.RequeueAfter)
	}
	// Node-local fields come from the node.
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2, fileHas: "providerID: node-1"})

	e.clock.Step(testTerms.Period / 2)
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})

	r = e.passTrial(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 2})
	if r.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v after the trial", r.RequeueAfter)
	}
	if tr, _ := e.store().Trial(); tr != nil {
		t.Errorf("the trial record outlived the trial: %+v", tr)
	}
}

func TestInvalidConfigIsNeverApplied(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	bad := configMap("kubelet-bad", "uid-bad", "5", invalid)
	r := e.sync(assigned(bad))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonValidationFailed, errorHas: "maxPodz",
		assigned: refOf(bad), active: nil, restarts: 1, fileHas: localConfig})
	if !hasEvent(r, contract.ReasonValidationFailed) {
		t.Error("no ValidationFailed event")
	}
	// The warning is not repeated on every pass.
	if r = e.sync(assigned(bad)); hasEvent(r, contract.ReasonValidationFailed) {
		t.Error("the ValidationFailed event was repeated")
	}
}

func TestValidationCases(t *testing.T) {
	noKey := configMap("kubelet-nokey", "uid-n", "1", "")
	delete(noKey.Data, contract.ConfigMapKey)
	notEligible := configMap("kubelet-x", "uid-x", "1", goodA)
	notEligible.Labels = nil
	gate := configMap("kubelet-gate", "uid-g", "1", goodA+"featureGates:\n  NoSuchGate: true\n")
	unsafeLocal := configMap("kubelet-port", "uid-p", "1", goodA)

	cases := []struct {
		name     string
		cm       *corev1.ConfigMap
		errorHas string
		assigned *contract.ConfigMapVersion
	}{
		{name: "missing key", cm: noKey, errorHas: `no data key "kubelet"`, assigned: refOf(noKey)},
		{name: "not eligible", cm: notEligible, errorHas: "not labelled", assigned: refOf(notEligible)},
		{name: "unknown feature gate", cm: gate, errorHas: "NoSuchGate", assigned: refOf(gate)},
		{name: "sound config", cm: unsafeLocal, assigned: refOf(unsafeLocal)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.sync(unassigned)
			r := e.sync(assigned(tc.cm))
			if tc.errorHas == "" {
				e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: tc.assigned, active: tc.assigned, restarts: 2})
				return
			}
			e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonValidationFailed, errorHas: tc.errorHas,
				assigned: tc.assigned, restarts: 1, fileHas: localConfig})
		})
	}
}

func TestKubeletNeverHealthyRollsBackToLocal(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.prober.err = errUnhealthy
	e.sync(assigned(cmA))
	e.clock.Step(30 * time.Second)
	r := e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})

	e.clock.Step(31 * time.Second)
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "did not become healthy within 1m0s",
		assigned: refA, active: nil, restarts: 3, fileHas: localConfig})
	if !hasEvent(r, contract.ReasonRolledBack) {
		t.Error("no RolledBack event")
	}

	// Not retried while the ConfigMap is unchanged, even by a new agent.
	e.startAgent()
	e.prober.err = nil
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "not retried",
		assigned: refA, active: nil, restarts: 3})

	// An edit is a new resourceVersion, hence a new trial.
	edited := configMap("kubelet-a", "uid-a", "11", goodA+"podPidsLimit: 100\n")
	r = e.sync(assigned(edited))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refOf(edited), active: refOf(edited), restarts: 4})
}

func TestRepeatedFailuresRollBackToLastKnownGood(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.passTrial(assigned(cmA))

	r := e.sync(assigned(cmB))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refB, active: refB, lkg: refA, restarts: 3})
	// Healthy at first (probed a period after the restart).
	e.clock.Step(testProbePeriod)
	e.sync(assigned(cmB))
	for i := range testTerms.FailureThreshold {
		e.prober.err = errUnhealthy
		if i%2 == 1 {
			// A crash loop that comes back between probes still counts.
			e.prober.err = nil
			e.clock.Step(testProbePeriod)
			e.sync(assigned(cmB))
			e.prober.err = errUnhealthy
		}
		e.clock.Step(testProbePeriod)
		r = e.sync(assigned(cmB))
	}
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "failed 3 health checks",
		assigned: refB, active: refA, lkg: refA, restarts: 4, fileHas: "registryPullQPS: 7"})
	bad, err := e.store().Bad()
	if err != nil || len(bad) != 1 || bad[0].Ref != *refB {
		t.Fatalf("bad list = %+v, %v; want B", bad, err)
	}
	// Going back to A (last-known-good) needs no trial.
	e.prober.err = nil
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 4})
}

func TestAgentRestartDuringTrial(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	// Two failures seen by the first agent process...
	e.prober.err = nil
	e.clock.Step(testProbePeriod)
	e.sync(assigned(cmA))
	e.prober.err = errUnhealthy
	for range 2 {
		e.clock.Step(testProbePeriod)
		e.sync(assigned(cmA))
	}
	// ...are forgotten by the next one, which does not restart the kubelet.
	e.startAgent()
	e.clock.Step(testProbePeriod)
	r := e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})
	// The trial keeps its start: the period ends on time.
	e.prober.err = nil
	e.clock.Step(testTerms.Period - 4*testProbePeriod)
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refA, active: refA, lkg: refA, restarts: 2})
}

func TestRebootDuringTrialStartsItOver(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.clock.Step(testTerms.Period - time.Second)
	e.sync(assigned(cmA))

	e.clock.Reboot("boot-2", 30*time.Second)
	e.startAgent()
	r := e.sync(Observation{}) // offline after the reboot
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})
	tr, err := e.store().Trial()
	if err != nil || tr == nil || tr.BootID != "boot-2" || tr.StartedSinceBoot != 30*time.Second {
		t.Fatalf("trial after reboot = %+v, %v", tr, err)
	}
	e.clock.Step(testTerms.Period - time.Second)
	if r = e.sync(Observation{}); hasEvent(r, contract.EventTrialPassed) {
		t.Fatal("time before the reboot counted")
	}
	e.clock.Step(time.Second)
	if r = e.sync(Observation{}); !hasEvent(r, contract.EventTrialPassed) {
		t.Fatalf("the trial did not pass on the new boot: %+v", r.Report.Condition)
	}
}

func TestOfflineStartUsesCheckpoints(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.passTrial(assigned(cmA))
	e.sync(assigned(cmB))

	// The agent restarts while the apiserver is away: nothing to download,
	// B stays on trial and the kubelet is left alone.
	e.startAgent()
	r := e.sync(Observation{})
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refB, active: refB, lkg: refA, restarts: 3})

	// Someone rewrote the kubelet file meanwhile: put it back.
	if err := os.WriteFile(e.kubeletCfg, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.sync(Observation{})
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refB, active: refB, lkg: refA, restarts: 4, fileHas: "registryPullQPS: 8"})
}

func TestConfigMapDeletedAndRecreated(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.passTrial(assigned(cmA))

	gone := assigned(cmA)
	gone.ConfigMap = nil
	gone.ConfigMapErr = apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, cmA.Name)
	r := e.sync(gone)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonDownloadFailed, errorHas: "not found",
		assigned: refA, active: refA, lkg: refA, restarts: 2})

	recreated := configMap("kubelet-a", "uid-a2", "30", goodB)
	r = e.sync(assigned(recreated))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refOf(recreated), active: refOf(recreated), lkg: refA, restarts: 3, fileHas: "registryPullQPS: 8"})
}

func TestNewAssignmentNotReadableYet(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	pending := assigned(cmB)
	pending.ConfigMap = nil
	r := e.sync(pending)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonDownloading,
		assigned: &contract.ConfigMapVersion{Namespace: "kube-system", Name: "kubelet-b"}, active: refA, restarts: 2})
	pending.ConfigMapErr = errors.New(`configmaps "kubelet-b" is forbidden`)
	r = e.sync(pending)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonDownloadFailed, errorHas: "forbidden",
		assigned: &contract.ConfigMapVersion{Namespace: "kube-system", Name: "kubelet-b"}, active: refA, restarts: 2})
}

func TestClearingTheAssignmentGoesBackToLocal(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.passTrial(assigned(cmA))
	r := e.sync(unassigned)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 3, fileHas: localConfig})
	in, err := statedir.Inspect(e.store().Dir())
	if err != nil || len(in.Checkpoints) != 0 {
		t.Fatalf("checkpoints left after going local: %v, %v", in.Checkpoints, err)
	}
}

func TestMalformedAssignmentKeepsTheCurrentConfig(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	obs := Observation{Online: true, KubeletVersion: kubeletVersion, AssignmentErr: errors.New(`config source "nope": want <namespace>/<name>`)}
	r := e.sync(obs)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonAssignmentInvalid, errorHas: "want <namespace>/<name>",
		assigned: refA, active: refA, restarts: 2})
}

func TestCorruptCheckpoints(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.sync(assigned(cmA))
	e.passTrial(assigned(cmA))
	e.sync(assigned(cmB))
	e.passTrial(assigned(cmB)) // B is now assigned and last-known-good; A is pruned

	corrupt := func(ref *contract.ConfigMapVersion) {
		t.Helper()
		path := filepath.Join(e.store().Dir(), "checkpoints", ref.UID+"_"+ref.ResourceVersion+".json")
		if err := os.WriteFile(path, []byte(`{"truncated`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Offline, with B's checkpoint damaged: no B to fall back to either,
	// so the local configuration it is, and the status says why.
	corrupt(refB)
	e.startAgent()
	r := e.sync(Observation{})
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonCheckpointCorrupt, errorHas: "unusable",
		assigned: refB, active: nil, lkg: nil, restarts: 4, fileHas: localConfig})
	if moved, _ := os.ReadDir(filepath.Join(e.store().Dir(), "corrupt")); len(moved) == 0 {
		t.Fatal("the corrupt checkpoint was not moved aside")
	}
	// Back online, B is downloaded again and tried again.
	r = e.sync(assigned(cmB))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refB, active: refB, restarts: 5, fileHas: "registryPullQPS: 8"})
}

func TestRestartFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	e.restarter.err = errors.New("Failed to restart kubelet.service: Unit kubelet.service not found.")
	r, err := e.c.Sync(quiet(t.Context()), assigned(cmA))
	if err == nil {
		t.Fatal("a failed restart was not an error")
	}
	if r.Report.Condition.Reason != contract.ReasonApplyFailed || r.Report.Status.Error == "" {
		t.Fatalf("condition %+v, error %q", r.Report.Condition, r.Report.Status.Error)
	}
	e.restarter.err = nil
	r = e.sync(assigned(cmA))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})
}

func TestRapidReassignmentsLastOneWins(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	cms := []*corev1.ConfigMap{cmA, cmB}
	for i := range 20 {
		e.sync(assigned(cms[i%2]))
	}
	r := e.sync(assigned(cmB))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refB, active: refB, restarts: 21, fileHas: "registryPullQPS: 8"})
	in, err := statedir.Inspect(e.store().Dir())
	if err != nil || len(in.Checkpoints) != 1 {
		t.Fatalf("checkpoints pile up: %v, %v", in.Checkpoints, err)
	}
	r = e.passTrial(assigned(cmB))
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: refB, active: refB, lkg: refB, restarts: 21})
}

func TestKubeletVersionOverride(t *testing.T) {
	e := newEnv(t)
	obs := assigned(cmA)
	obs.KubeletVersion = nil
	r := e.sync(obs)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonValidationFailed, errorHas: "version is not known", assigned: refA, restarts: 1, fileHas: localConfig})

	e.c.cfg.KubeletVersion = kubeletVersion
	r = e.sync(obs)
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: refA, active: refA, restarts: 2})
}
