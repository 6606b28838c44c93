package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/renameio/v2"
	"k8s.io/klog/v2"
)

// TestRemoveStaleTemps leaves a real renameio temporary file behind, as a
// kill between create and rename would, among the kubelet's and other
// people's files, and checks that only the temporary files of the agent's
// own file go, each logged.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	file := ConfigFile{Path: filepath.Join(dir, "90-nodeguard.conf")}
	if err := file.Write(Rendered{Data: []byte("maxPods: 42\n")}); err != nil {
		t.Fatal(err)
	}

	// A write killed after renameio created its temporary file: the name
	// is renameio's own, not a guess of it.
	pending, err := renameio.NewPendingFile(file.Path, renameio.WithTempDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pending.WriteString("maxPods: 7\n"); err != nil {
		t.Fatal(err)
	}
	if err := pending.File.Close(); err != nil {
		t.Fatal(err)
	}
	realTemp := filepath.Base(pending.Name())
	stale := []string{realTemp, ".90-nodeguard.conf0", ".90-nodeguard.conf9223372036854775807"}

	survivors := []string{
		"90-nodeguard.conf",    // the agent's own file
		"10-local.conf",        // another drop-in
		".10-local.conf123",    // another writer's temporary file
		".90-nodeguard.conf",   // no digits
		".90-nodeguard.conf1a", // not only digits
		".90-nodeguard.conf-1", // a sign renameio never writes
		".90-nodeguard.conf.bak",
		".90-nodeguard.conf12345678901234567890", // more digits than an int64 has
		"90-nodeguard.conf123",                   // no leading dot
	}
	for _, name := range append(slices.Clone(stale[1:]), survivors[1:]...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Only regular files are temporary files.
	if err := os.Mkdir(filepath.Join(dir, ".90-nodeguard.conf55"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("10-local.conf", filepath.Join(dir, ".90-nodeguard.conf66")); err != nil {
		t.Fatal(err)
	}
	survivors = append(survivors, ".90-nodeguard.conf55", ".90-nodeguard.conf66")

	var logged []string
	logger := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	if err := file.RemoveStaleTemps(klog.NewContext(context.Background(), logger)); err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	slices.Sort(left)
	slices.Sort(survivors)
	if !slices.Equal(left, survivors) {
		t.Errorf("left in the directory:\n  %q\nwant\n  %q", left, survivors)
	}
	if len(logged) != len(stale) {
		t.Errorf("logged %d removals, want %d: %q", len(logged), len(stale), logged)
	}
	if ok, err := file.Matches(Rendered{Data: []byte("maxPods: 42\n")}); err != nil || !ok {
		t.Errorf("the agent's own file changed: matches %v, %v", ok, err)
	}
}

func TestRemoveStaleTempsWithoutDirectory(t *testing.T) {
	file := ConfigFile{Path: filepath.Join(t.TempDir(), "absent", "config.yaml")}
	if err := file.RemoveStaleTemps(context.Background()); err != nil {
		t.Fatalf("RemoveStaleTemps = %v, want nothing to do", err)
	}
}
