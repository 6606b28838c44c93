package crd

import (
	"bytes"
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
)

// TestGeneratedFilesUpToDate runs the generators of the go:generate line in
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
	if !slices.Equal(generated, checkedIn) {
		t.Errorf("%s holds %v, controller-gen makes %v; run make generate", crdDir, checkedIn, generated)
	}
	for _, name := range generated {
		compareFile(t, filepath.Join(out, "crd", name), filepath.Join(root, crdDir, name))
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
		t.Errorf("%s is not what controller-gen makes of the types; run make generate", checkedIn)
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
