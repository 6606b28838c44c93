package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// TestVerdictMemo checks when an admission verdict is remembered, and that
// a remembered verdict is the one an evaluation gives.
func TestVerdictMemo(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{"node-1": nodeInfo("node-1", map[string]string{"frozen": "false"}, "")}}
	e, _ := newEngine(t, map[string]string{"p.rego": `package nodeguard.admission

deny contains "namespace" if {
	input.request.resource.resource == "configmaps"
	input.request.namespace == "forbidden"
}

deny contains "pool" if {
	input.request.resource.resource == "nodes"
	input.request.object.metadata.labels.pool == "forbidden"
}

deny contains "frozen" if {
	input.request.resource.resource == "nodes"
	input.request.object.metadata.labels.pool == "graph"
	nodeguard.node(input.nodeguard.node).labels.frozen == "true"
}
`}, Options{Graph: g, Metrics: metrics})
	count := func(outcome string) float64 {
		return testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAdmission, outcome))
	}
	eval := func(in *AdmissionInput) AdmissionResult {
		t.Helper()
		res, err := e.EvalAdmission(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	remembers := func() int { return e.active.Load().admissionMemo.verdicts.Len() }

	// A kubelet's status update: the stream that repeats.
	statusUpdate := func(uid, object string) *AdmissionInput {
		req := configMapRequest("UPDATE", "", "node-1", object)
		req.UID, req.Resource.Resource, req.Kind.Kind, req.SubResource = types.UID(uid), "nodes", "Node", "status"
		return &AdmissionInput{Request: req, Node: "node-1"}
	}
	forbidden := statusUpdate("uid-1", `{"metadata":{"name":"node-1","labels":{"pool":"forbidden"}}}`)
	first := eval(forbidden)
	if !first.Denied() || count(outcomeOK) != 1 || count(outcomeRemembered) != 0 || remembers() != 0 {
		t.Fatalf("first evaluation: %+v, evaluated %v, remembered %v, memo %d", first, count(outcomeOK), count(outcomeRemembered), remembers())
	}
	// The same review with another uid, and an object differing in what no
	// policy reads, project alike: the second sighting is evaluated and
	// remembered, the third answered from the memo.
	again := statusUpdate("uid-2", `{"metadata":{"name":"node-1","resourceVersion":"7","labels":{"pool":"forbidden"}},"status":{"images":[]}}`)
	if res := eval(again); !reflect.DeepEqual(res, first) || count(outcomeOK) != 2 || remembers() != 1 {
		t.Errorf("second sighting: %+v (want %+v), evaluated %v, memo %d", res, first, count(outcomeOK), remembers())
	}
	if res := eval(again); !reflect.DeepEqual(res, first) || count(outcomeRemembered) != 1 {
		t.Errorf("same projected input: %+v (want %+v), remembered %v", res, first, count(outcomeRemembered))
	}
	// A remembered verdict is the caller's own to change.
	res := eval(again)
	res.Deny[0].Message = "changed"
	if res := eval(again); res.Deny[0].Message != "pool" {
		t.Errorf("a caller's change reached the memo: %+v", res)
	}
	remembered := count(outcomeRemembered)
	// A field policies read differs: not remembered.
	if res := eval(statusUpdate("uid-3", `{"metadata":{"name":"node-1","labels":{"pool":"fine"}}}`)); res.Denied() || count(outcomeRemembered) != remembered {
		t.Errorf("another pool: %+v, remembered %v", res, count(outcomeRemembered))
	}
	// An input no rule can match is skipped by the prefilter, and the skip
	// is remembered like a verdict.
	fine := statusUpdate("uid-5", `{"metadata":{"name":"node-1","labels":{"pool":"other"}}}`)
	skipped := count(outcomeSkipped)
	for range 2 {
		if res := eval(fine); res.Denied() || len(res.Warn) > 0 {
			t.Fatalf("another pool: %+v", res)
		}
	}
	if res := eval(fine); res.Denied() || count(outcomeSkipped) != skipped+2 || count(outcomeRemembered) != remembered+1 {
		t.Errorf("a skipped input seen three times: %+v, skipped %v times, remembered %v (want 2, 1)",
			res, count(outcomeSkipped)-skipped, count(outcomeRemembered)-remembered)
	}
	remembered = count(outcomeRemembered)
	// Any kind of review that comes back is remembered (a GitOps dry run
	// of an unchanged ConfigMap); one seen once never fills the memo.
	before := remembers()
	for i := range 100 {
		eval(&AdmissionInput{Request: configMapRequest("CREATE", fmt.Sprintf("ns-%d", i), "a", `{"metadata":{"name":"a"}}`)})
	}
	if remembers() != before {
		t.Errorf("100 reviews seen once grew the memo by %d", remembers()-before)
	}
	edit := &AdmissionInput{Request: configMapRequest("CREATE", "forbidden", "a", `{"metadata":{"name":"a"}}`)}
	if !eval(edit).Denied() || !eval(edit).Denied() || !eval(edit).Denied() || count(outcomeRemembered) != remembered+1 {
		t.Errorf("a repeated ConfigMap edit: remembered %v times, want 1", count(outcomeRemembered)-remembered)
	}

	// A verdict that read the graph is never remembered: it follows the
	// graph. The same goes for the prefilter's skip when it rested on the
	// graph (the "frozen" rule's label guard).
	in := statusUpdate("uid-4", `{"metadata":{"name":"node-1","labels":{"pool":"graph"}}}`)
	remembered = count(outcomeRemembered)
	if eval(in).Denied() || eval(in).Denied() || eval(in).Denied() {
		t.Fatal("denied before the label was set")
	}
	g.mu.Lock()
	g.nodes["node-1"] = nodeInfo("node-1", map[string]string{"frozen": "true"}, "")
	g.mu.Unlock()
	if !eval(in).Denied() {
		t.Error("a verdict that read the graph was remembered past a graph change")
	}
	if count(outcomeRemembered) != remembered {
		t.Errorf("remembered %v verdicts that read the graph", count(outcomeRemembered)-remembered)
	}
}

func TestEncodeDoc(t *testing.T) {
	docs := []any{
		nil, true, false, "", "a", json.Number("1"), []string{"a"}, []string{}, []any{"b"}, []any{[]any{}}, map[string]any{},
		map[string]any{"a": "b"}, map[string]any{"a": []any{"b"}}, map[string]any{"ab": ""}, map[string]any{"a": "b", "c": nil},
		map[string]any{"a": "bc"}, map[string]any{"ab": "c"}, []any{"a", "b"}, []any{"ab"}, []string{"b", "a"}, []string{"ba"},
		&configDoc{id: 1}, &configDoc{id: 2},
	}
	// The user's groups are a []string, a decoded array a []any: the same
	// value to a policy, and to the memo.
	if s, _ := encodeDoc(nil, []string{"a", "b"}); !bytes.Equal(s, must(encodeDoc(nil, []any{"a", "b"}))) {
		t.Error("a list of strings encodes unlike the same array decoded from JSON")
	}
	for i, a := range docs {
		ea, ok := encodeDoc(nil, a)
		if !ok {
			t.Fatalf("doc %d not encodable", i)
		}
		// Map order varies from walk to walk; the encoding must not.
		for range 10 {
			if again, _ := encodeDoc(nil, a); !bytes.Equal(again, ea) {
				t.Fatalf("doc %d encodes differently on another walk", i)
			}
		}
		for j, b := range docs {
			if eb, _ := encodeDoc(nil, b); i != j && bytes.Equal(ea, eb) {
				t.Errorf("docs %d (%#v) and %d (%#v) encode alike", i, a, j, b)
			}
		}
	}
	big := map[string]any{}
	for i := range 40 {
		big[fmt.Sprint("key-", i)] = i%2 == 0
	}
	first, _ := encodeDoc(nil, big)
	for range 10 {
		if again, _ := encodeDoc(nil, big); !bytes.Equal(again, first) {
			t.Fatal("an object past the stack's sorting buffer encodes differently on another walk")
		}
	}
	if _, ok := encodeDoc(nil, map[string]any{"a": 1.5}); ok {
		t.Error("a type the renderers never produce was encoded")
	}
}

func must(b []byte, ok bool) []byte {
	if !ok {
		panic("not encodable")
	}
	return b
}

// BenchmarkVerdictMemo: a kubelet's Node status update judged by the
// shipped policies, with its verdict remembered from an earlier identical
// projection, and evaluated every time (the memo off), which is what the
// first update of each node costs.
func BenchmarkVerdictMemo(b *testing.B) {
	e, err := New(context.Background(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	in := nodeWrite(t, "node-1", map[string]string{"nodeguard.dev/pool": "gpu"},
		map[string]string{"nodeguard.dev/config-source": "kubelet-configs/kubelet-gpu"}, nil)
	in.Request.OldObject = in.Request.Object
	set := e.active.Load()
	for _, bc := range []struct {
		name string
		memo *verdictMemo
	}{{"remembered", set.admissionMemo}, {"evaluated", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			variant := *set
			variant.admissionMemo = bc.memo
			e.active.Store(&variant)
			defer e.active.Store(set)
			b.ReportAllocs()
			for b.Loop() {
				if res, err := e.EvalAdmission(context.Background(), in); err != nil || res.Denied() {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// TestVerdictOnAnAbsentNodeIsNotRemembered: nodeguard.node is undefined
// for a node the graph does not know, and OPA records a call only when it
// has a value; the verdict still depended on the graph.
func TestVerdictOnAnAbsentNodeIsNotRemembered(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{}}
	e, _ := newEngine(t, map[string]string{"p.rego": `package nodeguard.admission

deny contains "unknown node" if {
	input.request.resource.resource == "nodes"
	not nodeguard.node(input.nodeguard.node)
}
`}, Options{Graph: g, Metrics: metrics})
	update := func(uid string) *AdmissionInput {
		req := configMapRequest("UPDATE", "", "node-1", `{"metadata":{"name":"node-1"}}`)
		req.UID, req.Resource.Resource, req.Kind.Kind, req.SubResource = types.UID(uid), "nodes", "Node", "status"
		return &AdmissionInput{Request: req, Node: "node-1"}
	}
	if res, err := e.EvalAdmission(context.Background(), update("uid-1")); err != nil || !res.Denied() {
		t.Fatalf("while the node is unknown: %+v, %v; want denied", res, err)
	}
	g.mu.Lock()
	g.nodes["node-1"] = nodeInfo("node-1", nil, "")
	g.mu.Unlock()
	if res, err := e.EvalAdmission(context.Background(), update("uid-2")); err != nil || res.Denied() {
		t.Fatalf("once the node is known: %+v, %v; the verdict on the absent node was remembered", res, err)
	}
	if n := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAdmission, outcomeRemembered)); n != 0 {
		t.Fatalf("%v verdicts remembered", n)
	}
}

// TestVerdictMemoWhenNothingReadsTheRequest: a set whose rules read
// nothing of input.request renders none of it, so that reviews differing
// there (every review's uid) share a verdict.
func TestVerdictMemoWhenNothingReadsTheRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, map[string]string{"p.rego": `package nodeguard.admission

deny contains "node-9 may not write" if input.nodeguard.node == "node-9"
`}, Options{Graph: &fakeGraph{}, Metrics: metrics})
	for i := range 3 {
		req := configMapRequest("UPDATE", "ns", "a", fmt.Sprintf(`{"metadata":{"name":"a","resourceVersion":"%d"}}`, i))
		req.UID = types.UID(fmt.Sprintf("uid-%d", i))
		res, err := e.EvalAdmission(context.Background(), &AdmissionInput{Request: req, Node: "node-9"})
		if err != nil || !res.Denied() {
			t.Fatalf("review %d: %+v, %v", i, res, err)
		}
	}
	if got := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAdmission, outcomeRemembered)); got != 1 {
		t.Errorf("remembered %v verdicts of three reviews alike but for their uid, want 1", got)
	}
}
