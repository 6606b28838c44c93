package policy

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/util"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// paths lists what a projection keeps, as dotted paths ending in "*".
func (p *projection) paths(prefix string) []string {
	if p == nil {
		return nil
	}
	if p.all {
		return []string{prefix + "*"}
	}
	var out []string
	for _, k := range sortedKeys(p.children) {
		out = append(out, p.children[k].paths(prefix+k+".")...)
	}
	return out
}

func TestInputProjection(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   []string
	}{
		{
			name:   "constant paths",
			policy: `deny contains "x" if input.request.object.metadata.labels.a == input.request.oldObject.metadata.name`,
			want:   []string{"request.object.metadata.labels.a.*", "request.oldObject.metadata.name.*"},
		},
		{
			name:   "variable key keeps the subtree",
			policy: `deny contains k if input.request.object.metadata.labels[k] == "x"`,
			want:   []string{"request.object.metadata.labels.*"},
		},
		{
			name:   "variable in the middle",
			policy: `deny contains k if input.request.object[k].name == "x"`,
			want:   []string{"request.object.*"},
		},
		{
			name: "whole object to a function",
			policy: `f(o) := o.status

deny contains "x" if f(input.request.object)`,
			want: []string{"request.object.*"},
		},
		{
			name:   "whole input",
			policy: `deny contains "x" if count(input) > 5`,
			want:   []string{"*"},
		},
		{
			name: "aliased by import",
			policy: `import input.request.object as obj

deny contains "x" if obj.spec.unschedulable`,
			want: []string{"request.object.spec.unschedulable.*"},
		},
		{
			name: "assigned to a variable",
			policy: `deny contains "x" if {
	obj := input.request.object
	obj.status.phase == "x"
}`,
			want: []string{"request.object.*"},
		},
		{
			name:   "input inside a key",
			policy: `deny contains "x" if data.nodeguard.config.m[input.request.name] == input.nodeguard.node`,
			want:   []string{"nodeguard.node.*", "request.name.*"},
		},
		{
			name:   "no input at all",
			policy: `deny contains "x"`,
			want:   nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, map[string]string{"p.rego": "package nodeguard.admission\n\n" + tt.policy + "\n"}, Options{})
			set := e.active.Load()
			if set == nil {
				t.Fatalf("policy does not load: %v", e.LoadError())
			}
			if got := set.projection.paths(""); !slices.Equal(got, tt.want) {
				t.Errorf("projection = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestShippedProjectionLeavesStatusOut(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := e.active.Load().projection
	for _, path := range p.paths("") {
		if strings.Contains(path, ".status") || strings.HasPrefix(path, "request.object.*") || path == "*" {
			t.Errorf("the shipped policies keep %s; a Node status update would be decoded in full", path)
		}
	}
}

func TestProjectJSON(t *testing.T) {
	p := &projection{}
	p.add([]string{"metadata", "labels"})
	p.add([]string{"metadata", "name"})
	p.add([]string{"spec"})
	raw := []byte(`{"apiVersion":"v1","metadata":{"name":"n","labels":{"a":"1"},"managedFields":[{"x":1}],"name":"last"},"spec":{"n":1.5},"status":{"images":[1,2,3]}}`)
	got, err := projectJSON(raw, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"name": "last", "labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"n": jsonNumber("1.5")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("projectJSON = %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{`{"metadata": {"name": tru}}`, `{"metadata":`, `[`} {
		if _, err := projectJSON([]byte(bad), p, 0); err == nil {
			t.Errorf("projectJSON(%s) succeeded", bad)
		}
	}
	if got, err := projectJSON([]byte(`{not json`), nil, 0); got != nil || err != nil {
		t.Errorf("nothing kept: %v, %v; want nil, nil", got, err)
	}
}

// TestProjectionIsInvisible evaluates the shipped policies on whole and on
// projected inputs: the answers must not differ.
func TestProjectionIsInvisible(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := e.active.Load()
	assign := func(v string) map[string]string { return map[string]string{"nodeguard.dev/config-source": v} }
	pool := map[string]string{"nodeguard.dev/pool": "gpu"}
	const anonymous = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  anonymous:\n    enabled: true\nfailSwapOn: false\n"
	inputs := []*AdmissionInput{
		nodeWrite(t, "node-1", pool, assign("default/kubelet-cpu"), &corev1.Node{}),
		nodeWrite(t, "node-1", pool, assign("kube-system/kubelet-gpu"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: pool}}),
		nodeWrite(t, "node-1", nil, nil, nil),
		configMapWrite(t, admissionv1.Update, "default", "kubelet-gpu", nil, anonymous),
		configMapWrite(t, admissionv1.Create, "kube-system", "kubelet-gpu", map[string]string{"nodeguard.dev/allow-dangerous-fields": "true"}, anonymous),
	}
	for i, in := range inputs {
		projected, err := in.value(set.projection, nil)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := in.Value()
		if err != nil {
			t.Fatal(err)
		}
		a := evalBindings(t, set, projected)
		b := evalBindings(t, set, whole)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("input %d: projected %v, whole %v", i, a, b)
		}
		if len(a["deny"].([]any))+len(a["warn"].([]any)) == 0 && i != 1 && i != 2 {
			t.Errorf("input %d decides nothing, so it proves nothing", i)
		}
	}
}

func evalBindings(t *testing.T, set *preparedSet, input ast.Value) rego.Vars {
	t.Helper()
	rs, err := set.admission.Eval(context.Background(), rego.EvalParsedInput(input))
	if err != nil || len(rs) != 1 {
		t.Fatalf("eval: %v, %d results", err, len(rs))
	}
	return rs[0].Bindings
}

func jsonNumber(s string) any {
	var x any
	if err := util.UnmarshalJSON([]byte(s), &x); err != nil {
		panic(err)
	}
	return x
}

// TestProjectionStopsEarlyOnlyWhenExact: the walk stops once every kept
// member is found, unless the rest could repeat one, which encoding/json
// would let overwrite the first.
func TestProjectionStopsEarlyOnlyWhenExact(t *testing.T) {
	p := &projection{}
	p.add([]string{"metadata", "name"})
	for _, tc := range []struct{ raw, want string }{
		{`{"metadata":{"name":"a"},"status":{"images":["x"]}}`, "a"},
		{`{"metadata":{"name":"a"},"status":{},"metadata":{"name":"b"}}`, "b"},
		{`{"metadata":{"name":"a"},"status":{},"\u006detadata":{"name":"c"}}`, "c"},
		{`{"metadata":{"name":"a","uid":"u","name":"d"},"status":{}}`, "d"},
		{`{"metadata":{"name":"a"},"status":{"metadata":{"name":"nested"}}}`, "a"},
	} {
		got, err := projectJSON([]byte(tc.raw), p, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		name := got.(map[string]any)["metadata"].(map[string]any)["name"]
		var decoded struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(tc.raw), &decoded); err != nil {
			t.Fatal(err)
		}
		if name != tc.want || name != decoded.Metadata.Name {
			t.Errorf("%s: name %v, want %s (encoding/json: %s)", tc.raw, name, tc.want, decoded.Metadata.Name)
		}
	}
}

// TestProjectionTrustsUniqueLevels: where the reader of the review made
// sure no key repeats (ObjectKeysUnique), the walk stops at the first
// occurrence without searching the rest; below those levels it still
// searches. The inputs here break that promise on purpose, to show which
// levels are trusted.
func TestProjectionTrustsUniqueLevels(t *testing.T) {
	p := &projection{}
	p.add([]string{"metadata", "labels", "pool"})
	for _, tc := range []struct {
		raw     string
		trusted int
		want    string
	}{
		{`{"metadata":{"labels":{"pool":"a"}},"metadata":{"labels":{"pool":"b"}}}`, 0, "b"},
		{`{"metadata":{"labels":{"pool":"a"}},"metadata":{"labels":{"pool":"b"}}}`, 1, "a"},
		{`{"metadata":{"labels":{"pool":"a"},"labels":{"pool":"b"}}}`, 1, "b"},
		{`{"metadata":{"labels":{"pool":"a"},"labels":{"pool":"b"}}}`, 2, "a"},
		{`{"metadata":{"labels":{"pool":"a","pool":"b"}}}`, 2, "b"},
		{`{"metadata":{"labels":{"pool":"a","pool":"b"}}}`, 3, "a"},
	} {
		got, err := projectJSON([]byte(tc.raw), p, tc.trusted)
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		pool := got.(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["pool"]
		if pool != tc.want {
			t.Errorf("%s, %d levels trusted: pool %v, want %s", tc.raw, tc.trusted, pool, tc.want)
		}
	}
}
