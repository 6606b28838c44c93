package authz

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// testPolicies deny n1's reads of its assigned ConfigMap ("frozen", twice
// to show how denials join), and allow reads of anything named "shared"
// and every list, which the authorizer must honour only for named
// ConfigMap reads without a path.
const testPolicies = `package nodeguard.authz

deny contains {"rule": "frozen", "msg": sprintf("node %s is frozen", [input.nodeguard.node])} if {
	input.spec.resourceAttributes.resource == "configmaps"
	input.spec.resourceAttributes.name == "assigned"
	input.nodeguard.kubeletVersion == "v1.37.2"
}

deny contains {"rule": "frozen", "msg": "and stays frozen"} if {
	input.spec.resourceAttributes.resource == "configmaps"
	input.spec.resourceAttributes.name == "assigned"
}

deny contains "no secrets named podcm" if {
	input.spec.resourceAttributes.resource == "secrets"
	input.spec.resourceAttributes.name == "podcm"
}

allow if input.spec.resourceAttributes.name == "shared"

allow if input.spec.resourceAttributes.verb == "list"
`

// countingEvaluator counts evaluations, so tests can tell that the
// policies were not consulted.
type countingEvaluator struct {
	next  PolicyEvaluator
	calls atomic.Int32
}

func (c *countingEvaluator) EvalAuthz(ctx context.Context, in *policy.AuthzInput) (policy.AuthzResult, error) {
	c.calls.Add(1)
	return c.next.EvalAuthz(ctx, in)
}

// failingEvaluator fails every evaluation as a timed-out one does.
type failingEvaluator struct{}

func (failingEvaluator) EvalAuthz(context.Context, *policy.AuthzInput) (policy.AuthzResult, error) {
	return policy.AuthzResult{}, &policy.EvalError{Package: policy.PackageAuthz, Timeout: true, Err: context.DeadlineExceeded}
}

func newTestEngine(t *testing.T, g policy.GraphReader, rego string) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	e, err := policy.New(ctx, policy.Options{Dir: dir, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Fatalf("test policies do not load: %v", err)
	}
	return e
}

func TestPoliciesCombineWithBuiltInRules(t *testing.T) {
	minVersion := version.MustParseGeneric("1.35.0")
	secret := func(name string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: "ns", Name: name}
	}
	tests := []struct {
		name      string
		synced    bool
		min       *version.Version
		spec      *authorizationv1.SubjectAccessReviewSpec
		want      Decision
		reason    string // exact, or a prefix when it ends in "..."
		evaluated bool
	}{
		{"policy deny wins over built-in allow", true, nil, nodeSpec("n1", cmRead("get", "ns", "assigned")), Deny,
			"nodeguard policy nodeguard.authz/frozen: and stays frozen; node n1 is frozen", true},
		{"policy deny turns no opinion into deny", true, nil, nodeSpec("n1", secret("podcm")), Deny,
			"nodeguard policy nodeguard.authz: no secrets named podcm", true},
		{"built-in allow stands without a policy deny", true, nil, nodeSpec("n1", cmRead("get", "ns", "podcm")), Allow, ReasonConfigMapReadable, true},
		{"built-in deny stays, policies not consulted", true, minVersion, nodeSpec("n2", cmRead("get", "ns", "shared")), Deny, ReasonKubeletTooOld, false},
		{"non-nodes are not judged by policies", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: cmRead("get", "ns", "assigned")},
			NoOpinion, ReasonNotANode, false},

		// What a policy allow may and may not do.
		{"policy allow grants a named ConfigMap read without a path", true, nil, nodeSpec("n1", cmRead("get", "ns", "shared")), Allow, ReasonPolicyAllow, true},
		{"policy allow grants a watch by name too", true, nil, nodeSpec("n2", cmRead("watch", "kube-system", "shared")), Allow, ReasonPolicyAllow, true},
		{"policy allow ignored for other resources", true, nil, nodeSpec("n1", secret("shared")), NoOpinion, ReasonNotConfigMapRead, true},
		{"policy allow ignored for unnamed lists", true, nil, nodeSpec("n1", cmRead("list", "ns", "")), NoOpinion, ReasonUnnamedConfigMap, true},
		{"policy allow ignored for writes", true, nil, nodeSpec("n1", cmRead("update", "ns", "shared")), NoOpinion, ReasonNotConfigMapRead, true},
		{"policy allow ignored before the graph synced", false, nil, nodeSpec("n1", cmRead("get", "ns", "shared")), NoOpinion, ReasonGraphNotSynced, true},
		{"policy allow ignored for a node without a name", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "bob", Groups: nodeGroups, ResourceAttributes: cmRead("get", "ns", "shared")},
			NoOpinion, ReasonNotANode, true},
		{"policy deny applies before the graph synced", false, nil, nodeSpec("n1", secret("podcm")), Deny, "nodeguard policy nodeguard.authz: ...", true},
	}
	graphs := map[bool]*graph.Graph{true: newGraph(true), false: newGraph(false)}
	engines := map[bool]*policy.Engine{true: newTestEngine(t, graphs[true], testPolicies), false: newTestEngine(t, graphs[false], testPolicies)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			engine := &countingEvaluator{next: engines[tt.synced]}
			p := &Policies{Engine: engine, Graph: graphs[tt.synced], FailurePolicy: policy.NoOpinion}
			a := New(graphs[tt.synced], tt.min)
			got := p.decide(ctx, tt.spec, a.Authorize(tt.spec))
			if got.Decision != tt.want || !reasonMatches(got.Reason, tt.reason) {
				t.Errorf("decision = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
			if evaluated := engine.calls.Load() > 0; evaluated != tt.evaluated {
				t.Errorf("policies evaluated = %v, want %v", evaluated, tt.evaluated)
			}
			if got.evalErr != "" {
				t.Errorf("unexpected evaluation error %q", got.evalErr)
			}
			if wantByPolicy := strings.HasPrefix(tt.reason, "nodeguard policy"); got.byPolicy != wantByPolicy {
				t.Errorf("byPolicy = %v, want %v", got.byPolicy, wantByPolicy)
			}
		})
	}
}

func reasonMatches(got, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "..."); ok {
		return strings.HasPrefix(got, prefix)
	}
	return got == want
}

func TestPoliciesOnAStaleGraph(t *testing.T) {
	g := newGraph(true)
	engine := newTestEngine(t, g, testPolicies)
	p := &Policies{Engine: engine, Graph: g, FailurePolicy: policy.NoOpinion}
	a := New(staleGraph{g}, nil)
	_, ctx := ktesting.NewTestContext(t)
	for _, tt := range []struct {
		name   string
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   Decision
		reason string
	}{
		{"policy allow cannot grant from a stale graph", nodeSpec("n1", cmRead("get", "ns", "shared")), NoOpinion, ReasonGraphStale},
		{"policy deny still refuses", nodeSpec("n1", cmRead("get", "ns", "assigned")), Deny, "nodeguard policy nodeguard.authz/frozen: ..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := p.decide(ctx, tt.spec, a.Authorize(tt.spec))
			if got.Decision != tt.want || !reasonMatches(got.Reason, tt.reason) {
				t.Errorf("decision = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestPolicyEvaluationFailure(t *testing.T) {
	g := newGraph(true)
	a := New(g, nil)
	for _, tt := range []struct {
		name    string
		failure policy.FailurePolicy
		spec    *authorizationv1.SubjectAccessReviewSpec
		want    Decision
		reason  string
	}{
		{"no opinion keeps a built-in allow", policy.NoOpinion, nodeSpec("n1", cmRead("get", "ns", "assigned")), Allow, ReasonConfigMapReadable},
		{"no opinion keeps a built-in no opinion", policy.NoOpinion, nodeSpec("n1", cmRead("get", "ns", "other")), NoOpinion, ReasonNoPath},
		{"fail closed denies even a built-in allow", policy.FailClosed, nodeSpec("n1", cmRead("get", "ns", "assigned")), Deny, "nodeguard policy evaluation failed: ..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			p := &Policies{Engine: failingEvaluator{}, Graph: g, FailurePolicy: tt.failure}
			got := p.decide(ctx, tt.spec, a.Authorize(tt.spec))
			if got.Decision != tt.want || !reasonMatches(got.Reason, tt.reason) {
				t.Errorf("decision = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
			if !strings.Contains(got.evalErr, "policy evaluation failed") || !strings.Contains(got.evalErr, "timed out") {
				t.Errorf("evaluation error = %q, want the timeout named", got.evalErr)
			}
		})
	}
}

func sarBody(t *testing.T, spec *authorizationv1.SubjectAccessReviewSpec) []byte {
	t.Helper()
	body, err := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}, Spec: *spec})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestReviewFuncWithPolicies(t *testing.T) {
	g := newGraph(true)
	engine := newTestEngine(t, g, testPolicies)
	for _, tt := range []struct {
		name                    string
		engine                  PolicyEvaluator
		spec                    *authorizationv1.SubjectAccessReviewSpec
		allowed, denied         bool
		reason, evaluationError string
		logged                  bool
	}{
		{"policy denial", engine, nodeSpec("n1", cmRead("get", "ns", "assigned")), false, true, "nodeguard policy nodeguard.authz/frozen: ...", "", true},
		{"policy allow", engine, nodeSpec("n1", cmRead("get", "ns", "shared")), true, false, ReasonPolicyAllow, "", false},
		{"evaluation error", failingEvaluator{}, nodeSpec("n1", cmRead("get", "ns", "podcm")), true, false, ReasonConfigMapReadable, "nodeguard policy evaluation failed: ...", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			review := ReviewFunc(New(g, nil), nil,
				WithPolicies(&Policies{Engine: tt.engine, Graph: g, FailurePolicy: policy.NoOpinion}),
				WithDecisionLog(server.DecisionLog{Mode: server.DecisionLogDenials}))
			resp, err := review(ctx, sarBody(t, tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			st := decodeSAR(t, resp).Status
			if st.Allowed != tt.allowed || st.Denied != tt.denied || !reasonMatches(st.Reason, tt.reason) {
				t.Errorf("status = %+v, want allowed %v denied %v reason %q", st, tt.allowed, tt.denied, tt.reason)
			}
			if tt.evaluationError == "" && st.EvaluationError != "" || !reasonMatches(st.EvaluationError, tt.evaluationError) {
				t.Errorf("evaluationError = %q, want %q", st.EvaluationError, tt.evaluationError)
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if logged := strings.Contains(logs, "INFO Decision "); logged != tt.logged {
				t.Errorf("decision logged = %v, want %v; log:\n%s", logged, tt.logged, logs)
			}
			if tt.logged && (!strings.Contains(logs, `decidedBy="policy"`) || !strings.Contains(logs, `outcome="deny"`) || !strings.Contains(logs, "latency")) {
				t.Errorf("decision line lacks who decided, the outcome or the latency:\n%s", logs)
			}
		})
	}
}

// TestReviewFuncRecoversPolicyPanics: a panic in the policy step is an
// internal error like one in the built-in rules.
func TestReviewFuncRecoversPolicyPanics(t *testing.T) {
	g := newGraph(true)
	review := ReviewFunc(New(g, nil), nil, WithPolicies(&Policies{Engine: panickyEvaluator{}, Graph: g}))
	_, ctx := ktesting.NewTestContext(t)
	resp, err := review(ctx, sarBody(t, nodeSpec("n1", cmRead("get", "ns", "assigned"))))
	if err != nil {
		t.Fatal(err)
	}
	if st := decodeSAR(t, resp).Status; st.Allowed || st.Denied || st.Reason != ReasonInternalError {
		t.Fatalf("status after a policy panic = %+v", st)
	}
}

type panickyEvaluator struct{}

func (panickyEvaluator) EvalAuthz(context.Context, *policy.AuthzInput) (policy.AuthzResult, error) {
	panic(errors.New("boom"))
}

// BenchmarkReviewWithShippedPolicies compares a node's watch of its
// assigned configuration, the review a kubelet repeats most for nodeguard,
// answered by the built-in rules alone and with the shipped policies after
// them. Both include decoding the review.
func BenchmarkReviewWithShippedPolicies(b *testing.B) {
	g := newGraph(true)
	body, err := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *nodeSpec("n1", cmRead("watch", "ns", "assigned"))})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := policy.New(context.Background(), policy.Options{Graph: g})
	if err != nil || engine.Ready() != nil {
		b.Fatal(err, engine.Ready())
	}
	for _, bc := range []struct {
		name string
		opts []ReviewOption
	}{
		{"built-in", nil},
		{"built-in+shipped-policies", []ReviewOption{WithPolicies(&Policies{Engine: engine, Graph: g, FailurePolicy: policy.NoOpinion})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			review := ReviewFunc(New(g, nil), nil, bc.opts...)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := review(context.Background(), body)
				if err != nil || !decodeSAR(b, resp).Status.Allowed {
					b.Fatal(err, resp)
				}
			}
		})
	}
}
