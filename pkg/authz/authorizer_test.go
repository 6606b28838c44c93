package authz

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

// newGraph builds a real graph: n1 (v1.37.2) is assigned ns/assigned and
// runs a pod using ns/podcm; n2 (v1.30.0) is assigned ns/other; n3 reports
// garbage as its version; ns/ineligible is pointed at by n4 but unlabelled.
func newGraph(synced bool) *graph.Graph {
	g := graph.New(nil)
	for _, cm := range []struct {
		name     string
		eligible bool
	}{{"assigned", true}, {"other", true}, {"ineligible", false}} {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: cm.name}}
		if cm.eligible {
			obj.Labels = map[string]string{contract.EligibleLabel: "true"}
		}
		g.UpsertConfigMap(obj)
	}
	for _, n := range []struct{ name, version, source string }{
		{"n1", "v1.37.2", "ns/assigned"}, {"n2", "v1.30.0", "ns/other"}, {"n3", "garbage", ""}, {"n4", "v1.37.0", "ns/ineligible"},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, ResourceVersion: "1"}}
		node.Status.NodeInfo.KubeletVersion = n.version
		if n.source != "" {
			node.Annotations = map[string]string{contract.ConfigSourceAnnotation: n.source}
		}
		g.UpsertNode(node)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	pod.Spec.NodeName = "n1"
	pod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "podcm"}}}}}
	g.UpsertPod(pod)
	if synced {
		g.MarkSynced()
	}
	return g
}

var nodeGroups = []string{"system:nodes", "system:authenticated"}

func nodeSpec(node string, ra *authorizationv1.ResourceAttributes) *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{User: "system:node:" + node, Groups: nodeGroups, ResourceAttributes: ra}
}

func cmRead(verb, namespace, name string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "configmaps", Namespace: namespace, Name: name}
}

func nodeAccess(verb, name, subresource string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "nodes", Name: name, Subresource: subresource}
}

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
		{"admin is not a node", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: cmRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"node user outside system:nodes is not a node", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "system:node:n1", ResourceAttributes: cmRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"system:nodes member without a node name gets nothing", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "bob", Groups: nodeGroups, ResourceAttributes: cmRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"empty node name gets nothing", true, nil, nodeSpec("", cmRead("get", "ns", "assigned")), NoOpinion, ReasonUnknownNode},
		{"non-node answered even before sync", false, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", ResourceAttributes: cmRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},

		// Assigned ConfigMaps.
		{"get assigned", true, nil, nodeSpec("n1", cmRead("get", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"list assigned by name", true, nil, nodeSpec("n1", cmRead("list", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"watch assigned by name", true, nil, nodeSpec("n1", cmRead("watch", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"list without a name", true, nil, nodeSpec("n1", cmRead("list", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"watch without a name", true, nil, nodeSpec("n1", cmRead("watch", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"another node's ConfigMap", true, nil, nodeSpec("n1", cmRead("get", "ns", "other")), NoOpinion, ReasonNoPath},
		{"assigned name in another namespace", true, nil, nodeSpec("n1", cmRead("get", "other", "assigned")), NoOpinion, ReasonNoPath},
		{"unassigned ConfigMap", true, nil, nodeSpec("n1", cmRead("get", "ns", "nobody")), NoOpinion, ReasonNoPath},
		{"own annotation pointing at an ineligible ConfigMap", true, nil, nodeSpec("n4", cmRead("get", "ns", "ineligible")), NoOpinion, ReasonNoPath},
		{"unknown node", true, nil, nodeSpec("ghost", cmRead("get", "ns", "assigned")), NoOpinion, ReasonNoPath},
		{"never allow before sync", false, nil, nodeSpec("n1", cmRead("get", "ns", "assigned")), NoOpinion, ReasonGraphNotSynced},

		// Pod references.
		{"ConfigMap of a pod bound to the node", true, nil, nodeSpec("n1", cmRead("get", "ns", "podcm")), Allow, ReasonConfigMapReadable},
		{"ConfigMap of a pod bound to another node", true, nil, nodeSpec("n2", cmRead("get", "ns", "podcm")), NoOpinion, ReasonNoPath},

		// Verbs and resources other than reads.
		{"update assigned ConfigMap", true, nil, nodeSpec("n1", cmRead("update", "ns", "assigned")), NoOpinion, ReasonNotConfigMapRead},
		{"delete assigned ConfigMap", true, nil, nodeSpec("n1", cmRead("delete", "ns", "assigned")), NoOpinion, ReasonNotConfigMapRead},
		{"ConfigMap subresource", true, nil, nodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Subresource: "x", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"configmaps in another group", true, nil, nodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Group: "example.com", Resource: "configmaps", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"secrets", true, nil, nodeSpec("n1", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "assigned"}), NoOpinion, ReasonNotConfigMapRead},
		{"non-resource request", true, nil, nodeSpec("n1", nil), NoOpinion, ReasonNonResource},

		// Minimum kubelet version.
		{"new enough kubelet reads assigned", true, minVersion, nodeSpec("n1", cmRead("get", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"old kubelet denied its assigned ConfigMap", true, minVersion, nodeSpec("n2", cmRead("get", "ns", "other")), Deny, ReasonKubeletTooOld},
		{"old kubelet denied a Secret", true, minVersion, nodeSpec("n2", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"}), Deny, ReasonKubeletTooOld},
		{"old kubelet denied non-resource", true, minVersion, nodeSpec("n2", nil), Deny, ReasonKubeletTooOld},
		{"old kubelet may get own Node", true, minVersion, nodeSpec("n2", nodeAccess("get", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may update own Node", true, minVersion, nodeSpec("n2", nodeAccess("update", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may patch own Node status", true, minVersion, nodeSpec("n2", nodeAccess("patch", "n2", "status")), NoOpinion, ReasonOwnNodeWhileOld},
		{"old kubelet may not delete own Node", true, minVersion, nodeSpec("n2", nodeAccess("delete", "n2", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not list Nodes", true, minVersion, nodeSpec("n2", nodeAccess("list", "", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not get another Node", true, minVersion, nodeSpec("n2", nodeAccess("get", "n1", "")), Deny, ReasonKubeletTooOld},
		{"old kubelet may not touch another subresource", true, minVersion, nodeSpec("n2", nodeAccess("get", "n2", "proxy")), Deny, ReasonKubeletTooOld},
		{"unparseable kubelet version is denied", true, minVersion, nodeSpec("n3", cmRead("get", "ns", "assigned")), Deny, ReasonKubeletUnknown},
		{"unregistered node is not version-gated", true, minVersion, nodeSpec("ghost", nodeAccess("create", "", "")), NoOpinion, ReasonNotConfigMapRead},
		{"old kubelet not judged before sync", false, minVersion, nodeSpec("n2", cmRead("get", "ns", "other")), NoOpinion, ReasonGraphNotSynced},
	}
	graphs := map[bool]*graph.Graph{true: newGraph(true), false: newGraph(false)}
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

// staleGraph is a synced graph whose watches have been cut for longer
// than the staleness bound.
type staleGraph struct{ *graph.Graph }

func (staleGraph) Stale() bool { return true }

func TestAuthorizeStaleGraph(t *testing.T) {
	minVersion := version.MustParseGeneric("1.35.0")
	tests := []struct {
		name   string
		min    *version.Version
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   Decision
		reason string
	}{
		{"assigned ConfigMap is not allowed from a stale graph", nil, nodeSpec("n1", cmRead("get", "ns", "assigned")), NoOpinion, ReasonGraphStale},
		{"named watch is not allowed from a stale graph", nil, nodeSpec("n1", cmRead("watch", "ns", "assigned")), NoOpinion, ReasonGraphStale},
		{"pod's ConfigMap is not allowed from a stale graph", nil, nodeSpec("n1", cmRead("get", "ns", "podcm")), NoOpinion, ReasonGraphStale},
		{"no path is still no opinion, with the stale reason", nil, nodeSpec("n1", cmRead("get", "ns", "other")), NoOpinion, ReasonGraphStale},
		{"unnamed list keeps its own reason", nil, nodeSpec("n1", cmRead("list", "ns", "")), NoOpinion, ReasonUnnamedConfigMap},
		{"other resources keep their reason", nil, nodeSpec("n1", nodeAccess("get", "n1", "")), NoOpinion, ReasonNotConfigMapRead},
		{"non-nodes keep their reason", nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", ResourceAttributes: cmRead("get", "ns", "assigned")}, NoOpinion, ReasonNotANode},
		{"old kubelet is still denied", minVersion, nodeSpec("n2", cmRead("get", "ns", "other")), Deny, ReasonKubeletTooOld},
		{"old kubelet may still update its own Node", minVersion, nodeSpec("n2", nodeAccess("update", "n2", "")), NoOpinion, ReasonOwnNodeWhileOld},
	}
	g := staleGraph{newGraph(true)}
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
	if got := New(g.Graph, nil).Authorize(nodeSpec("n1", cmRead("get", "ns", "assigned"))); got.Decision != Allow {
		t.Fatalf("fresh graph: %v", got)
	}
}

func TestSetMinKubeletVersionTakesEffect(t *testing.T) {
	a := New(newGraph(true), nil)
	spec := nodeSpec("n2", cmRead("get", "ns", "other"))
	if got := a.Authorize(spec); got.Decision != Allow {
		t.Fatalf("without minimum: %v", got)
	}
	a.SetMinKubeletVersion(version.MustParseGeneric("1.31"))
	if got := a.Authorize(spec); got.Decision != Deny {
		t.Fatalf("with minimum: %v", got)
	}
}

func TestReviewFunc(t *testing.T) {
	review := ReviewFunc(New(newGraph(true), nil), nil)
	sar := func(apiVersion, kind string, spec *authorizationv1.SubjectAccessReviewSpec) []byte {
		body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}, Spec: *spec})
		return body
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr string
		allowed bool
	}{
		{"allowed", sar("authorization.k8s.io/v1", "SubjectAccessReview", nodeSpec("n1", cmRead("get", "ns", "assigned"))), "", true},
		{"no opinion", sar("authorization.k8s.io/v1", "SubjectAccessReview", nodeSpec("n1", cmRead("get", "ns", "other"))), "", false},
		{"v1beta1 refused", sar("authorization.k8s.io/v1beta1", "SubjectAccessReview", nodeSpec("n1", cmRead("get", "ns", "assigned"))), "expected authorization.k8s.io/v1 SubjectAccessReview", false},
		{"wrong kind", sar("authorization.k8s.io/v1", "LocalSubjectAccessReview", nodeSpec("n1", nil)), "expected", false},
		{"missing type meta", []byte(`{"spec":{"user":"system:node:n1"}}`), "expected", false},
		{"not JSON", []byte(`<xml/>`), "decoding SubjectAccessReview", false},
		{"truncated", []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{`), "decoding", false},
		{"wrong field type", []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"groups":"system:nodes"}}`), "decoding", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := review(context.Background(), tt.body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out := decodeSAR(t, resp)
			if out.APIVersion != "authorization.k8s.io/v1" || out.Kind != "SubjectAccessReview" {
				t.Fatalf("response type meta %v", out.TypeMeta)
			}
			if out.Status.Allowed != tt.allowed || out.Status.Denied || out.Status.Reason == "" {
				t.Fatalf("status = %+v", out.Status)
			}
		})
	}
}

// panicky is a graph reader that fails the way a bug would.
type panicky struct{}

func (panicky) Synced() bool                                          { return true }
func (panicky) Stale() bool                                           { return false }
func (panicky) CanReadConfigMap(string, string, string) bool          { panic("boom") }
func (panicky) Node(string) (*graph.NodeInfo, bool)                   { return nil, false }
func (panicky) Lookup(string, string, string) (*graph.NodeInfo, bool) { panic("boom") }

func TestReviewFuncRecoversPanics(t *testing.T) {
	review := ReviewFunc(New(panicky{}, nil), nil)
	body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *nodeSpec("n1", cmRead("get", "ns", "assigned"))})
	resp, err := review(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	st := decodeSAR(t, resp).Status
	if st.Allowed || st.Denied || st.EvaluationError == "" || st.Reason != ReasonInternalError {
		t.Fatalf("status after panic = %+v", st)
	}
}

func TestReviewFuncHonoursDeadline(t *testing.T) {
	review := ReviewFunc(New(newGraph(true), nil), nil)
	body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *nodeSpec("n1", cmRead("get", "ns", "assigned"))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := review(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if st := decodeSAR(t, resp).Status; st.Allowed || st.Reason != ReasonTimedOut {
		t.Fatalf("status past deadline = %+v", st)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	a := New(newGraph(true), version.MustParseGeneric("1.30"))
	for _, bc := range []struct {
		name string
		spec *authorizationv1.SubjectAccessReviewSpec
	}{
		{"allowed", nodeSpec("n1", cmRead("get", "ns", "assigned"))},
		{"refused", nodeSpec("n1", cmRead("get", "ns", "other"))},
		{"non-node", &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: cmRead("get", "ns", "x")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(bc.spec)
			}
		})
	}
}

// decodeSAR decodes what ReviewFunc returned, as the apiserver would.
func decodeSAR(t testing.TB, resp any) *authorizationv1.SubjectAccessReview {
	t.Helper()
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatalf("response %T does not encode: %v", resp, err)
	}
	var sar authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(raw, &sar); err != nil {
		t.Fatalf("response does not decode: %v\n%s", err, raw)
	}
	return &sar
}
