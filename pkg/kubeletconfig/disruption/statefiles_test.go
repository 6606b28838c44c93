package disruption

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// stateFileConstName is the name of a constant or variable holding a
	// state file's name: cpuManagerStateFileName, allocatedPodsStateFile,
	// kubeletDeviceManagerCheckpoint... (not CheckpointKind, checkpointPath
	// or DefaultKubeletCheckpointsDirName).
	stateFileConstName = regexp.MustCompile(`(?i)(statefile(name)?|checkpoint)$`)
	// fileName is what a file name looks like.
	fileName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	// stateFileLiteral is a state file named in place, as in
	// filepath.Join(dir, "dra_health_state").
	stateFileLiteral = regexp.MustCompile(`^[a-z0-9_.-]+_(state|checkpoint)$`)
)

// declaredStateFiles finds the state files the kubelet's source names: the
// string constants and variables named like a state file's name, and the
// string literals ending in _state or _checkpoint joined into a path.
// The result maps each name to where it was found.
func declaredStateFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	found := map[string]string{}
	fset := sourceFiles
	for _, path := range goFiles(t, dir) {
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		record := func(lit ast.Expr) {
			basic, ok := lit.(*ast.BasicLit)
			if !ok || basic.Kind != token.STRING {
				return
			}
			value, err := strconv.Unquote(basic.Value)
			if err != nil || !fileName.MatchString(value) {
				return
			}
			position := fset.Position(basic.Pos())
			rel, _ := filepath.Rel(dir, position.Filename)
			found[value] = rel + ":" + strconv.Itoa(position.Line)
		}
		ast.Inspect(file, func(node ast.Node) bool {
			switch node := node.(type) {
			case *ast.ValueSpec:
				for i, name := range node.Names {
					if i < len(node.Values) && stateFileConstName.MatchString(name.Name) {
						record(node.Values[i])
					}
				}
			case *ast.CallExpr:
				selector, ok := node.Fun.(*ast.SelectorExpr)
				if !ok || selector.Sel.Name != "Join" {
					return true
				}
				if pkg, ok := selector.X.(*ast.Ident); !ok || (pkg.Name != "filepath" && pkg.Name != "path") {
					return true
				}
				for _, arg := range node.Args {
					if basic, ok := arg.(*ast.BasicLit); ok && basic.Kind == token.STRING {
						if value, err := strconv.Unquote(basic.Value); err == nil && stateFileLiteral.MatchString(value) {
							record(arg)
						}
					}
				}
			}
			return true
		})
	}
	return found
}

// TestStateFilesAgainstKubeletSource checks this package's lists of state
// files against the kubelet's own: each file a Plan may remove is one the
// kubelet declares, and each file the kubelet declares is either removable
// or deliberately kept. A state file added upstream fails it.
func TestStateFilesAgainstKubeletSource(t *testing.T) {
	source := kubeletSource(t)
	declared := declaredStateFiles(t, filepath.Join(source, "pkg", "kubelet"))
	// The search itself must work: these are certain.
	for _, name := range []string{cpuManagerState, memoryManagerState, "kubelet_internal_checkpoint", "dra_manager_state", "dra_health_state"} {
		if _, ok := declared[name]; !ok {
			t.Fatalf("found %v in the kubelet's source, not %q: the search is broken", declared, name)
		}
	}
	known := map[string]StateFile{}
	for _, f := range StateFiles() {
		known[f.Name] = f
	}
	for name, where := range declared {
		if _, ok := known[name]; !ok {
			t.Errorf("the kubelet declares the state file %q (%s), which this package neither removes nor keeps: decide what a configuration change does to it and add it to stateFiles", name, where)
		}
	}
	for name, f := range known {
		if _, ok := declared[name]; !ok {
			t.Errorf("stateFiles lists %q (removable: %v), which the kubelet no longer declares", name, f.Removable)
		}
	}
	for _, f := range Fields() {
		for _, file := range f.StateFiles {
			if _, ok := declared[file]; !ok {
				t.Errorf("%s may remove %q, which the kubelet does not declare", f.Name, file)
			}
		}
	}
}

// TestKubeletPremises checks that the kubelet still behaves as the
// classification assumes: it refuses a checkpoint written under another
// configuration and asks for a drain, and it takes off allocatable the
// hard eviction signals this package counts, and no other.
func TestKubeletPremises(t *testing.T) {
	source := kubeletSource(t)
	cm := filepath.Join(source, "pkg", "kubelet", "cm")
	for _, premise := range []struct{ dir, text string }{
		{"cpumanager", "please drain this node and delete the CPU manager checkpoint file"},
		{"cpumanager", "differs from state checkpoint policy"},
		{"cpumanager", "not all reserved cpus"},
		{"memorymanager", "please drain this node and delete the memory manager checkpoint file"},
		{"memorymanager", "differs from state checkpoint policy"},
		{"memorymanager", "the expected machine state is different from the real one"},
	} {
		if !sourceContains(t, filepath.Join(cm, premise.dir), premise.text) {
			t.Errorf("pkg/kubelet/cm/%s no longer says %q: the classification of its fields rests on it; read the new code and revisit fields.go", premise.dir, premise.text)
		}
	}
	topologyFiles := declaredStateFiles(t, filepath.Join(cm, "topologymanager"))
	if len(topologyFiles) > 0 {
		t.Errorf("the topology manager now keeps state files %v: its fields may need to remove them", topologyFiles)
	}

	signals := switchCases(t, filepath.Join(cm, "helpers.go"), "hardEvictionReservation")
	want := []string{"evictionapi.SignalMemoryAvailable", "evictionapi.SignalNodeFsAvailable"}
	if !slices.Equal(signals, want) {
		t.Errorf("hardEvictionReservation takes %v off allocatable, this package counts %v (allocatableSignals)", signals, want)
	}
}

// sourceContains reports whether a non-test Go file under dir contains text.
func sourceContains(t *testing.T, dir, text string) bool {
	t.Helper()
	for _, path := range goFiles(t, dir) {
		if data := readFile(t, path); strings.Contains(string(data), text) {
			return true
		}
	}
	return false
}

// switchCases lists, sorted, the case expressions of the switch statements
// in the function funcName of a file.
func switchCases(t *testing.T, path, funcName string) []string {
	t.Helper()
	file := parseFile(t, path)
	var cases []string
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != funcName {
			continue
		}
		ast.Inspect(fn, func(node ast.Node) bool {
			if clause, ok := node.(*ast.CaseClause); ok {
				for _, expr := range clause.List {
					cases = append(cases, exprString(expr))
				}
			}
			return true
		})
	}
	if cases == nil {
		t.Fatalf("no function %s with a switch in %s", funcName, path)
	}
	slices.Sort(cases)
	return cases
}

// TestDeclaredStateFilesSearch shows, on made-up source, that the search
// finds a new state file whichever way upstream names it, and ignores
// strings that only look alike.
func TestDeclaredStateFilesSearch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a", "manager.go"), `package a

import "path/filepath"

const fooManagerStateFileName = "foo_manager_state"

var (
	barCheckpoint  = "bar_internal_checkpoint"
	CheckpointKind = "FooCheckpoint"
	checkpointPath = "/checkpoint/"
	metricLabel    = "container_state"
	bazStateFile   = "baz_pods_state"
)

func open(dir string) string { return filepath.Join(dir, "qux_health_state") }
`)
	writeFile(t, filepath.Join(dir, "a", "manager_test.go"), `package a

const testStateFileName = "test_only_state"
`)
	got := declaredStateFiles(t, dir)
	want := []string{"bar_internal_checkpoint", "baz_pods_state", "foo_manager_state", "qux_health_state"}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
		t.Errorf("declaredStateFiles() = %v, want %v", got, want)
	}
}

func TestIsOffline(t *testing.T) {
	for message, want := range map[string]bool{
		"k8s.io/kubernetes@v1.37.2: module lookup disabled by GOPROXY=off":                                                  true,
		`Get "https://proxy.golang.org/k8s.io/kubernetes/@v/v1.37.2.info": dial tcp: lookup proxy.golang.org: no such host`: true,
		"dial tcp 142.250.0.1:443: connect: network is unreachable":                                                         true,
		"k8s.io/kubernetes@v1.99.0: reading https://proxy.golang.org/...: 404 Not Found":                                    false,
		"verifying module: checksum mismatch":                                                                               false,
	} {
		if got := isOffline(message); got != want {
			t.Errorf("isOffline(%q) = %v, want %v", message, got, want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
