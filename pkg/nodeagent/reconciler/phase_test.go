package reconciler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
