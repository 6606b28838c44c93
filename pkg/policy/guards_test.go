package policy

import (
	"io/fs"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/nodeguard/nodeguard/policies"
)

// TestStaticAnalysis checks what the prefilter reads from compiled rules:
// label guards where a failed guard proves the rule cannot match, and
// nothing where it does not; definedness-only references where the index
// cannot compare the value.
func TestStaticAnalysis(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		// guards are "<input ref> <key>=<value>" per guarded rule.
		guards      []string
		definedOnly []string
	}{
		{
			name:        "shipped maintenance window",
			policy:      "", // replaced by the shipped file below
			guards:      []string{"input.nodeguard.node nodeguard.dev/maintenance=true"},
			definedOnly: []string{"input.spec.resourceAttributes"},
		},
		{
			name: "literal key, node name through a variable",
			policy: `package nodeguard.authz

deny contains "x" if {
	name := input.nodeguard.node
	n := nodeguard.node(name)
	n.labels["a"] == "b"
}`,
			guards: []string{"input.nodeguard.node a=b"},
			// The node's name only feeds nodeguard.node, which the index does not read.
			definedOnly: []string{"input.nodeguard.node"},
		},
		{
			name: "negated comparison is no guard",
			policy: `package nodeguard.authz

deny contains "x" if {
	n := nodeguard.node(input.nodeguard.node)
	not n.labels["a"] == "b"
}`,
			// The node's name only feeds nodeguard.node, which the index does not read.
			definedOnly: []string{"input.nodeguard.node"},
		},
		{
			name: "computed key is no guard",
			policy: `package nodeguard.authz

deny contains "x" if {
	n := nodeguard.node(input.nodeguard.node)
	n.labels[input.spec.user] == "b"
}`,
			// The node's name only feeds nodeguard.node, which the index does not read.
			definedOnly: []string{"input.nodeguard.node"},
		},
		{
			name: "key from a rule that is not a constant is no guard",
			policy: `package nodeguard.authz

key := input.spec.user

deny contains "x" if {
	n := nodeguard.node(input.nodeguard.node)
	n.labels[key] == "b"
}`,
			// The node's name only feeds nodeguard.node, which the index does not read.
			definedOnly: []string{"input.nodeguard.node"},
		},
		{
			name: "node named by something else than input is no guard",
			policy: `package nodeguard.authz

deny contains "x" if {
	n := nodeguard.node("node-1")
	n.labels["a"] == "b"
}`,
		},
		{
			name: "object compared whole needs its value",
			policy: `package nodeguard.authz

deny contains "x" if {
	attrs := input.spec.resourceAttributes
	attrs == {"verb": "get"}
}`,
		},
		{
			name: "object read by field and by object.get needs only definedness",
			policy: `package nodeguard.authz

deny contains "x" if {
	attrs := input.spec.resourceAttributes
	attrs.verb == "get"
	object.get(attrs, "name", "") == "n"
}`,
			definedOnly: []string{"input.spec.resourceAttributes"},
		},
		{
			name: "object also used directly needs its value",
			policy: `package nodeguard.authz

deny contains "x" if {
	attrs := input.spec.resourceAttributes
	input.spec.resourceAttributes == {"verb": "get"}
	attrs.verb == "get"
}`,
		},
		{
			name: "object used as a key needs its value",
			policy: `package nodeguard.authz

deny contains "x" if {
	attrs := input.spec.resourceAttributes
	data.table[attrs]
}`,
		},
	}
	shipped, err := readShipped("maintenance_window.rego")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.policy
			if src == "" {
				src = shipped
			}
			mod, err := ast.ParseModuleWithOpts("p.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatal(err)
			}
			c := ast.NewCompiler().WithCapabilities(Capabilities()).WithDefaultRegoVersion(ast.RegoV1)
			if c.Compile(map[string]*ast.Module{"p.rego": mod}); c.Failed() {
				t.Fatal(c.Errors)
			}
			rules := c.GetRulesWithPrefix(authzDenyRef)
			var guards []string
			for _, gs := range ruleGuards(c, rules) {
				for _, g := range gs {
					guards = append(guards, g.nodeName.String()+" "+g.key+"="+g.value)
				}
			}
			slices.Sort(guards)
			if !slices.Equal(guards, tt.guards) {
				t.Errorf("guards = %q, want %q", guards, tt.guards)
			}
			var defined []string
			for _, r := range definednessOnly(rules) {
				defined = append(defined, r.String())
			}
			if !slices.Equal(defined, tt.definedOnly) {
				t.Errorf("definedness-only references = %q, want %q", defined, tt.definedOnly)
			}
		})
	}
}

// readShipped reads one of the shipped policy files.
func readShipped(name string) (string, error) {
	src, err := fs.ReadFile(policies.FS(), name)
	return string(src), err
}
