package reconciler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
)

// recordCombination is one combination of the state directory's records and the
// kubelet's file, as a killed agent or a node that lost power may leave
// them, named by the ConfigMaps they point at (nil: the local
// configuration).
type recordCombination struct {
	assigned, lkg *corev1.ConfigMap
	// active is what the active record names, when hasActive.
	hasActive bool
	active    *corev1.ConfigMap
	// file is what the kubelet's file holds, when hasFile.
	hasFile bool
	file    *corev1.ConfigMap
	// trial names the configuration on trial, nil for none.
	trial *corev1.ConfigMap
	// drain is the drain record: for drainOf, drained or not, on this
	// boot or another.
	drain                  bool
	drainOf                *corev1.ConfigMap
	drained, drainElsewhen bool
	bad                    *corev1.ConfigMap
}

func (rc recordCombination) String() string {
	name := func(cm *corev1.ConfigMap) string {
		if cm == nil {
			return "local"
		}
		return cm.Name
	}
	var b strings.Builder
	fmt.Fprintf(&b, "assigned=%s lkg=%s", name(rc.assigned), name(rc.lkg))
	if rc.hasActive {
		fmt.Fprintf(&b, " active=%s", name(rc.active))
	}
	if rc.hasFile {
		fmt.Fprintf(&b, " file=%s", name(rc.file))
	}
	if rc.trial != nil {
		fmt.Fprintf(&b, " trial=%s", name(rc.trial))
	}
	if rc.drain {
		fmt.Fprintf(&b, " drain=%s(drained=%v,otherBoot=%v)", name(rc.drainOf), rc.drained, rc.drainElsewhen)
	}
	if rc.bad != nil {
		fmt.Fprintf(&b, " bad=%s", name(rc.bad))
	}
	return b.String()
}

// combinations lists every combination over two ConfigMaps, one a
// restart applies (cmA) and one that needs a drain (cmStatic), including
// combinations no sequence of writes produces.
func combinations() []recordCombination {
	configs := []*corev1.ConfigMap{nil, cmA, cmStatic}
	named := []*corev1.ConfigMap{cmA, cmStatic}
	type drainRec struct {
		on                     bool
		of                     *corev1.ConfigMap
		drained, drainElsewhen bool
	}
	drains := []drainRec{{}, {on: true, of: cmStatic}, {on: true, of: cmStatic, drained: true},
		{on: true, of: cmStatic, drained: true, drainElsewhen: true}, {on: true, of: nil}}
	var out []recordCombination
	for _, assigned := range configs {
		for _, lkg := range configs {
			for _, hasActive := range []bool{false, true} {
				for _, active := range configs {
					if !hasActive && active != nil {
						continue
					}
					for _, hasFile := range []bool{false, true} {
						for _, file := range configs {
							if !hasFile && file != nil {
								continue
							}
							for _, trial := range append([]*corev1.ConfigMap{nil}, named...) {
								for _, d := range drains {
									for _, bad := range append([]*corev1.ConfigMap{nil}, named...) {
										out = append(out, recordCombination{assigned: assigned, lkg: lkg, hasActive: hasActive, active: active,
											hasFile: hasFile, file: file, trial: trial, drain: d.on, drainOf: d.of, drained: d.drained,
											drainElsewhen: d.drainElsewhen, bad: bad})
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// layOutRecords writes a combination into the state directory and the
// kubelet's file.
func (e *env) layOutRecords(rc recordCombination) {
	t := e.t
	t.Helper()
	s := e.store()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, cm := range []*corev1.ConfigMap{cmA, cmStatic} {
		must(s.SaveCheckpoint(checkpoint.Checkpoint{Ref: *refOf(cm), Key: contract.ConfigMapKey, HasKey: true, Config: cm.Data[contract.ConfigMapKey]}))
	}
	must(s.SetAssigned(optRef(rc.assigned)))
	must(s.SetLastKnownGood(optRef(rc.lkg)))
	if rc.hasActive {
		must(s.SetActive(checkpoint.Active{Ref: optRef(rc.active), FileSHA256: e.render(rc.active).SHA256()}))
	}
	if rc.hasFile {
		must(os.MkdirAll(filepath.Dir(e.kubeletCfg), 0o755))
		must(os.WriteFile(e.kubeletCfg, e.render(rc.file).Data, 0o644))
		// The kubelet runs what its file says.
		e.running.start()
	}
	if rc.trial != nil {
		must(s.SetTrial(checkpoint.Trial{Ref: *refOf(rc.trial), BootID: e.clock.BootID(), StartedSinceBoot: e.clock.SinceBoot()}))
	}
	if rc.drain {
		boot := e.clock.BootID()
		if rc.drainElsewhen {
			boot = "boot-0"
		}
		must(s.SetDrain(checkpoint.Drain{Ref: optRef(rc.drainOf), FileSHA256: e.render(rc.drainOf).SHA256(), Drained: rc.drained,
			Reasons: []string{"cpuManagerPolicy changes"}, BootID: boot, StartedSinceBoot: e.clock.SinceBoot()}))
	}
	if rc.bad != nil {
		must(s.SetBad([]checkpoint.BadEntry{{Ref: *refOf(rc.bad), Reason: contract.ReasonRolledBack, Message: "crashed"}}))
	}
}

// TestEveryCombinationOfRecordsSettles is why the phase is derived from
// the records: an agent killed at any point, or a node that lost power,
// starts again from whatever combination of records it left. For every
// combination over two configurations (including ones no sequence of
// writes produces), each pass dispatches a named phase without an error,
// and within a few passes of a healthy kubelet and a Node whose pods can
// leave, the agent is Idle: no trial or drain record left, the kubelet's
// file what the active record says, the Node uncordoned, and a further
// pass restarts nothing.
func TestEveryCombinationOfRecordsSettles(t *testing.T) {
	all := combinations()
	// The combinations are many, and what makes each write durable
	// (fsync) is the crash tests' to judge, not this one's: they run on a
	// tmpfs, or a seventh of them on a disk (a stride prime to the number
	// of values of every record still takes each value of each).
	base := "/dev/shm"
	if _, err := os.Stat(base); err != nil || testing.Short() {
		base = ""
		var some []recordCombination
		for i := 0; i < len(all); i += 7 {
			some = append(some, all[i])
		}
		all = some
	}
	for _, rc := range all {
		t.Run(rc.String(), func(t *testing.T) {
			dir := t.TempDir()
			if base != "" {
				var err error
				if dir, err = os.MkdirTemp(base, "nodeguard-phase-"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
			}
			e := newEnvIn(t, dir)
			e.layOutRecords(rc)
			e.startAgent()
			d := newFakeDrainer(&[]string{}, "web-0")
			var phases []string
			settled := false
			for pass := 0; pass < 8 && !settled; pass++ {
				r, err := e.c.Sync(quiet(t.Context()), d.online(rc.assigned))
				if err != nil {
					t.Fatalf("pass %d after %v: %v", pass, phases, err)
				}
				if name := r.Phase.String(); strings.HasPrefix(name, "Phase(") {
					t.Fatalf("pass %d: an undefined phase %s", pass, name)
				}
				phases = append(phases, r.Phase.String())
				settled = r.Phase == Idle && e.c.records.trial == nil && e.c.records.drain == nil
				// A trial runs its course between passes.
				e.clock.Step(testTerms.Period)
			}
			if !settled {
				t.Fatalf("not Idle after %v: %s", phases, e.takeSnapshot())
			}
			restarts := e.restarter.count
			r := e.sync(d.online(rc.assigned))
			if r.Phase != Idle || e.restarter.count != restarts {
				t.Errorf("after %v, a further pass is %v and restarts %d times", phases, r.Phase, e.restarter.count-restarts)
			}
			if a := e.c.records.active; a == nil || a.FileSHA256 != kubelet.Checksum([]byte(e.kubeletFile())) {
				t.Errorf("after %v, the kubelet's file is not what the active record says", phases)
			}
			if d.node.Spec.Unschedulable {
				t.Errorf("after %v, the Node is left cordoned", phases)
			}
		})
	}
}

// TestPhaseNames: every phase has its name.
func TestPhaseNames(t *testing.T) {
	for ph := Idle; ph <= RollingBack; ph++ {
		if strings.HasPrefix(ph.String(), "Phase(") {
			t.Errorf("phase %d has no name", int(ph))
		}
	}
}

// TestDownloadingTakesTheAssignmentIntoTheRecords: what the Node assigns
// and the records lack is the phase Downloading, whose transition
// checkpoints the ConfigMap before the assigned record moves to it (a
// checkpoint already there, as an agent killed before the record moved
// leaves it, is kept), or, for a cleared assignment, resets both assigned
// and last-known-good; the phase after it is derived from the records. An
// assignment the records hold, a ConfigMap not read yet and an agent
// offline download nothing: what runs keeps running.
func TestDownloadingTakesTheAssignmentIntoTheRecords(t *testing.T) {
	downloadedBefore := time.Unix(1600000000, 0).UTC()
	waiting := assigned(cmB)
	waiting.ConfigMap = nil
	for _, tc := range []struct {
		name string
		obs  Observation
		// checkpointed saves cmB's checkpoint before the pass.
		checkpointed bool
		want         Phase
		// assigned and lkg are the records after the first step.
		assigned, lkg *contract.ConfigMapVersion
	}{
		{name: "a new ConfigMap", obs: assigned(cmB), want: Downloading, assigned: refOf(cmB), lkg: refOf(cmA)},
		{name: "checkpointed, the record not moved", obs: assigned(cmB), checkpointed: true, want: Downloading, assigned: refOf(cmB), lkg: refOf(cmA)},
		{name: "cleared", obs: unassigned, want: Downloading},
		{name: "held", obs: assigned(cmA), want: Idle, assigned: refOf(cmA), lkg: refOf(cmA)},
		{name: "not read yet", obs: waiting, want: Idle, assigned: refOf(cmA), lkg: refOf(cmA)},
		{name: "offline", obs: Observation{}, want: Idle, assigned: refOf(cmA), lkg: refOf(cmA)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.sync(assigned(cmA))
			e.passTrial(assigned(cmA))
			if tc.checkpointed {
				if err := e.store().SaveCheckpoint(checkpoint.Checkpoint{Ref: *refOf(cmB), Key: contract.ConfigMapKey, HasKey: true,
					Config: goodB, DownloadedAt: downloadedBefore}); err != nil {
					t.Fatal(err)
				}
			}
			// A new agent process, so that the pass reads the records from
			// disk: its first step, as Sync takes it.
			e.startAgent()
			ctx := quiet(t.Context())
			p := &pass{obs: tc.obs}
			e.c.load(p)
			p.wanted = e.c.readAssignment(tc.obs, p)
			again, err := e.c.step(ctx, p)
			if err != nil || p.phase != tc.want || again != (tc.want == Downloading) {
				t.Fatalf("first step: %v, again %v, %v; want %v", p.phase, again, err, tc.want)
			}
			onDisk, err := e.store().Assigned()
			if err != nil || !contract.SameVersion(onDisk, tc.assigned) || !contract.SameVersion(e.c.records.assigned, tc.assigned) ||
				!contract.SameVersion(e.c.records.lastKnownGood, tc.lkg) {
				t.Fatalf("after the first step, assigned %s (%s on disk, %v), last-known-good %s; want %s and %s",
					describe(e.c.records.assigned), describe(onDisk), err, describe(e.c.records.lastKnownGood), describe(tc.assigned), describe(tc.lkg))
			}
			if tc.assigned != nil && tc.want == Downloading {
				cp, err := e.store().LoadCheckpoint(*tc.assigned)
				if err != nil || cp.Config != goodB || cp.DownloadedAt.Equal(downloadedBefore) != tc.checkpointed {
					t.Fatalf("checkpoint %+v, %v; want cmB's, downloaded again: %v", cp, err, !tc.checkpointed)
				}
			}
			if ph, _, err := e.c.next(ctx, p); err != nil || ph == Downloading {
				t.Fatalf("the step after: %v, %v; want the records' phase", ph, err)
			}
			e.sync(tc.obs)
			if tc.want == Downloading && tc.assigned != nil {
				e.passTrial(tc.obs)
			}
			if r := e.sync(tc.obs); r.Phase != Idle || !contract.SameVersion(e.c.records.active.Ref, tc.assigned) {
				t.Errorf("settles %v with %s active; want Idle with %s", r.Phase, describe(e.c.records.active.Ref), describe(tc.assigned))
			}
		})
	}
}
