package crd

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// The generated files and where they live, relative to the repository root.
const (
	apisDir     = "pkg/apis/nodeguard/v1alpha1"
	deepCopy    = "zz_generated.deepcopy.go"
	crdDir      = "manifests/base/crd"
	toolsModule = "hack/tools/controller-gen/go.mod"
	// The clientset, listers and informers, and the script that makes them
	// (with the generators of hack/tools/code-generator).
	generatedDir  = "pkg/generated"
	codegenScript = "hack/update-codegen.sh"
)

// TestGeneratedFilesUpToDate runs the generators of the go:generate lines in
// pkg/apis/nodeguard/v1alpha1/doc.go into a temporary directory and fails
// when the checked-in files differ, so a change to the types cannot land
// without `make generate`.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	controllerGen := filepath.Join(out, "controller-gen")
	// Built from its own module, as go:generate's `go tool -modfile` does;
	// the build cache makes every run after the first one quick.
	run(t, root, "go", "build", "-modfile="+toolsModule, "-o", controllerGen, "sigs.k8s.io/controller-tools/cmd/controller-gen")
	run(t, root, controllerGen,
		"object", "paths=./"+apisDir, "output:object:dir="+filepath.Join(out, "object"),
		"crd", "paths=./"+apisDir, "output:crd:dir="+filepath.Join(out, "crd"))

	compareFile(t, filepath.Join(out, "object", deepCopy), filepath.Join(root, apisDir, deepCopy))
	generated := listDir(t, filepath.Join(out, "crd"))
	checkedIn := listDir(t, filepath.Join(root, crdDir))
	for _, name := range compareNames(t, crdDir, generated, checkedIn) {
		compareFile(t, filepath.Join(out, "crd", name), filepath.Join(root, crdDir, name))
	}

	// The script make generate runs, given a temporary directory instead
	// of pkg/generated; `go tool` keeps the generators it builds in the
	// build cache, so only the first run builds them.
	run(t, root, "bash", codegenScript, filepath.Join(out, "generated"))
	generated = listTree(t, filepath.Join(out, "generated"))
	checkedIn = listTree(t, filepath.Join(root, generatedDir))
	for _, name := range compareNames(t, generatedDir, generated, checkedIn) {
		compareFile(t, filepath.Join(out, "generated", name), filepath.Join(root, generatedDir, name))
	}
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	// The tool's module stands alone; a go.work a developer has would
	// otherwise decide its dependencies.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, output)
	}
}

func compareFile(t *testing.T, generated, checkedIn string) {
	t.Helper()
	want, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(checkedIn)
	if err != nil {
		t.Fatalf("%v; run make generate", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the generators make of the types; run make generate", checkedIn)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// compareNames fails when dir holds files the generators do not make, or
// lacks some they do, and returns the names on both lists.
func compareNames(t *testing.T, dir string, generated, checkedIn []string) []string {
	t.Helper()
	for _, name := range checkedIn {
		if !slices.Contains(generated, name) {
			t.Errorf("%s holds %s, which the generators no longer make; run make generate", dir, name)
		}
	}
	var both []string
	for _, name := range generated {
		if slices.Contains(checkedIn, name) {
			both = append(both, name)
		} else {
			t.Errorf("%s lacks %s, which the generators make; run make generate", dir, name)
		}
	}
	return both
}

// listTree lists the files under dir, as paths relative to it.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
