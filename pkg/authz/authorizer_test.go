package authz

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
)

func TestAuthorize(t *testing.T) {
	minVersion := version.MustParseGeneric("1.35.0")
	tests := []struct {
		name   string
		synced bool
		min    *version.Version
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   Decision
		reason string
	}{
		// Who is a node.
		{"admin is not a node", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"node user outside system:nodes is not a node", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "system:node:n1", ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"system:nodes member without a node name gets nothing", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "bob", Groups: reviewtest.NodeGroups, ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"empty node name gets nothing", true, nil, reviewtest.NodeSpec("", reviewtest.ConfigMapRead("get", "ns", "assigned")), NoOpinion, ReasonUnknownNode},
		{"non-node answered even before sync", false, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},

		// Assigned ConfigMaps.
		{"get assigned", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"list assigned by name", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("list", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"watch assigned by name", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("watch", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"list without a name", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("list", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"watch without a name", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("watch", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"another node's ConfigMap", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "other")), NoOpinion, ReasonNoPath},
		{"assigned name in another namespace", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "other", "assigned")), NoOpinion, ReasonNoPath},
		{"unassigned ConfigMap", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "nobody")), NoOpinion, ReasonNoPath},
		{"own annotation pointing at an ineligible ConfigMap", true, nil, reviewtest.NodeSpec("n4", reviewtest.ConfigMapRead("get", "ns", "ineligible")), NoOpinion, ReasonNoPath},
		{"unknown node", true, nil, reviewtest.NodeSpec("ghost", reviewtest.ConfigMapRead("get", "ns", "assigned")), NoOpinion, ReasonNoPath},
		{"never allow before sync", false, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), NoOpinion, ReasonGraphNotSynced},

		// Pod references.
		{"ConfigMap of a pod bound to the node", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "podcm")), Allow, ReasonConfigMapReadable},
		{"ConfigMap of a pod bound to another node", true, nil, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "podcm")), NoOpinion, ReasonNoPath},

		// Verbs and resources other than reads.
		{"update assigned ConfigMap", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("update", "ns", "assigned")), NoOpinion, ReasonNotConfigMapRead},
		{"delete assigned ConfigMap", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("delete", "ns", "assigned")), NoOpinion, ReasonNotConfigMapRead},
		{"ConfigMap subresource", true, nil, reviewtest.NodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Subresource: "x", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"configmaps in another group", true, nil, reviewtest.NodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Group: "example.com", Resource: "configmaps", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"secrets", true, nil, reviewtest.NodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"non-resource request", true, nil, reviewtest.NodeSpec("n1", nil), NoOpinion, ReasonNonResource},

		{"own kubelet's configz", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "configz")), Allow, ReasonOwnKubeletConfig},
		{"another node's configz", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n2", "configz")), NoOpinion, ReasonNotConfigMapRead},
		{"configz of no Node", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "", "configz")), NoOpinion, ReasonNotConfigMapRead},
		{"own configz, another verb", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("update", "n1", "configz")), NoOpinion, ReasonNotConfigMapRead},
		{"own proxy", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "proxy")), NoOpinion, ReasonNotConfigMapRead},
		{"own Node itself", true, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "")), NoOpinion, ReasonNotConfigMapRead},
		{"own configz in another group", true, nil, reviewtest.NodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Group: "example.com", Resource: "nodes", Subresource: "configz", Name: "n1"}), NoOpinion, ReasonNotConfigMapRead},
		{"own configz before sync", false, nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "configz")), NoOpinion, ReasonGraphNotSynced},
		{"nameless node's configz", true, nil, reviewtest.NodeSpec("", reviewtest.NodeAccess("get", "", "configz")), NoOpinion, ReasonUnknownNode},
		{"old kubelet denied its own configz", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("get", "n2", "configz")), Deny, ReasonKubeletTooOld},

		// Minimum kubelet version.
		{"new enough kubelet reads assigned", true, minVersion, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"old kubelet denied its assigned ConfigMap", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "other")), Deny, ReasonKubeletTooOld},
		{"old kubelet denied a Secret", true, minVersion, reviewtest.NodeSpec("n2", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"}), Deny, ReasonKubeletTooOld},
		{"old kubelet denied non-resource", true, minVersion, reviewtest.NodeSpec("n2", nil), Deny, ReasonKubeletTooOld},
		{"old kubelet may get own Node", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("get", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may update own Node", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("update", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may patch own Node status", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("patch", "n2", "status")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may not delete own Node", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("delete", "n2", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not list Nodes", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("list", "", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not get another Node", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("get", "n1", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not touch another subresource", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("get", "n2", "proxy")), Deny, ReasonKubeletTooOld},
		{"unparseable kubelet version is denied", true, minVersion, reviewtest.NodeSpec("n3", reviewtest.ConfigMapRead("get", "ns", "assigned")), Deny, ReasonKubeletUnknown},
		{"unregistered node is not version-gated", true, minVersion, reviewtest.NodeSpec("ghost", reviewtest.NodeAccess("create", "", "")), NoOpinion, ReasonNotConfigMapRead},
		{"old kubelet not judged before sync", false, minVersion, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "other")), NoOpinion, ReasonGraphNotSynced},
	}
	graphs := map[bool]*graph.Graph{true: reviewtest.Graph(true), false: reviewtest.Graph(false)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(graphs[tt.synced], tt.min)
			got := a.Authorize(tt.spec)
			if got.Decision != tt.want || got.Reason != tt.reason {
				t.Errorf("Authorize() = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestAuthorizeStaleGraph(t *testing.T) {
	minVersion := version.MustParseGeneric("1.35.0")
	tests := []struct {
		name   string
		min    *version.Version
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   Decision
		reason string
	}{
		{"assigned ConfigMap is not allowed from a stale graph", nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), NoOpinion, ReasonGraphStale},
		{"named watch is not allowed from a stale graph", nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("watch", "ns", "assigned")), NoOpinion, ReasonGraphStale},
		{"pod's ConfigMap is not allowed from a stale graph", nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "podcm")), NoOpinion, ReasonGraphStale},
		{"no path is still no opinion, with the stale reason", nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "other")), NoOpinion, ReasonGraphStale},
		{"unnamed list keeps its own reason", nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("list", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"other resources keep their reason", nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "")), NoOpinion, ReasonNotConfigMapRead},
		{"non-nodes keep their reason", nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"old kubelet is still denied", minVersion, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "other")), Deny, ReasonKubeletTooOld},
		{"old kubelet may still update its own Node", minVersion, reviewtest.NodeSpec("n2", reviewtest.NodeAccess("update", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
		{"own kubelet's configz owes nothing to the graph", nil, reviewtest.NodeSpec("n1", reviewtest.NodeAccess("get", "n1", "configz")), Allow, ReasonOwnKubeletConfig},
	}
	g := reviewtest.StaleGraph{Graph: reviewtest.Graph(true)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(g, tt.min).Authorize(tt.spec)
			if got.Decision != tt.want || got.Reason != tt.reason {
				t.Errorf("Authorize() = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
		})
	}
	// The same reviews against the same graph, fresh, are allowed: the
	// stale answer comes from staleness alone.
	if got := New(g.Graph, nil).Authorize(reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))); got.Decision != Allow {
		t.Fatalf("fresh graph: %v", got)
	}
}

func TestSetMinKubeletVersionTakesEffect(t *testing.T) {
	a := New(reviewtest.Graph(true), nil)
	spec := reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "other"))
	if got := a.Authorize(spec); got.Decision != Allow {
		t.Fatalf("without minimum: %v", got)
	}
	a.SetMinKubeletVersion(version.MustParseGeneric("1.31"))
	if got := a.Authorize(spec); got.Decision != Deny {
		t.Fatalf("with minimum: %v", got)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	a := New(reviewtest.Graph(true), version.MustParseGeneric("1.30"))
	for _, bc := range []struct {
		name string
		spec *authorizationv1.SubjectAccessReviewSpec
	}{
		{"allowed", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))},
		{"refused", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "other"))},
		{"non-node", &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "x")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(bc.spec)
			}
		})
	}
}
