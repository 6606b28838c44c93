package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// graphPolicy reports what the built-ins answer, as deny messages, for the
// node, kind, namespace and name the test puts into the spec.
const graphPolicy = `package nodeguard.authz

attrs := input.spec.resourceAttributes

deny contains sprintf("reachable=%v", [r]) if {
	r := nodeguard.reachable(input.nodeguard.node, object.get(input.spec, "uid", "configmap"), attrs.namespace, attrs.name)
}

deny contains sprintf("node=%s", [json.marshal(n)]) if {
	n := nodeguard.node(input.nodeguard.node)
}

deny contains "no-node" if {
	not nodeguard.node(input.nodeguard.node)
}

# Two calls with the same arguments in one evaluation see one answer.
deny contains "twice" if {
	a := nodeguard.reachable(input.nodeguard.node, "configmap", attrs.namespace, attrs.name)
	b := nodeguard.reachable(input.nodeguard.node, "configmap", attrs.namespace, attrs.name)
	a == b
}
`

func graphAnswers(t *testing.T, e *Engine, node, kind, namespace, name string) []string {
	t.Helper()
	spec := configMapRead("system:node:"+node, []string{"system:nodes"}, namespace, name)
	spec.UID = kind // the policy reads the kind from here
	res, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: spec, Node: node})
	if err != nil {
		t.Fatalf("EvalAuthz: %v", err)
	}
	var got []string
	for _, v := range res.Deny {
		got = append(got, v.Message)
	}
	return got
}

func TestBuiltinsReadTheGraph(t *testing.T) {
	g := &fakeGraph{
		nodes: map[string]*graph.NodeInfo{
			"node-1": nodeInfo("node-1", map[string]string{"pool": "gpu"}, "kube-system/kubelet-gpu"),
			"node-2": nodeInfo("node-2", nil, ""),
		},
		reach: map[string]bool{"node-1/kube-system/kubelet-gpu": true},
	}
	e, _ := newEngine(t, map[string]string{"p.rego": graphPolicy}, Options{Graph: g})
	tests := []struct {
		name                  string
		node, kind, namespace string
		cmName                string
		want                  string
	}{
		{
			name: "assigned and reachable", node: "node-1", kind: "configmap", namespace: "kube-system", cmName: "kubelet-gpu",
			want: `node={"assignment":"kube-system/kubelet-gpu","kubeletVersion":"v1.37.2","labels":{"pool":"gpu"},"name":"node-1"}|reachable=true|twice`,
		},
		{
			name: "not reachable", node: "node-1", kind: "configmap", namespace: "kube-system", cmName: "other",
			want: `node={"assignment":"kube-system/kubelet-gpu","kubeletVersion":"v1.37.2","labels":{"pool":"gpu"},"name":"node-1"}|reachable=false|twice`,
		},
		{
			name: "node without labels or assignment", node: "node-2", kind: "configmap", namespace: "kube-system", cmName: "kubelet-gpu",
			want: `node={"assignment":null,"kubeletVersion":"v1.37.2","labels":{},"name":"node-2"}|reachable=false|twice`,
		},
		{
			name: "unknown node is undefined", node: "node-3", kind: "configmap", namespace: "kube-system", cmName: "kubelet-gpu",
			want: `no-node|reachable=false|twice`,
		},
		{
			// A kind only known at run time cannot be checked at load: the
			// call is undefined, as any failing built-in is.
			name: "unsupported kind at run time", node: "node-1", kind: "secret", namespace: "kube-system", cmName: "kubelet-gpu",
			want: `node={"assignment":"kube-system/kubelet-gpu","kubeletVersion":"v1.37.2","labels":{"pool":"gpu"},"name":"node-1"}|twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(graphAnswers(t, e, tt.node, tt.kind, tt.namespace, tt.cmName), "|")
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestBuiltinsAreMemoised checks that one evaluation asks the graph once
// per distinct call, so a policy cannot see the graph change mid-decision.
func TestBuiltinsAreMemoised(t *testing.T) {
	g := &fakeGraph{reach: map[string]bool{}}
	policy := `package nodeguard.authz

deny contains "x" if {
	nodeguard.reachable("n", "configmap", "ns", "a")
}

deny contains "y" if {
	not nodeguard.reachable("n", "configmap", "ns", "a")
}

deny contains "z" if {
	not nodeguard.reachable("n", "configmap", "ns", "a")
	not nodeguard.node("n")
	not nodeguard.node("n")
}
`
	e, _ := newEngine(t, map[string]string{"p.rego": policy}, Options{Graph: g})
	before := g.callCount()
	if _, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("u", nil, "ns", "a")}); err != nil {
		t.Fatal(err)
	}
	if calls := g.callCount() - before; calls != 2 {
		t.Errorf("graph was asked %d times, want 2 (one per distinct call)", calls)
	}
}

func TestBuiltinsSurviveAPanickingGraph(t *testing.T) {
	g := &fakeGraph{panics: true}
	e, _ := newEngine(t, map[string]string{"p.rego": graphPolicy}, Options{Graph: g})
	got := strings.Join(graphAnswers(t, e, "node-1", "configmap", "ns", "name"), "|")
	// Both calls are undefined; the evaluation itself goes on.
	if got != "no-node" {
		t.Errorf("answers with a panicking graph = %s, want no-node", got)
	}
}

func TestBuiltinsWithoutAGraph(t *testing.T) {
	e, _ := newEngine(t, map[string]string{"p.rego": graphPolicy}, Options{})
	got := strings.Join(graphAnswers(t, e, "node-1", "configmap", "ns", "name"), "|")
	if got != "no-node|reachable=false|twice" {
		t.Errorf("answers without a graph = %s", got)
	}
}

// TestNodeTypeIsClosed checks that the declared type catches a misspelt
// field at load time, rather than leaving it undefined at run time.
func TestNodeTypeIsClosed(t *testing.T) {
	policy := `package nodeguard.authz

deny contains "x" if {
	nodeguard.node("n").lables.x == "y"
}
`
	e, _ := newEngine(t, map[string]string{"p.rego": policy}, Options{})
	var loadErr *LoadError
	if !errors.As(e.LoadError(), &loadErr) || !strings.Contains(loadErr.Error(), "rego_type_error") {
		t.Errorf("misspelt field: %v, want a type error", e.LoadError())
	}
}

// TestNodeValueMatchesDeclaredType keeps NodeValue's keys and the closed
// object type the compiler checks policies against in step.
func TestNodeValueMatchesDeclaredType(t *testing.T) {
	var declared []string
	for _, p := range nodeObjectType.StaticProperties() {
		declared = append(declared, p.Key.(string))
	}
	slices.Sort(declared)
	for _, info := range []*graph.NodeInfo{
		nodeInfo("n", map[string]string{"a": "b"}, "ns/name"),
		nodeInfo("n", nil, ""),
	} {
		obj, ok := NodeValue(info).(ast.Object)
		if !ok {
			t.Fatalf("NodeValue is not an object")
		}
		var keys []string
		for _, k := range obj.Keys() {
			keys = append(keys, string(k.Value.(ast.String)))
		}
		slices.Sort(keys)
		if !slices.Equal(keys, declared) {
			t.Errorf("NodeValue keys %v, declared %v", keys, declared)
		}
	}
	if nodeObjectType.DynamicProperties() != nil {
		t.Error("the node type accepts any key, so misspelt fields go unnoticed")
	}
}

func TestCapabilities(t *testing.T) {
	caps := Capabilities()
	for _, name := range []string{BuiltinReachable, BuiltinNode, "sprintf", "object.get"} {
		if !caps.ContainsBuiltin(name) {
			t.Errorf("capabilities lack %s", name)
		}
	}
	for _, name := range deniedBuiltins {
		if caps.ContainsBuiltin(name) {
			t.Errorf("capabilities contain %s", name)
		}
	}
}
