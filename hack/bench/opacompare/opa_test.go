package opacompare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestBuiltinCallRewrite(t *testing.T) {
	for in, want := range map[string]string{
		`node := nodeguard.node(input.nodeguard.node)`:            `node := data.nodeguard_shim.node(input.nodeguard.node)`,
		`nodeguard.reachable(n, "configmap", ns, name)`:           `data.nodeguard_shim.reachable(n, "configmap", ns, name)`,
		`x := input.nodeguard.node`:                               `x := input.nodeguard.node`,
		`y := data.nodeguard.node(1)`:                             `y := data.nodeguard.node(1)`,
		"\tnodeguard.node(a).labels[k] == v; mynodeguard.node(b)": "\tdata.nodeguard_shim.node(a).labels[k] == v; mynodeguard.node(b)",
	} {
		if got := builtinCall.ReplaceAllString(in, "${1}data.nodeguard_shim.${2}("); got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
}

// TestWritePolicies checks that the stock server's policy directory
// compiles without nodeguard's built-ins, as `opa run` compiles it.
func TestWritePolicies(t *testing.T) {
	dir := t.TempDir()
	if err := writePolicies(dir, &GraphFacts{}); err != nil {
		t.Fatal(err)
	}
	modules := map[string]*ast.Module{}
	entries, err := os.ReadDir(filepath.Join(dir, "policies"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".rego") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, "policies", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "nodeguard.node(") && !strings.Contains(string(src), "nodeguard_shim.node(") {
			t.Errorf("%s still calls nodeguard's built-in", e.Name())
		}
		m, err := ast.ParseModuleWithOpts(e.Name(), string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		modules[e.Name()] = m
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(modules); c.Failed() {
		t.Fatalf("the stock server's policies do not compile: %v", c.Errors)
	}
}
