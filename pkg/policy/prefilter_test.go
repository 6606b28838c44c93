package policy

import (
	"context"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// TestPrefilterIsExact compares answers with and without the prefilter for
// policies the index can and cannot decide, over a spread of reviews.
func TestPrefilterIsExact(t *testing.T) {
	policies := map[string]string{
		"shipped": "", // the embedded set
		"not indexable": `package nodeguard.authz

deny contains "odd" if count(input.spec.groups) > 1
`,
		"default allow": `package nodeguard.authz

default allow := true

allow := false if input.spec.resourceAttributes.resource == "secrets"
`,
		"set membership": `package nodeguard.authz

deny contains "verb" if input.spec.resourceAttributes.verb in {"delete", "deletecollection"}
`,
		// Label guards the prefilter reads, and forms it must not read.
		"label guard": `package nodeguard.authz

frozen_label := "example.com/frozen"

deny contains "frozen" if {
	n := nodeguard.node(input.nodeguard.node)
	n.labels[frozen_label] == "yes"
}

deny contains "pool" if {
	name := input.nodeguard.node
	info := nodeguard.node(name)
	info.labels["nodeguard.dev/maintenance"] = "true"
	input.spec.resourceAttributes.resource == "secrets"
}
`,
		"negated label": `package nodeguard.authz

deny contains "not in maintenance" if {
	input.spec.resourceAttributes.resource == "configmaps"
	n := nodeguard.node(input.nodeguard.node)
	not n.labels["nodeguard.dev/maintenance"] == "true"
}
`,
		"label in a helper": `package nodeguard.authz

frozen(name) if nodeguard.node(name).labels["nodeguard.dev/maintenance"] == "true"

deny contains "helper" if frozen(input.nodeguard.node)
`,
		"label under else": `package nodeguard.authz

verdict := "frozen" if {
	nodeguard.node(input.nodeguard.node).labels["nodeguard.dev/maintenance"] == "true"
} else := "free"

deny contains verdict
`,
		// The whole attributes object compared: the index needs its value.
		"whole object": `package nodeguard.authz

deny contains "exact" if {
	attrs := input.spec.resourceAttributes
	attrs == {"namespace": "kube-system", "verb": "get", "version": "v1", "resource": "configmaps", "name": "other"}
}
`,
		"whole object bound": `package nodeguard.authz

deny contains "bound" if {
	attrs := input.spec.resourceAttributes
	object.get(attrs, "name", "") == "other"
	attrs.verb == "get"
}
`,
	}
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{
		"node-1": nodeInfo("node-1", map[string]string{"nodeguard.dev/maintenance": "true"}, "kube-system/kubelet-gpu"),
		"node-2": nodeInfo("node-2", nil, "kube-system/kubelet-gpu"),
		"node-3": nodeInfo("node-3", map[string]string{"nodeguard.dev/maintenance": "false", "example.com/frozen": "yes"}, "kube-system/kubelet-gpu"),
	}}
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	reviews := []*authorizationv1.SubjectAccessReviewSpec{
		configMapRead("system:node:node-1", nodeGroups, "kube-system", "kubelet-gpu"),
		configMapRead("system:node:node-1", nodeGroups, "kube-system", "other"),
		configMapRead("system:node:node-2", nodeGroups, "kube-system", "kubelet-gpu"),
		configMapRead("system:node:node-3", nodeGroups, "kube-system", "kubelet-gpu"),
		configMapRead("system:node:node-9", nodeGroups, "kube-system", "kubelet-gpu"),
		{User: "system:node:node-1", Groups: nodeGroups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Verb: "get", Version: "v1", Resource: "secrets", Name: "s"}},
		{User: "system:node:node-3", Groups: nodeGroups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Verb: "get", Version: "v1", Resource: "secrets", Name: "s"}},
		configMapRead("admin", []string{"system:masters"}, "kube-system", "kubelet-gpu"),
		{User: "system:node:node-1", Groups: nodeGroups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "kube-node-lease", Verb: "update", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Name: "node-1"}},
		{User: "system:node:node-1", Groups: nodeGroups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Verb: "delete", Version: "v1", Resource: "secrets", Name: "s"}},
		{User: "system:node:node-1", Groups: nodeGroups, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}},
		{User: "system:node:node-1", Groups: []string{"system:nodes"}},
	}
	for name, policy := range policies {
		t.Run(name, func(t *testing.T) {
			var e *Engine
			if policy == "" {
				var err error
				if e, err = New(testContext(t), Options{Graph: g}); err != nil {
					t.Fatal(err)
				}
			} else {
				e, _ = newEngine(t, map[string]string{"p.rego": policy}, Options{Graph: g})
			}
			set := e.active.Load()
			for i, spec := range reviews {
				node, version := NodeOf(spec.User, spec.Groups, g)
				in := &AuthzInput{Spec: spec, Node: node, KubeletVersion: version}
				filtered, err := e.EvalAuthz(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				unfiltered := *set
				unfiltered.authzFilter = nil
				e.active.Store(&unfiltered)
				full, err := e.EvalAuthz(context.Background(), in)
				e.active.Store(set)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(filtered, full) {
					t.Errorf("review %d: with prefilter %+v, without %+v", i, filtered, full)
				}
			}
		})
	}
}

func TestPrefilterSkipsUnmatchedReviews(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGraph{}
	e, err := New(testContext(t), Options{Graph: g, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	lease := &authorizationv1.SubjectAccessReviewSpec{User: "system:node:node-1", Groups: []string{"system:nodes"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "kube-node-lease", Verb: "update",
			Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Name: "node-1"}}
	if _, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: lease, Node: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAuthz, outcomeSkipped)); got != 1 {
		t.Errorf("skipped evaluations = %v, want 1", got)
	}
	// A ConfigMap read matches maintenance_window's index entry, but its
	// guard on the node's label decides it from the graph: evaluated only
	// for a node in maintenance.
	for _, tc := range []struct {
		node    string
		labels  map[string]string
		skipped bool
	}{
		{"unknown", nil, true},
		{"node-1", nil, true},
		{"node-2", map[string]string{"nodeguard.dev/maintenance": "false"}, true},
		{"node-3", map[string]string{"nodeguard.dev/maintenance": "true"}, false},
	} {
		g.mu.Lock()
		if tc.node != "unknown" {
			if g.nodes == nil {
				g.nodes = map[string]*graph.NodeInfo{}
			}
			g.nodes[tc.node] = nodeInfo(tc.node, tc.labels, "kube-system/kubelet-gpu")
		}
		g.mu.Unlock()
		skippedBefore := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAuthz, outcomeSkipped))
		read := configMapRead("system:node:"+tc.node, []string{"system:nodes"}, "kube-system", "kubelet-gpu")
		res, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: read, Node: tc.node})
		if err != nil {
			t.Fatal(err)
		}
		skipped := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAuthz, outcomeSkipped)) > skippedBefore
		if skipped != tc.skipped {
			t.Errorf("%s %v: skipped = %v, want %v", tc.node, tc.labels, skipped, tc.skipped)
		}
		if res.Denied() == tc.skipped {
			t.Errorf("%s %v: denied = %v", tc.node, tc.labels, res.Denied())
		}
	}
	if got := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAuthz, outcomeOK)); got != 1 {
		t.Errorf("evaluations = %v, want 1 (the node in maintenance)", got)
	}
}

func TestAdmissionPrefilterIsExact(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := e.active.Load()
	const plain = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: 10255\n"
	pod := configMapRequest("CREATE", "default", "p", `{"kind":"Pod","metadata":{"name":"p"}}`)
	pod.Resource.Resource, pod.Kind.Kind = "pods", "Pod"
	inputs := []*AdmissionInput{
		configMapWrite(t, "UPDATE", "default", "kubelet-gpu", nil, plain),
		nodeWrite(t, "node-1", map[string]string{"nodeguard.dev/pool": "gpu"}, map[string]string{"nodeguard.dev/config-source": "default/x"}, nil),
		{Request: pod},
	}
	for i, in := range inputs {
		filtered, err := e.EvalAdmission(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		unfiltered := *set
		unfiltered.admissionFilter = nil
		e.active.Store(&unfiltered)
		full, err := e.EvalAdmission(context.Background(), in)
		e.active.Store(set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(filtered, full) {
			t.Errorf("input %d: with prefilter %+v, without %+v", i, filtered, full)
		}
		if i < 2 && !full.Denied() {
			t.Errorf("input %d is not denied, so it proves little", i)
		}
	}
}
