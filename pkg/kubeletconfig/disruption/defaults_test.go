package disruption

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultsAgainstKubeletSource checks the defaults view.go fills in
// against the kubelet's defaulting code, and that the fields the rules read
// without a default really have none: comparing an unset field with an
// explicit default rests on them.
func TestDefaultsAgainstKubeletSource(t *testing.T) {
	source := kubeletSource(t)
	assigned := defaultAssignments(t, filepath.Join(source, "pkg", "kubelet", "apis", "config", "v1beta1", "defaults.go"))
	want := map[string]string{
		"CPUManagerPolicy":              strconv.Quote(defaultCPUManagerPolicy),
		"MemoryManagerPolicy":           "kubeletconfigv1beta1.NoneMemoryManagerPolicy",
		"TopologyManagerPolicy":         "kubeletconfigv1beta1.NoneTopologyManagerPolicy",
		"TopologyManagerScope":          "kubeletconfigv1beta1.ContainerTopologyManagerScope",
		"MaxPods":                       strconv.Itoa(defaultMaxPods),
		"CgroupDriver":                  strconv.Quote(defaultCgroupDriver),
		"CgroupsPerQOS":                 "ptr.To(true)",
		"LocalStorageCapacityIsolation": "ptr.To(true)",
		"MergeDefaultEvictionSettings":  "ptr.To(false)",
		"EnforceNodeAllocatable":        "DefaultNodeAllocatableEnforcement",
	}
	for field, value := range want {
		if got, ok := assigned["obj."+field]; !ok || got != value {
			t.Errorf("the kubelet defaults %s to %q, view.go assumes %q", field, got, value)
		}
	}
	for _, field := range []string{
		"CgroupRoot", "PodsPerCore", "EvictionHard", "KubeReserved", "SystemReserved", "ReservedSystemCPUs",
		"ReservedMemory", "UserNamespaces", "AllowedUnsafeSysctls", "FeatureGates", "CPUManagerPolicyOptions",
		"TopologyManagerPolicyOptions",
	} {
		for target, value := range assigned {
			if target == "obj."+field || strings.HasPrefix(target, "obj."+field+".") {
				t.Errorf("the kubelet now defaults %s to %s; view.go must fill that in", target, value)
			}
		}
	}
	if got := varValue(t, filepath.Join(source, "pkg", "kubelet", "apis", "config", "v1beta1", "defaults.go"), "DefaultNodeAllocatableEnforcement"); got != `[]string{"pods"}` {
		t.Errorf("DefaultNodeAllocatableEnforcement is %s, enforceNodeAllocatableRule assumes pods", got)
	}
	if got := varValue(t, filepath.Join(source, "pkg", "kubelet", "kubeletconfig", "defaults.go"), "DefaultKubeletUserNamespacesIDsPerPod"); got != strconv.Itoa(defaultIDsPerPod) {
		t.Errorf("the kubelet's default idsPerPod is %s, view.go assumes %d", got, defaultIDsPerPod)
	}

	evictionDefaults := stringMapLiteral(t, filepath.Join(source, "pkg", "kubelet", "eviction", "defaults_linux.go"), "DefaultEvictionHard")
	if !maps.Equal(evictionDefaults, defaultEvictionHard) {
		t.Errorf("the kubelet's default evictionHard is %v, view.go assumes %v", evictionDefaults, defaultEvictionHard)
	}

	// What cmd/kubelet does to the configuration before using it.
	app := filepath.Join(source, "cmd", "kubelet", "app")
	for _, text := range []string{
		`s.CgroupRoot = "/"`,            // defaultCgroupRoot
		`delete(s.KubeReserved, "cpu")`, // reservedSystemCPUs replaces the cpu reservations
		`s.SystemReserved["cpu"] = strconv.Itoa(reservedSystemCPUs.Size())`,
		`kc.EvictionHard = eviction.DefaultEvictionHard`, // unset evictionHard
		`} else if kc.MergeDefaultEvictionSettings {`,    // merged only when asked
	} {
		if !sourceContains(t, app, text) {
			t.Errorf("cmd/kubelet/app no longer says %q; newView copies what it did", text)
		}
	}
}

// defaultAssignments maps each `obj.X = value` of
// SetDefaults_KubeletConfiguration to its value, as written.
func defaultAssignments(t *testing.T, path string) map[string]string {
	t.Helper()
	file := parseFile(t, path)
	assigned := map[string]string{}
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "SetDefaults_KubeletConfiguration" {
			continue
		}
		ast.Inspect(fn, func(node ast.Node) bool {
			if assign, ok := node.(*ast.AssignStmt); ok && assign.Tok == token.ASSIGN && len(assign.Lhs) == len(assign.Rhs) {
				for i, lhs := range assign.Lhs {
					target := exprString(lhs)
					if strings.HasPrefix(target, "obj.") {
						// The last assignment wins, as in the code (e.g.
						// SerializeImagePulls is set in two branches).
						assigned[target] = exprString(assign.Rhs[i])
					}
				}
			}
			return true
		})
	}
	if len(assigned) < 50 {
		t.Fatalf("found only %d defaults in %s: the search is broken", len(assigned), path)
	}
	return assigned
}

// varValue is the value, as written, of a package-level constant or
// variable.
func varValue(t *testing.T, path, name string) string {
	t.Helper()
	return exprString(varExpr(t, path, name))
}

// varExpr is the value of a package-level constant or variable.
func varExpr(t *testing.T, path, name string) ast.Expr {
	t.Helper()
	for _, decl := range parseFile(t, path).Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gen.Specs {
			value, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, ident := range value.Names {
				if ident.Name == name && i < len(value.Values) {
					return value.Values[i]
				}
			}
		}
	}
	t.Fatalf("no %s in %s", name, path)
	return nil
}

// stringMapLiteral is the value of a package-level map[string]string
// variable written as a literal.
func stringMapLiteral(t *testing.T, path, name string) map[string]string {
	t.Helper()
	literal, ok := varExpr(t, path, name).(*ast.CompositeLit)
	if !ok {
		t.Fatalf("%s in %s is not a literal", name, path)
	}
	values := map[string]string{}
	for _, element := range literal.Elts {
		kv, ok := element.(*ast.KeyValueExpr)
		if !ok {
			t.Fatalf("%s in %s: %s is not key: value", name, path, exprString(element))
		}
		key, keyErr := strconv.Unquote(exprString(kv.Key))
		value, valueErr := strconv.Unquote(exprString(kv.Value))
		if keyErr != nil || valueErr != nil {
			t.Fatalf("%s in %s: %s is not a pair of strings", name, path, exprString(element))
		}
		values[key] = value
	}
	return values
}

func parseFile(t *testing.T, path string) *ast.File {
	t.Helper()
	file, err := parser.ParseFile(sourceFiles, path, readFile(t, path), parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return file
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sourceFiles is the file set of every file the tests parse, so that
// expressions print as written.
var sourceFiles = token.NewFileSet()

// exprString prints an expression of a parsed file as gofmt would.
func exprString(expr ast.Node) string {
	var out bytes.Buffer
	if err := printer.Fprint(&out, sourceFiles, expr); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return out.String()
}

// TestDefaulted fills in what the kubelet defaults, leaves what is set, and
// does not touch its input.
func TestDefaulted(t *testing.T) {
	d := Defaulted(nil)
	if d.CPUManagerPolicy != "none" || d.MaxPods != 110 || d.CgroupDriver != "cgroupfs" || !*d.CgroupsPerQOS ||
		len(d.EvictionHard) != len(defaultEvictionHard) || len(d.EnforceNodeAllocatable) != 1 {
		t.Errorf("Defaulted(nil) = %+v", d)
	}
	in, err := DecodeLenient([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 20\nevictionHard:\n  memory.available: 1Gi\nmergeDefaultEvictionSettings: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	d = Defaulted(in)
	if d.MaxPods != 20 || d.EvictionHard["memory.available"] != "1Gi" || len(d.EvictionHard) != len(defaultEvictionHard) {
		t.Errorf("Defaulted = maxPods %d, evictionHard %v", d.MaxPods, d.EvictionHard)
	}
	if len(in.EvictionHard) != 1 || in.CPUManagerPolicy != "" {
		t.Errorf("Defaulted changed its input: %+v", in)
	}
}
