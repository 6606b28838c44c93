package reconciler

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/test/statedir"
)

// onDisk is a state directory and kubelet file as an earlier agent left
// them. ConfigMaps stand for their checkpoints; nil for the local
// configuration.
type onDisk struct {
	// checkpoints are saved in addition to every ConfigMap named below.
	checkpoints []*corev1.ConfigMap
	assigned    *corev1.ConfigMap
	lkg         *corev1.ConfigMap
	// running is what the kubelet file holds and the active record says,
	// unless fresh (no active record) or file says otherwise.
	running *corev1.ConfigMap
	fresh   bool
	file    string // "" means running's rendering; "absent", or the literal content
	// trial, when set, has been on trial since trialAgo, on boot-1.
	trial    *corev1.ConfigMap
	trialAgo time.Duration
	bad      []*corev1.ConfigMap
	// corrupt are checkpoints damaged after they were written.
	corrupt []*corev1.ConfigMap
	// kubeletVersion is the recorded kubelet version; "" for none.
	kubeletVersion string
}

// act is one step of a row's script: events (what the apiserver says is
// the row's observation), time, probes, reboots and restarts.
type act func(e *env, obs Observation)

// syncOnce runs one pass.
func syncOnce() act { return func(e *env, obs Observation) { e.sync(obs) } }

// probes runs one pass per character, a probe period apart: '+' is a
// healthy kubelet, '-' one that refuses connections.
func probes(script string) act {
	return func(e *env, obs Observation) {
		for _, c := range script {
			e.prober.err = nil
			if c == '-' {
				e.prober.err = errUnhealthy
			}
			e.clock.Step(testProbePeriod)
			e.sync(obs)
		}
	}
}

// burst runs n passes without moving the clock, as a burst of watch events
// does, with the kubelet answering as c says ('+' or '-').
func burst(c byte, n int) act {
	return func(e *env, obs Observation) {
		e.prober.err = nil
		if c == '-' {
			e.prober.err = errUnhealthy
		}
		for range n {
			e.sync(obs)
		}
	}
}

// wait moves the clock without a pass.
func wait(d time.Duration) act { return func(e *env, _ Observation) { e.clock.Step(d) } }

// reboot starts a new boot (20s in) and a new agent process on it.
func reboot() act {
	return func(e *env, _ Observation) {
		e.clock.Reboot(e.clock.BootID()+"+", 20*time.Second)
		e.startAgent()
	}
}

// restartAgent starts a new agent process on the same boot.
func restartAgent() act { return func(e *env, _ Observation) { e.startAgent() } }

// want is the outcome: the last pass's report, the state directory, the
// kubelet file and how often the kubelet was restarted.
type want struct {
	ready    corev1.ConditionStatus
	reason   string
	errorHas string
	// assigned is the assigned record on disk and in the status
	// (shownAssigned overrides the latter).
	assigned, lkg, active *corev1.ConfigMap
	noActive              bool
	trial                 *corev1.ConfigMap
	bad                   []*corev1.ConfigMap
	// file is the ConfigMap the kubelet file is rendered from (nil: local).
	file     *corev1.ConfigMap
	restarts int
}

var (
	smA     = configMap("kubelet-a", "uid-a", "10", goodA)
	smB     = configMap("kubelet-b", "uid-b", "20", goodB)
	smBad   = configMap("kubelet-x", "uid-x", "30", invalid)
	offline = Observation{}
)

// TestStateMachine is the agent's state machine as a table: a starting
// state on disk, an event (what the apiserver says) and a script of time,
// boot IDs, probes and process restarts, and what must come of it. Trial
// rows are under testTerms: 10m period, 1m grace, 3 failures, a probe every
// 5s.
func TestStateMachine(t *testing.T) {
	aLKG := onDisk{assigned: smA, lkg: smA, running: smA}
	aOnTrial := onDisk{assigned: smA, running: smA, trial: smA, trialAgo: time.Minute}
	bOnTrial := onDisk{assigned: smB, lkg: smA, running: smB, trial: smB, trialAgo: time.Minute}
	rows := []struct {
		name   string
		start  onDisk
		event  Observation
		script []act
		want   want
	}{
		// Starting up.
		{name: "fresh node, kubelet file already local: adopted, no restart",
			start: onDisk{fresh: true}, event: unassigned, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig}},
		{name: "fresh node, no kubelet file: local written, kubelet restarted",
			start: onDisk{fresh: true, file: "absent"}, event: unassigned, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 1}},
		{name: "offline start keeps last-known-good without a restart",
			start: aLKG, event: offline, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smA, lkg: smA, active: smA, file: smA}},
		{name: "offline start during a trial continues it without a restart",
			start: bOnTrial, event: offline, script: []act{probes("+")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, lkg: smA, active: smB, trial: smB, file: smB}},
		{name: "offline start, assignment not applied yet (killed before the apply): validated against the recorded kubelet version",
			start: onDisk{assigned: smB, lkg: smA, running: smA, kubeletVersion: "1.37.2"}, event: offline, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, lkg: smA, active: smB, trial: smB, file: smB, restarts: 1}},
		{name: "offline start, assignment not applied yet, no kubelet version known: last-known-good kept",
			start: onDisk{assigned: smB, lkg: smA, running: smA}, event: offline, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonValidationFailed, errorHas: "version is not known", assigned: smB, lkg: smA, active: smA, file: smA}},
		{name: "kubelet file overwritten by someone else: drift, put back, kubelet restarted",
			start: onDisk{assigned: smA, lkg: smA, running: smA, file: "junk: true\n"}, event: assigned(smA), script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonConfigDrifted, errorHas: "was changed behind its back; restoring the agent's file",
				assigned: smA, lkg: smA, active: smA, file: smA, restarts: 1}},
		{name: "kubelet file put back: active again once the kubelet runs it",
			start: onDisk{assigned: smA, lkg: smA, running: smA, file: "junk: true\n"}, event: assigned(smA), script: []act{syncOnce(), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smA, lkg: smA, active: smA, file: smA, restarts: 1}},
		{name: "corrupt checkpoint of the assigned config, offline: local configuration",
			start: onDisk{assigned: smA, running: smA, corrupt: []*corev1.ConfigMap{smA}}, event: offline, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonCheckpointCorrupt, errorHas: "unusable", assigned: smA, restarts: 1}},

		// Assignments.
		{name: "new assignment: checkpointed, applied, on trial",
			start: onDisk{}, event: assigned(smA), script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smA, active: smA, trial: smA, file: smA, restarts: 1}},
		{name: "invalid assignment: never applied",
			start: onDisk{}, event: assigned(smBad), script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonValidationFailed, errorHas: "maxPodz", assigned: smBad}},
		{name: "reassignment during a trial: the new one is on trial",
			start: aOnTrial, event: assigned(smB), script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, active: smB, trial: smB, file: smB, restarts: 1}},
		{name: "assignment cleared: local configuration, last-known-good reset",
			start: aLKG, event: unassigned, script: []act{syncOnce()},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonLocalConfig, restarts: 1}},
		{name: "a config recorded bad is not retried",
			start: onDisk{assigned: smB, lkg: smA, running: smA, bad: []*corev1.ConfigMap{smB}}, event: assigned(smB), script: []act{syncOnce()},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "not retried", assigned: smB, lkg: smA, active: smA, bad: []*corev1.ConfigMap{smB}, file: smA}},

		// Trials passing.
		{name: "healthy for the whole period: last-known-good",
			start: aOnTrial, event: assigned(smA), script: []act{probes("+"), wait(testTerms.Period), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smA, lkg: smA, active: smA, file: smA}},
		{name: "unhealthy when the period ends: the trial stays open until healthy",
			start: aOnTrial, event: assigned(smA), script: []act{probes("+"), wait(testTerms.Period), probes("-")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smA, active: smA, trial: smA, file: smA}},
		{name: "flapping: brief blips below the threshold do not roll back",
			start: bOnTrial, event: assigned(smB), script: []act{probes("++-+++-++"), wait(testTerms.Period), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smB, lkg: smB, active: smB, file: smB}},
		{name: "flapping: an admin restart (one outage, back within grace) does not roll back",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+++--+++"), wait(testTerms.Period), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smB, lkg: smB, active: smB, file: smB}},
		{name: "a burst of passes within one probe period probes once",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+"), wait(testProbePeriod), burst('-', 10)},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, lkg: smA, active: smB, trial: smB, file: smB}},
		{name: "the old kubelet answering just after the restart command does not arm the failure count",
			start: aLKG, event: assigned(smB), script: []act{syncOnce(), probes("---")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, lkg: smA, active: smB, trial: smB, file: smB, restarts: 1}},
		{name: "the agent's own restart forgets earlier failures",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+--"), restartAgent(), probes("+-++-+"), wait(testTerms.Period), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smB, lkg: smB, active: smB, file: smB}},
		{name: "a reboot forgets earlier failures and starts the trial over",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+--"), reboot(), probes("+--"), wait(testTerms.Period - 4*testProbePeriod)},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smB, lkg: smA, active: smB, trial: smB, file: smB}},
		{name: "a reboot: the trial passes a period after the new boot's start",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+--"), reboot(), probes("+--+"), wait(testTerms.Period), probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smB, lkg: smB, active: smB, file: smB}},
		{name: "the agent restarted after the period: one healthy probe passes",
			start: onDisk{assigned: smB, lkg: smA, running: smB, trial: smB, trialAgo: time.Hour}, event: offline, script: []act{probes("+")},
			want: want{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: smB, lkg: smB, active: smB, file: smB}},

		// Trials failing.
		{name: "crash loop caused by the config (healthy between crashes): rolled back to last-known-good",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+-+-+-")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "failed 3 health checks",
				assigned: smB, lkg: smA, active: smA, bad: []*corev1.ConfigMap{smB}, file: smA, restarts: 1}},
		{name: "hung or down kubelet after being healthy: rolled back",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+---")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "failed 3 health checks",
				assigned: smB, lkg: smA, active: smA, bad: []*corev1.ConfigMap{smB}, file: smA, restarts: 1}},
		{name: "never healthy within grace: rolled back to the local configuration",
			start: aOnTrial, event: assigned(smA), script: []act{restartAgent(), probes(strings.Repeat("-", 13))},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "did not become healthy within 1m0s",
				assigned: smA, bad: []*corev1.ConfigMap{smA}, restarts: 1}},
		{name: "agent restarted during grace: the kubelet gets a full grace period from then",
			start: aOnTrial, event: assigned(smA), script: []act{probes("----------"), restartAgent(), probes("----------")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonTrialInProgress, assigned: smA, active: smA, trial: smA, file: smA}},
		{name: "a crash loop keeps failing across agent restarts",
			start: bOnTrial, event: assigned(smB), script: []act{probes("+-+-"), restartAgent(), probes("+-+-+-")},
			want: want{ready: corev1.ConditionFalse, reason: contract.ReasonRolledBack, errorHas: "failed 3 health checks",
				assigned: smB, lkg: smA, active: smA, bad: []*corev1.ConfigMap{smB}, file: smA, restarts: 1}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			e := newEnv(t)
			e.layOut(row.start)
			e.startAgent()
			for _, step := range row.script {
				step(e, row.event)
			}
			e.checkWant(e.lastResult, row.want)
		})
	}
}

// layOut writes a starting state as an earlier agent would have.
func (e *env) layOut(d onDisk) {
	t := e.t
	t.Helper()
	s := e.store()
	var cms []*corev1.ConfigMap
	cms = append(cms, d.checkpoints...)
	cms = append(cms, d.assigned, d.lkg, d.running, d.trial)
	cms = append(cms, d.bad...)
	for _, cm := range cms {
		if cm == nil {
			continue
		}
		cp := checkpoint.Checkpoint{Ref: *refOf(cm), Key: contract.ConfigMapKey, HasKey: true, Config: cm.Data[contract.ConfigMapKey]}
		if err := s.SaveCheckpoint(cp); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rendered := e.render(d.running)
	if !d.fresh {
		must(s.SetAssigned(optRef(d.assigned)))
		must(s.SetLastKnownGood(optRef(d.lkg)))
		must(s.SetActive(checkpoint.Active{Ref: optRef(d.running), FileSHA256: rendered.SHA256()}))
	}
	if d.trial != nil {
		must(s.SetTrial(checkpoint.Trial{Ref: *refOf(d.trial), BootID: e.clock.BootID(), StartedSinceBoot: e.clock.SinceBoot() - d.trialAgo}))
	}
	var bad []checkpoint.BadEntry
	for _, cm := range d.bad {
		bad = append(bad, checkpoint.BadEntry{Ref: *refOf(cm), Reason: contract.ReasonRolledBack, Message: "crashed"})
	}
	if bad != nil {
		must(s.SetBad(bad))
	}
	if d.kubeletVersion != "" {
		must(s.SetKubeletVersion(d.kubeletVersion))
	}
	must(os.MkdirAll(filepath.Dir(e.kubeletCfg), 0o755))
	switch d.file {
	case "":
		must(os.WriteFile(e.kubeletCfg, rendered.Data, 0o644))
	case "absent":
	default:
		must(os.WriteFile(e.kubeletCfg, []byte(d.file), 0o644))
	}
	if !d.fresh {
		// The kubelet runs what the agent last started it with.
		e.running.read, e.running.started = rendered.Data, true
	}
	for _, cm := range d.corrupt {
		path := filepath.Join(s.Dir(), "checkpoints", string(cm.UID)+"_"+cm.ResourceVersion+".json")
		must(os.WriteFile(path, []byte(`{"format":"nodeguard.dev/agent-state/v1","kind":"Checkpoint","sha`), 0o600))
	}
}

// render is the kubelet file for cm (nil: the local configuration).
func (e *env) render(cm *corev1.ConfigMap) kubelet.Rendered {
	e.t.Helper()
	var out kubelet.Rendered
	var err error
	if cm == nil {
		out, err = e.c.deps.Renderer.Local()
	} else {
		out, err = e.c.deps.Renderer.Assigned([]byte(cm.Data[contract.ConfigMapKey]))
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func optRef(cm *corev1.ConfigMap) *contract.ConfigMapVersion {
	if cm == nil {
		return nil
	}
	return refOf(cm)
}

// checkWant compares the last pass's report, the state directory, the
// kubelet file and the restart count with w.
func (e *env) checkWant(r Result, w want) {
	t := e.t
	t.Helper()
	active := w.active
	if w.noActive {
		active = nil
	}
	e.check(r, expect{ready: w.ready, reason: w.reason, errorHas: w.errorHas, assigned: optRef(w.assigned),
		active: optRef(active), lkg: optRef(w.lkg), restarts: w.restarts})
	// Inspect, unlike the crash tests' snapshot, lets a ref dangle: a
	// checkpoint found corrupt is moved aside while the assigned record
	// keeps naming it until it is downloaded again.
	got, err := statedir.Inspect(e.store().Dir())
	if err != nil && (w.reason != contract.ReasonCheckpointCorrupt || !strings.Contains(err.Error(), "no sound checkpoint")) {
		t.Errorf("state directory: %v", err)
	}
	var gotActive, gotTrial *contract.ConfigMapVersion
	if got.Active != nil {
		gotActive = got.Active.Ref
	}
	if w.noActive != (got.Active == nil) {
		t.Errorf("active record %+v, want one: %v", got.Active, !w.noActive)
	}
	if got.Trial != nil {
		gotTrial = &got.Trial.Ref
	}
	if !contract.SameVersion(got.Assigned, optRef(w.assigned)) || !contract.SameVersion(got.LastKnownGood, optRef(w.lkg)) ||
		!contract.SameVersion(gotActive, optRef(active)) || !contract.SameVersion(gotTrial, optRef(w.trial)) {
		t.Errorf("on disk: assigned=%s lkg=%s active=%s trial=%v; want assigned=%s lkg=%s active=%s trial=%v",
			describe(got.Assigned), describe(got.LastKnownGood), describe(gotActive), gotTrial,
			describe(optRef(w.assigned)), describe(optRef(w.lkg)), describe(optRef(active)), optRef(w.trial))
	}
	var wantBad []contract.ConfigMapVersion
	for _, cm := range w.bad {
		wantBad = append(wantBad, *refOf(cm))
	}
	var gotBad []contract.ConfigMapVersion
	for _, b := range got.Bad {
		gotBad = append(gotBad, b.Ref)
	}
	if !slices.Equal(gotBad, wantBad) {
		t.Errorf("bad list %v, want %v", gotBad, wantBad)
	}
	if file := e.render(w.file); e.kubeletFile() != string(file.Data) {
		t.Errorf("kubelet file:\n%s\nwant the rendering of %s:\n%s", e.kubeletFile(), describe(optRef(w.file)), file.Data)
	}
}

// TestKubeletVersionIsRecorded: the version an online pass sees is kept in
// the state directory for an agent that starts without the apiserver.
func TestKubeletVersionIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.sync(unassigned)
	if v, err := e.store().KubeletVersion(); err != nil || v != kubeletVersion.String() {
		t.Fatalf("recorded kubelet version %q, %v; want %s", v, err, kubeletVersion)
	}
	e.startAgent()
	e.sync(offline)
	if got := e.c.kubeletVersion; got == nil || got.String() != kubeletVersion.String() {
		t.Fatalf("a restarted agent offline knows version %v, want %s", got, kubeletVersion)
	}
}
