package checkpoint

import (
	"errors"
	"reflect"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
)

// crashAt returns a failpoint that crashes at the n-th step it sees (counting
// from 1) and reports whether it did.
func crashAt(n int) (durable.Failpoint, *bool) {
	seen, crashed := 0, false
	return func(durable.Step, string) error {
		seen++
		if seen == n {
			crashed = true
			return durable.ErrSimulatedCrash
		}
		return nil
	}, &crashed
}

// TestCrashAtEveryStep kills each kind of write at every step and checks that
// a store reopened on the same directory reads the old value or the new one,
// never an error or a partial value.
func TestCrashAtEveryStep(t *testing.T) {
	oldCP := sample("uid-old", "1", "old")
	newCP := sample("uid-new", "2", "new")
	oldRef, newRef := oldCP.Ref, newCP.Ref

	type op struct {
		name string
		// setup writes the old state with a healthy store.
		setup func(*Store) error
		// change moves to the new state.
		change func(*Store) error
		// read returns the observable value.
		read     func(*Store) (any, error)
		old, new any
		// removal: an unlink has no step before which the old state shows.
		removal bool
	}
	ops := []op{{
		name:   "save checkpoint",
		setup:  func(*Store) error { return nil },
		change: func(s *Store) error { return s.SaveCheckpoint(newCP) },
		read: func(s *Store) (any, error) {
			cp, err := s.LoadCheckpoint(newRef)
			if errors.Is(err, ErrNotFound) {
				return nil, nil
			}
			return cp, err
		},
		old: nil, new: newCP,
	}, {
		name: "move assigned",
		setup: func(s *Store) error {
			return errors.Join(s.SaveCheckpoint(oldCP), s.SaveCheckpoint(newCP), s.SetAssigned(&oldRef))
		},
		change: func(s *Store) error { return s.SetAssigned(&newRef) },
		read:   func(s *Store) (any, error) { return s.Assigned() },
		old:    &oldRef, new: &newRef,
	}, {
		name: "assigned back to local",
		setup: func(s *Store) error {
			return errors.Join(s.SaveCheckpoint(oldCP), s.SetAssigned(&oldRef))
		},
		change: func(s *Store) error { return s.SetAssigned(nil) },
		read:   func(s *Store) (any, error) { return s.Assigned() },
		old:    &oldRef, new: (*contract.ConfigMapVersion)(nil),
	}, {
		name: "move last-known-good",
		setup: func(s *Store) error {
			return errors.Join(s.SaveCheckpoint(oldCP), s.SaveCheckpoint(newCP), s.SetLastKnownGood(&oldRef))
		},
		change: func(s *Store) error { return s.SetLastKnownGood(&newRef) },
		read:   func(s *Store) (any, error) { return s.LastKnownGood() },
		old:    &oldRef, new: &newRef,
	}, {
		name: "start trial",
		setup: func(s *Store) error {
			return s.SaveCheckpoint(newCP)
		},
		change: func(s *Store) error { return s.SetTrial(Trial{Ref: newRef, BootID: "boot-1", StartedSinceBoot: 5}) },
		read:   func(s *Store) (any, error) { return s.Trial() },
		old:    (*Trial)(nil), new: &Trial{Ref: newRef, BootID: "boot-1", StartedSinceBoot: 5},
	}, {
		name: "clear trial",
		setup: func(s *Store) error {
			return errors.Join(s.SaveCheckpoint(newCP), s.SetTrial(Trial{Ref: newRef, BootID: "boot-1"}))
		},
		change: func(s *Store) error { return s.ClearTrial() },
		read:   func(s *Store) (any, error) { return s.Trial() },
		old:    &Trial{Ref: newRef, BootID: "boot-1"}, new: (*Trial)(nil),
		removal: true,
	}, {
		name: "record active",
		setup: func(s *Store) error {
			return errors.Join(s.SaveCheckpoint(newCP), s.SetActive(Active{FileSHA256: "aa"}))
		},
		change: func(s *Store) error { return s.SetActive(Active{Ref: &newRef, FileSHA256: "bb"}) },
		read:   func(s *Store) (any, error) { return s.Active() },
		old:    &Active{FileSHA256: "aa"}, new: &Active{Ref: &newRef, FileSHA256: "bb"},
	}, {
		name:  "record bad",
		setup: func(s *Store) error { return s.SetBad([]BadEntry{{Ref: oldRef, Reason: "RolledBack"}}) },
		change: func(s *Store) error {
			return s.SetBad([]BadEntry{{Ref: oldRef, Reason: "RolledBack"}, {Ref: newRef, Reason: "RolledBack"}})
		},
		read: func(s *Store) (any, error) { return s.Bad() },
		old:  []BadEntry{{Ref: oldRef, Reason: "RolledBack"}},
		new:  []BadEntry{{Ref: oldRef, Reason: "RolledBack"}, {Ref: newRef, Reason: "RolledBack"}},
	}}

	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			sawOld, sawNew := false, false
			for n := 1; ; n++ {
				dir := t.TempDir()
				if err := o.setup(openStore(t, dir, Options{})); err != nil {
					t.Fatalf("setup: %v", err)
				}
				failpoint, crashed := crashAt(n)
				err := o.change(openStore(t, dir, Options{Failpoint: failpoint}))
				if !*crashed {
					if err != nil {
						t.Fatalf("change without a crash: %v", err)
					}
					if n == 1 {
						t.Fatal("the change went through no failpoint")
					}
					break
				}
				if !errors.Is(err, durable.ErrSimulatedCrash) {
					t.Fatalf("crash at step %d: change returned %v", n, err)
				}
				got, err := o.read(openStore(t, dir, Options{}))
				if err != nil {
					t.Fatalf("crash at step %d: reading after restart: %v", n, err)
				}
				switch {
				case reflect.DeepEqual(got, o.old):
					sawOld = true
				case reflect.DeepEqual(got, o.new):
					sawNew = true
				default:
					t.Fatalf("crash at step %d: read %#v, want the old %#v or the new %#v", n, got, o.old, o.new)
				}
			}
			if (!sawOld && !o.removal) || !sawNew {
				t.Fatalf("crashes showed old=%v new=%v; each should appear at some step", sawOld, sawNew)
			}
		})
	}
}
