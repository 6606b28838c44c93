package reconciler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// snapshot is everything a restarted agent finds on disk.
type snapshot struct {
	Assigned, LastKnownGood *contract.ConfigMapVersion
	Active                  *contract.ConfigMapVersion
	ActiveFile              string
	HasActive               bool
	Trial                   *contract.ConfigMapVersion
	Bad                     []contract.ConfigMapVersion
	KubeletFile             string
}

func (s snapshot) String() string {
	trial := "none"
	if s.Trial != nil {
		trial = describe(s.Trial)
	}
	return fmt.Sprintf("assigned=%s lkg=%s active=%s(%v) trial=%s bad=%v", describe(s.Assigned), describe(s.LastKnownGood), describe(s.Active), s.HasActive, trial, s.Bad)
}

// takeSnapshot reads the state directory as a new agent would, failing the
// test on anything corrupt or any ref without a sound checkpoint.
func (e *env) takeSnapshot() snapshot {
	e.t.Helper()
	store, err := checkpoint.Open(filepath.Join(e.dir, "state"), checkpoint.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	var s snapshot
	must := func(what string, err error) {
		e.t.Helper()
		if err != nil {
			e.t.Fatalf("after the crash, %s: %v", what, err)
		}
	}
	needCheckpoint := func(what string, ref *contract.ConfigMapVersion) {
		e.t.Helper()
		if ref == nil {
			return
		}
		_, err := store.LoadCheckpoint(*ref)
		must(what+" points at a checkpoint that does not load", err)
	}
	s.Assigned, err = store.Assigned()
	must("reading assigned", err)
	needCheckpoint("assigned", s.Assigned)
	s.LastKnownGood, err = store.LastKnownGood()
	must("reading last-known-good", err)
	needCheckpoint("last-known-good", s.LastKnownGood)
	active, err := store.Active()
	must("reading active", err)
	if active != nil {
		s.HasActive, s.Active, s.ActiveFile = true, active.Ref, active.FileSHA256
		needCheckpoint("active", s.Active)
	}
	tr, err := store.Trial()
	must("reading the trial", err)
	if tr != nil {
		s.Trial = &tr.Ref
		needCheckpoint("trial", s.Trial)
	}
	bad, err := store.Bad()
	must("reading the bad list", err)
	for _, b := range bad {
		s.Bad = append(s.Bad, b.Ref)
	}
	s.KubeletFile = e.kubeletFile()
	return s
}

// crashingRestarter lets a failpoint kill the agent just before the restart
// command runs, with the new kubelet file already in place.
type crashingRestarter struct{ e *env }

func (r crashingRestarter) Restart(ctx context.Context) error {
	if r.e.failpoint != nil {
		if err := r.e.failpoint("before-restart", ""); err != nil {
			return err
		}
	}
	return r.e.restarter.Restart(ctx)
}

// TestCrashDuringTransitions kills the agent at every step of each
// transition (every write in the state directory, and just before the
// restart command) and checks that (1) the restarted agent finds each record
// and the kubelet file either as before or as after the transition, with
// every ref resolving to a sound checkpoint, and (2) it converges to the
// same state as an agent that never crashed.
func TestCrashDuringTransitions(t *testing.T) {
	transitions := []struct {
		name string
		// setup brings a fresh node to the state before the transition.
		setup func(e *env)
		// run performs the transition; after a crash it is run again, so it
		// must drive a restarted agent to the same end.
		run func(e *env) error
	}{{
		name:  "first assignment",
		setup: func(e *env) { e.sync(unassigned) },
		run:   func(e *env) error { return e.syncErr(assigned(cmA)) },
	}, {
		name: "trial passes",
		setup: func(e *env) {
			e.sync(unassigned)
			e.sync(assigned(cmA))
			e.clock.Step(testTerms.Period)
		},
		run: func(e *env) error { return e.syncErr(assigned(cmA)) },
	}, {
		name: "trial fails and rolls back",
		setup: func(e *env) {
			e.sync(unassigned)
			e.sync(assigned(cmA))
			e.passTrial(assigned(cmA))
			e.sync(assigned(cmB))
			e.prober.err = errUnhealthy
		},
		run: func(e *env) error {
			// A restarted agent gives the kubelet a new grace period.
			for range 3 {
				e.clock.Step(testTerms.Grace + 1)
				if err := e.syncErr(assigned(cmB)); err != nil {
					return err
				}
			}
			return nil
		},
	}, {
		name: "assignment cleared",
		setup: func(e *env) {
			e.sync(unassigned)
			e.sync(assigned(cmA))
			e.passTrial(assigned(cmA))
		},
		run: func(e *env) error { return e.syncErr(unassigned) },
	}, {
		name: "reassignment during a trial",
		setup: func(e *env) {
			e.sync(unassigned)
			e.sync(assigned(cmA))
		},
		run: func(e *env) error { return e.syncErr(assigned(cmB)) },
	}, {
		name: "a drained change that leaves the Node no room for its pods goes back",
		setup: func(e *env) {
			d := newFakeDrainer(&[]string{}, "web-0", "web-1", "web-2")
			d.allocatable("pods", "110")
			e.drainer = d
			e.settle(func() Observation { return d.online(nil) })
			e.sync(d.online(cmSmall)) // drained
			e.sync(d.online(cmSmall)) // restarted into it
			d.allocatable("pods", "2")
		},
		run: func(e *env) error {
			for range 3 {
				if err := e.syncErr(e.drainer.online(cmSmall)); err != nil {
					return err
				}
			}
			return nil
		},
	}, {
		name: "a drain that protected pods block",
		setup: func(e *env) {
			d := newFakeDrainer(&[]string{}, "web-0")
			d.pods = append(d.pods, bare("notes"))
			e.drainer = d
			e.settle(func() Observation { return d.online(nil) })
		},
		run: func(e *env) error { return e.syncErr(e.drainer.online(cmStatic)) },
	}}

	for _, tr := range transitions {
		t.Run(tr.name, func(t *testing.T) {
			reference := newCrashEnv(t)
			tr.setup(reference)
			before := reference.takeSnapshot()
			if err := tr.run(reference); err != nil {
				t.Fatalf("transition without a crash: %v", err)
			}
			after := reference.takeSnapshot()
			if reflect.DeepEqual(before, after) {
				t.Fatal("the transition changes nothing")
			}

			for n := 1; ; n++ {
				e := newCrashEnv(t)
				tr.setup(e)
				crashed := false
				seen := 0
				e.failpoint = func(durable.Step, string) error {
					seen++
					if seen == n {
						crashed = true
						return durable.ErrSimulatedCrash
					}
					return nil
				}
				err := tr.run(e)
				e.failpoint = nil
				if !crashed {
					if err != nil {
						t.Fatalf("no crash, yet: %v", err)
					}
					t.Logf("crashed at each of %d steps", n-1)
					break
				}
				// Pruning is the last act of a pass and its errors are only
				// logged, so a crash there returns nil: the process would
				// die right after, which is what the restart below does.
				if err != nil && !errors.Is(err, durable.ErrSimulatedCrash) {
					t.Fatalf("crash at step %d: got %v", n, err)
				}
				found := e.takeSnapshot()
				checkOldOrNew(t, n, found, before, after)

				e.startAgent()
				if err := tr.run(e); err != nil {
					t.Fatalf("crash at step %d: the restarted agent failed: %v", n, err)
				}
				if final := e.takeSnapshot(); !reflect.DeepEqual(final, after) {
					t.Fatalf("crash at step %d: the restarted agent ended in\n  %v\nnot\n  %v", n, final, after)
				}
			}
		})
	}
}

// checkOldOrNew asserts that each part of found is as before or as after.
func checkOldOrNew(t *testing.T, step int, found, before, after snapshot) {
	t.Helper()
	fields := []struct {
		name          string
		got, old, new any
	}{
		{"assigned", found.Assigned, before.Assigned, after.Assigned},
		{"last-known-good", found.LastKnownGood, before.LastKnownGood, after.LastKnownGood},
		{"bad", found.Bad, before.Bad, after.Bad},
		{"active", found.Active, before.Active, after.Active},
		{"trial", found.Trial, before.Trial, after.Trial},
		{"kubelet file", found.KubeletFile, before.KubeletFile, after.KubeletFile},
	}
	for _, f := range fields {
		if !reflect.DeepEqual(f.got, f.old) && !reflect.DeepEqual(f.got, f.new) {
			t.Fatalf("crash at step %d: %s is %v, neither the old %v nor the new %v", step, f.name, f.got, f.old, f.new)
		}
	}
}

func newCrashEnv(t *testing.T) *env {
	e := newEnv(t)
	e.c.deps.Restarter = crashingRestarter{e: e}
	return e
}

// syncErr is sync without failing the test on an error, for crashes.
func (e *env) syncErr(obs Observation) error {
	_, err := e.c.Sync(quiet(e.t.Context()), obs)
	return err
}
