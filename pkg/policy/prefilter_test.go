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
	}
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{
		"node-1": nodeInfo("node-1", map[string]string{"nodeguard.dev/maintenance": "true"}, "kube-system/kubelet-gpu"),
	}}
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	reviews := []*authorizationv1.SubjectAccessReviewSpec{
		configMapRead("system:node:node-1", nodeGroups, "kube-system", "kubelet-gpu"),
		configMapRead("system:node:node-1", nodeGroups, "kube-system", "other"),
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
	read := configMapRead("system:node:node-1", []string{"system:nodes"}, "kube-system", "kubelet-gpu")
	if _, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: read, Node: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(metrics.evaluations.WithLabelValues(PackageAuthz, outcomeOK)); got != 1 {
		t.Errorf("evaluations = %v, want 1 for the ConfigMap read", got)
	}
	if g.callCount() != 1 {
		t.Errorf("graph calls = %d, want 1 (only the ConfigMap read reaches nodeguard.node)", g.callCount())
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
