package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/statelock"
)

func ref(uid, rv string) contract.ConfigMapVersion {
	return contract.ConfigMapVersion{Namespace: "kube-system", Name: "kubelet-a", UID: uid, ResourceVersion: rv}
}

func sample(uid, rv, config string) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{Ref: ref(uid, rv), Key: "kubelet", HasKey: true, Config: config, DownloadedAt: time.Unix(1700000000, 0).UTC()}
}

func openStore(t *testing.T) *checkpoint.Store {
	t.Helper()
	s, err := checkpoint.Open(t.TempDir(), checkpoint.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestInspect lays out state directories, sound and damaged, and checks what
// Inspect says of each, and that it never changes the directory.
func TestInspect(t *testing.T) {
	a, b := sample("uid-a", "1", "a"), sample("uid-b", "2", "b")
	sound := func(t *testing.T, s *checkpoint.Store) {
		t.Helper()
		err := errors.Join(s.SaveCheckpoint(a), s.SaveCheckpoint(b), s.SetAssigned(&b.Ref), s.SetLastKnownGood(&a.Ref),
			s.SetActive(checkpoint.Active{Ref: &b.Ref, FileSHA256: "f00d"}),
			s.SetTrial(checkpoint.Trial{Ref: b.Ref, BootID: "boot-1", StartedSinceBoot: time.Minute}),
			s.SetBad([]checkpoint.BadEntry{{Ref: ref("uid-c", "3"), Reason: "RolledBack"}}),
			s.SetKubeletVersion("1.37.2"))
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(t *testing.T, s *checkpoint.Store, rel, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(s.Dir(), rel), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		damage  func(t *testing.T, s *checkpoint.Store)
		wantErr []string
		// wantTemp are the temporary files listed.
		wantTemp []string
	}{{
		name:   "sound",
		damage: func(*testing.T, *checkpoint.Store) {},
	}, {
		name: "temporary files of interrupted writes are listed, not state",
		damage: func(t *testing.T, s *checkpoint.Store) {
			write(t, s, ".assigned123", `{"format":`)
			write(t, s, "checkpoints/.uid-d_4.json99", "")
		},
		wantTemp: []string{".assigned123", "checkpoints/.uid-d_4.json99"},
	}, {
		name: "truncated record",
		damage: func(t *testing.T, s *checkpoint.Store) {
			write(t, s, "assigned", `{"format":"nodeguard.dev/agent-state/v1","ki`)
		},
		wantErr: []string{"record assigned"},
	}, {
		name: "checksum mismatch in a checkpoint",
		damage: func(t *testing.T, s *checkpoint.Store) {
			path := filepath.Join(s.Dir(), "checkpoints", "uid-a_1.json")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			write(t, s, "checkpoints/uid-a_1.json", strings.Replace(string(data), `"config":"a"`, `"config":"x"`, 1))
		},
		wantErr: []string{"checkpoint uid-a_1.json", "checksum mismatch", "record last-known-good points at"},
	}, {
		name: "truncated checkpoint",
		damage: func(t *testing.T, s *checkpoint.Store) {
			write(t, s, "checkpoints/uid-a_1.json", `{"format":"nodeguard.dev/agent-state/v1","ki`)
		},
		wantErr: []string{"checkpoint uid-a_1.json: does not decode", "record last-known-good points at"},
	}, {
		name: "wrongly placed checkpoint",
		damage: func(t *testing.T, s *checkpoint.Store) {
			if err := os.Rename(filepath.Join(s.Dir(), "checkpoints", "uid-a_1.json"), filepath.Join(s.Dir(), "checkpoints", "uid-a_9.json")); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: []string{"wrongly placed", "record last-known-good points at"},
	}, {
		name: "dangling ref",
		damage: func(t *testing.T, s *checkpoint.Store) {
			if err := os.Remove(filepath.Join(s.Dir(), "checkpoints", "uid-b_2.json")); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: []string{"record assigned points at", "record active points at", "record trial points at"},
	}, {
		name:   "the running agent's lock is part of the directory",
		damage: func(t *testing.T, s *checkpoint.Store) { write(t, s, statelock.FileName, "") },
	}, {
		name:    "a file the agent never writes",
		damage:  func(t *testing.T, s *checkpoint.Store) { write(t, s, "assigned.bak", "") },
		wantErr: []string{"assigned.bak: not a file the agent writes"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			sound(t, s)
			tc.damage(t, s)
			before := listTree(t, s.Dir())
			in, err := Inspect(s.Dir())
			if after := listTree(t, s.Dir()); !reflect.DeepEqual(before, after) {
				t.Fatalf("Inspect changed the directory:\n%v\n%v", before, after)
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Inspect error %v, want it to mention %q", err, want)
				}
			}
			if !reflect.DeepEqual(in.Temporary, tc.wantTemp) {
				t.Errorf("temporary files %v, want %v", in.Temporary, tc.wantTemp)
			}
			if err != nil {
				return
			}
			if *in.Assigned != b.Ref || *in.LastKnownGood != a.Ref || *in.Active.Ref != b.Ref || in.Trial.Ref != b.Ref ||
				len(in.Bad) != 1 || len(in.Checkpoints) != 2 || in.KubeletVersion != "1.37.2" {
				t.Errorf("inspection %+v", in)
			}
		})
	}
}

func TestInspectEmptyAndMissing(t *testing.T) {
	s := openStore(t)
	in, err := Inspect(s.Dir())
	if err != nil || in.Assigned != nil || in.Active != nil || len(in.Checkpoints) != 0 {
		t.Fatalf("empty directory: %+v, %v", in, err)
	}
	if _, err := Inspect(filepath.Join(s.Dir(), "missing")); err == nil {
		t.Fatal("a missing directory was inspected")
	}
}

func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		names = append(names, path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
