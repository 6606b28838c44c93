package durable

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/renameio/v2"
)

// TestCrashAtEveryStep stops a write at each step and checks that the target
// holds the old content or the new one, and that only a crash before the
// rename leaves a temporary file, which RemoveTemps finds.
func TestCrashAtEveryStep(t *testing.T) {
	steps := []Step{StepTempWritten, StepTempSynced, StepRenamed, StepDirSynced}
	for i, crashAt := range steps {
		t.Run(string(crashAt), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "file")
			if err := WriteFile(path, []byte("old"), nil); err != nil {
				t.Fatal(err)
			}
			var seen []Step
			err := WriteFile(path, []byte("new"), func(step Step, p string) error {
				if p != path {
					t.Errorf("failpoint for %s, want %s", p, path)
				}
				seen = append(seen, step)
				if step == crashAt {
					return ErrSimulatedCrash
				}
				return nil
			})
			if !errors.Is(err, ErrSimulatedCrash) {
				t.Fatalf("got %v, want the simulated crash", err)
			}
			if !slices.Equal(seen, steps[:i+1]) {
				t.Errorf("steps %v, want %v", seen, steps[:i+1])
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			renamed := i >= 2
			if want := map[bool]string{false: "old", true: "new"}[renamed]; string(data) != want {
				t.Errorf("the file holds %q, want %q", data, want)
			}
			removed, err := RemoveTemps(dir, func(name string) bool { return IsTempFor(name, "file") })
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 1, true: 0}[renamed]; len(removed) != want {
				t.Errorf("removed %v, want %d temporary files", removed, want)
			}
		})
	}
}

func TestWriteFilePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), nil, renameio.WithStaticPermissions(0o600)); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "file")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var seen []Step
	if err := Remove(path, func(step Step, _ string) error { seen = append(seen, step); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file is still there: %v", err)
	}
	if !slices.Equal(seen, []Step{StepRemoved}) {
		t.Errorf("steps %v, want [%s]", seen, StepRemoved)
	}
	if err := Remove(path, nil); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
}

func TestIsTempFor(t *testing.T) {
	for name, want := range map[string]bool{
		".file0":                    true,
		".file9223372036854775807":  true,
		".file":                     false,
		"file1":                     false,
		".file1a":                   false,
		".file-1":                   false,
		".file12345678901234567890": false,
		".other1":                   false,
	} {
		if got := IsTempFor(name, "file"); got != want {
			t.Errorf("IsTempFor(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRemoveTempsWithoutDirectory(t *testing.T) {
	removed, err := RemoveTemps(filepath.Join(t.TempDir(), "absent"), func(string) bool { return true })
	if err != nil || removed != nil {
		t.Fatalf("got %v, %v; want nothing to do", removed, err)
	}
}
