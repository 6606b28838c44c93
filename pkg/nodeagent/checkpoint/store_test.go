package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
)

func ref(uid, rv string) contract.ConfigMapVersion {
	return contract.ConfigMapVersion{Namespace: "kube-system", Name: "kubelet-a", UID: uid, ResourceVersion: rv}
}

func sample(uid, rv, config string) Checkpoint {
	return Checkpoint{Ref: ref(uid, rv), Key: "kubelet", HasKey: true, Config: config, DownloadedAt: time.Unix(1700000000, 0).UTC()}
}

func openStore(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestCheckpointRoundTrip(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	cp := sample("0b5b2f0e-aaaa-4bbb-8ccc-000000000001", "42", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	if err := s.SaveCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadCheckpoint(cp.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if got != cp {
		t.Fatalf("got %+v, want %+v", got, cp)
	}
	if _, err := s.LoadCheckpoint(ref("0b5b2f0e-aaaa-4bbb-8ccc-000000000001", "43")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing checkpoint: got %v, want ErrNotFound", err)
	}
}

func TestRefsThatCannotNameFiles(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	for _, r := range []contract.ConfigMapVersion{
		ref("../../etc", "1"),
		ref("uid", "1/2"),
		ref("", "1"),
		ref("uid", ""),
		ref("uid", ".."),
		{Namespace: "Bad_NS", Name: "x", UID: "u", ResourceVersion: "1"},
		{Namespace: "ns", Name: "../x", UID: "u", ResourceVersion: "1"},
		ref(strings.Repeat("a", 65), "1"),
	} {
		if err := s.SaveCheckpoint(Checkpoint{Ref: r, HasKey: true}); err == nil {
			t.Errorf("SaveCheckpoint(%+v) succeeded, want an error", r)
		}
		if _, err := s.LoadCheckpoint(r); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("LoadCheckpoint(%+v) = %v, want a validation error", r, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir(), checkpointsDirName))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("files were written: %v", entries)
	}
}

// TestDamagedCheckpoints covers every way a checkpoint file can be wrong:
// each is detected, moved to corrupt/, and reported as ErrCorrupt.
func TestDamagedCheckpoints(t *testing.T) {
	good := sample("uid-1", "7", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n")
	other := sample("uid-2", "9", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	encoded, err := encodeEnvelope(checkpointKind, good)
	if err != nil {
		t.Fatal(err)
	}
	otherEncoded, err := encodeEnvelope(checkpointKind, other)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(path string) error{
		"truncated": func(p string) error { return os.WriteFile(p, encoded[:len(encoded)/2], 0o600) },
		"empty":     func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"flipped byte": func(p string) error {
			return os.WriteFile(p, []byte(strings.Replace(string(encoded), "maxPods: 50", "maxPods: 51", 1)), 0o600)
		},
		"wrongly placed": func(p string) error { return os.WriteFile(p, otherEncoded, 0o600) },
		"same UID and version, another ConfigMap": func(p string) error {
			renamed := good
			renamed.Ref.Name = "another"
			data, err := encodeEnvelope(checkpointKind, renamed)
			if err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o600)
		},
		"not json": func(p string) error { return os.WriteFile(p, []byte("\x00\x01garbage"), 0o600) },
		"trailing data": func(p string) error {
			return os.WriteFile(p, append(append([]byte{}, encoded...), []byte("{}")...), 0o600)
		},
		"a record, not a checkpoint": func(p string) error {
			data, err := encodeEnvelope(string(recordAssigned), refRecord{Ref: &good.Ref})
			if err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o600)
		},
		"a symlink": func(p string) error {
			target := filepath.Join(filepath.Dir(p), "..", "elsewhere")
			if err := os.WriteFile(target, encoded, 0o600); err != nil {
				return err
			}
			return os.Symlink(target, p)
		},
		"a directory": func(p string) error { return os.Mkdir(p, 0o700) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{})
			path, err := s.checkpointPath(good.Ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			_, err = s.LoadCheckpoint(good.Ref)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadCheckpoint: got %v, want ErrCorrupt", err)
			}
			if _, statErr := os.Lstat(path); !errors.Is(statErr, os.ErrNotExist) {
				t.Fatalf("damaged file still in place: %v", statErr)
			}
			moved, err := os.ReadDir(filepath.Join(s.Dir(), corruptDirName))
			if err != nil || len(moved) != 1 {
				t.Fatalf("corrupt/ holds %v (%v), want the moved file", moved, err)
			}
			// The store works on: the same checkpoint can be saved again.
			if err := s.SaveCheckpoint(good); err != nil {
				t.Fatal(err)
			}
			if _, err := s.LoadCheckpoint(good.Ref); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDamagedRecordsFallBack(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	cp := sample("uid-1", "7", "x")
	if err := s.SaveCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAssigned(&cp.Ref); err != nil {
		t.Fatal(err)
	}
	path := s.recordPath(recordAssigned)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Assigned()
	if !errors.Is(err, ErrCorrupt) || got != nil {
		t.Fatalf("Assigned() = %v, %v; want nil and ErrCorrupt", got, err)
	}
	// Once moved aside, the record reads as absent.
	got, err = s.Assigned()
	if err != nil || got != nil {
		t.Fatalf("Assigned() after quarantine = %v, %v; want nil, nil", got, err)
	}
}

// TestDamagedDrainRecord: a torn drain record, or one naming a state file
// that is not a plain name (a path the agent would remove outside the
// kubelet's root directory), is corrupt: moved aside, read as no drain
// (after which the agent lifts its cordon), never acted on.
func TestDamagedDrainRecord(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	cp := sample("uid-1", "7", "x")
	if err := s.SaveCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	good := Drain{Ref: &cp.Ref, StateFiles: []string{"cpu_manager_state"}, BootID: "b"}
	if err := s.SetDrain(good); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Drain(); err != nil || got == nil || got.StateFiles[0] != "cpu_manager_state" {
		t.Fatalf("Drain() = %+v, %v", got, err)
	}
	for _, bad := range []string{"../../etc/passwd", "/var/lib/kubelet/cpu_manager_state", "..", ""} {
		d := good
		d.StateFiles = []string{bad}
		if err := s.SetDrain(d); err == nil {
			t.Errorf("SetDrain with state file %q succeeded", bad)
		}
		// Written behind the store's back, it is corrupt on reading.
		data, err := encodeEnvelope(string(recordDrain), d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.recordPath(recordDrain), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Drain(); !errors.Is(err, ErrCorrupt) || got != nil {
			t.Errorf("Drain() with state file %q = %+v, %v; want nil and ErrCorrupt", bad, got, err)
		}
	}
	data, err := encodeEnvelope(string(recordDrain), good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.recordPath(recordDrain), data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Drain(); !errors.Is(err, ErrCorrupt) || got != nil {
		t.Fatalf("a torn drain record: %+v, %v; want nil and ErrCorrupt", got, err)
	}
	if got, err := s.Drain(); err != nil || got != nil {
		t.Fatalf("after quarantine: %+v, %v; want nil, nil", got, err)
	}
}

func TestRefsRequireDurableCheckpoints(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	r := ref("uid-1", "1")
	if err := s.SetAssigned(&r); err == nil {
		t.Fatal("SetAssigned to a missing checkpoint succeeded")
	}
	if err := s.SetLastKnownGood(&r); err == nil {
		t.Fatal("SetLastKnownGood to a missing checkpoint succeeded")
	}
	if err := s.SetTrial(Trial{Ref: r, BootID: "b"}); err == nil {
		t.Fatal("SetTrial to a missing checkpoint succeeded")
	}
	if err := s.SetActive(Active{Ref: &r}); err == nil {
		t.Fatal("SetActive to a missing checkpoint succeeded")
	}
	if err := s.SetAssigned(nil); err != nil {
		t.Fatalf("SetAssigned(local): %v", err)
	}
}

func TestOpenRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{Failpoint: func(step durable.Step, _ string) error {
		if step == durable.StepTempSynced {
			return durable.ErrSimulatedCrash
		}
		return nil
	}})
	if err := s.SaveCheckpoint(sample("uid-1", "1", "x")); !errors.Is(err, durable.ErrSimulatedCrash) {
		t.Fatalf("got %v, want the simulated crash", err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, checkpointsDirName, ".*"))
	if len(names) != 1 {
		t.Fatalf("the crash left %v, want one temporary file", names)
	}
	openStore(t, dir, Options{})
	names, _ = filepath.Glob(filepath.Join(dir, checkpointsDirName, ".*"))
	if len(names) != 0 {
		t.Fatalf("Open left %v behind", names)
	}
}

func TestPruneCheckpoints(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	keep := sample("uid-1", "1", "a")
	drop := sample("uid-2", "1", "b")
	for _, cp := range []Checkpoint{keep, drop} {
		if err := s.SaveCheckpoint(cp); err != nil {
			t.Fatal(err)
		}
	}
	stray := filepath.Join(s.Dir(), checkpointsDirName, "notes.txt")
	if err := os.WriteFile(stray, []byte("?"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneCheckpoints([]contract.ConfigMapVersion{keep.Ref}); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(s.checkpointsDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Name() != "uid-1_1.json" {
		t.Fatalf("after pruning: %v", left)
	}
	if moved, _ := os.ReadDir(filepath.Join(s.Dir(), corruptDirName)); len(moved) != 1 {
		t.Fatalf("the stray file was not moved aside: %v", moved)
	}
}

func TestBadListIsBounded(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	var entries []BadEntry
	for i := range MaxBadEntries + 5 {
		entries = append(entries, BadEntry{Ref: ref("uid", string(rune('a'+i%26))+"1"), Reason: "RolledBack"})
	}
	if err := s.SetBad(entries); err != nil {
		t.Fatal(err)
	}
	got, err := s.Bad()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxBadEntries || !reflect.DeepEqual(got[len(got)-1], entries[len(entries)-1]) {
		t.Fatalf("kept %d entries ending in %+v", len(got), got[len(got)-1])
	}
}

func TestCorruptDirIsBounded(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	r := ref("uid-1", "1")
	path, _ := s.checkpointPath(r)
	for range maxCorruptFiles + 3 {
		if err := os.WriteFile(path, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadCheckpoint(r); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	}
	moved, _ := os.ReadDir(filepath.Join(s.Dir(), corruptDirName))
	if len(moved) != maxCorruptFiles {
		t.Fatalf("corrupt/ holds %d files, want %d", len(moved), maxCorruptFiles)
	}
}

func TestUnparseableKubeletVersionIsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	if err := s.SetKubeletVersion("not a version"); err == nil {
		t.Fatal("SetKubeletVersion accepted a version that does not parse")
	}
	data, err := encodeEnvelope(string(recordKubeletVersion), kubeletVersionRecord{Version: "v1.x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.recordPath(recordKubeletVersion), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := s.KubeletVersion(); !errors.Is(err, ErrCorrupt) || v != "" {
		t.Fatalf("KubeletVersion() = %q, %v; want \"\" and ErrCorrupt", v, err)
	}
	if err := s.SetKubeletVersion("v1.37.2"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.KubeletVersion(); err != nil || v != "v1.37.2" {
		t.Fatalf("KubeletVersion() = %q, %v after recording again", v, err)
	}
}
