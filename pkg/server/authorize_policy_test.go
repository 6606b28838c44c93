package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// testPolicies deny n1's reads of its assigned ConfigMap ("frozen", twice
// to show how denials join), and allow reads of anything named "shared"
// and every list, which the authorizer must honour only for named
// ConfigMap reads without a path.
const authzTestPolicies = `package nodeguard.authz

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

// failingAuthzEvaluator fails every evaluation as a timed-out one does.
type failingAuthzEvaluator struct{}

func (failingAuthzEvaluator) EvalAuthz(context.Context, *policy.AuthzInput) (policy.AuthzResult, error) {
	return policy.AuthzResult{}, &policy.EvalError{Package: policy.PackageAuthz, Timeout: true, Err: context.DeadlineExceeded}
}

func TestAuthzPoliciesCombineWithBuiltInRules(t *testing.T) {
	minVersion := version.MustParseGeneric("1.35.0")
	secret := func(name string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: "ns", Name: name}
	}
	tests := []struct {
		name      string
		synced    bool
		min       *version.Version
		spec      *authorizationv1.SubjectAccessReviewSpec
		want      authz.Decision
		reason    string // exact, or a prefix when it ends in "..."
		evaluated bool
	}{
		{"policy deny wins over built-in allow", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), authz.Deny,
			"nodeguard policy nodeguard.authz/frozen: and stays frozen; node n1 is frozen", true},
		{"policy deny turns no opinion into deny", true, nil, reviewtest.NodeSpec("n1", secret("podcm")), authz.Deny,
			"nodeguard policy nodeguard.authz: no secrets named podcm", true},
		{"built-in allow stands without a policy deny", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "podcm")), authz.Allow, authz.ReasonConfigMapReadable, true},
		{"built-in deny stays, policies not consulted", true, minVersion, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("get", "ns", "shared")), authz.Deny, authz.ReasonKubeletTooOld, false},
		{"non-nodes are not judged by policies", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "admin", Groups: []string{"system:masters"}, ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "assigned")},
			authz.NoOpinion, authz.ReasonNotANode, false},

		// What a policy allow may and may not do.
		{"policy allow grants a named ConfigMap read without a path", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "shared")), authz.Allow, policy.ReasonAuthzAllow, true},
		{"policy allow grants a watch by name too", true, nil, reviewtest.NodeSpec("n2", reviewtest.ConfigMapRead("watch", "kube-system", "shared")), authz.Allow, policy.ReasonAuthzAllow, true},
		{"policy allow ignored for other resources", true, nil, reviewtest.NodeSpec("n1", secret("shared")), authz.NoOpinion, authz.ReasonNotConfigMapRead, true},
		{"policy allow ignored for unnamed lists", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("list", "ns", "")), authz.NoOpinion, authz.ReasonUnnamedConfigMap, true},
		{"policy allow ignored for writes", true, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("update", "ns", "shared")), authz.NoOpinion, authz.ReasonNotConfigMapRead, true},
		{"policy allow ignored before the graph synced", false, nil, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "shared")), authz.NoOpinion, authz.ReasonGraphNotSynced, true},
		{"policy allow ignored for a node without a name", true, nil, &authorizationv1.SubjectAccessReviewSpec{User: "bob", Groups: reviewtest.NodeGroups, ResourceAttributes: reviewtest.ConfigMapRead("get", "ns", "shared")},
			authz.NoOpinion, authz.ReasonNotANode, true},
		{"policy deny applies before the graph synced", false, nil, reviewtest.NodeSpec("n1", secret("podcm")), authz.Deny, "nodeguard policy nodeguard.authz: ...", true},
	}
	graphs := map[bool]*graph.Graph{true: reviewtest.Graph(true), false: reviewtest.Graph(false)}
	engines := map[bool]*policy.Engine{true: newTestEngine(t, graphs[true], authzTestPolicies), false: newTestEngine(t, graphs[false], authzTestPolicies)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine := &countingEvaluator{next: engines[tt.synced]}
			p := &policy.AuthzPolicies{Engine: engine, Graph: graphs[tt.synced], FailurePolicy: policy.NoOpinion}
			a := authz.New(graphs[tt.synced], tt.min)
			got := decideAuthorization(t, a, p, tt.spec)
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

func TestAuthzPoliciesOnAStaleGraph(t *testing.T) {
	g := reviewtest.Graph(true)
	engine := newTestEngine(t, g, authzTestPolicies)
	p := &policy.AuthzPolicies{Engine: engine, Graph: g, FailurePolicy: policy.NoOpinion}
	a := authz.New(reviewtest.StaleGraph{Graph: g}, nil)
	for _, tt := range []struct {
		name   string
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   authz.Decision
		reason string
	}{
		{"policy allow cannot grant from a stale graph", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "shared")), authz.NoOpinion, authz.ReasonGraphStale},
		{"policy deny still refuses", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), authz.Deny, "nodeguard policy nodeguard.authz/frozen: ..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := decideAuthorization(t, a, p, tt.spec)
			if got.Decision != tt.want || !reasonMatches(got.Reason, tt.reason) {
				t.Errorf("decision = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestAuthzPolicyEvaluationFailure(t *testing.T) {
	g := reviewtest.Graph(true)
	a := authz.New(g, nil)
	for _, tt := range []struct {
		name    string
		failure policy.FailurePolicy
		spec    *authorizationv1.SubjectAccessReviewSpec
		want    authz.Decision
		reason  string
	}{
		{"no opinion keeps a built-in allow", policy.NoOpinion, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), authz.Allow, authz.ReasonConfigMapReadable},
		{"no opinion keeps a built-in no opinion", policy.NoOpinion, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "other")), authz.NoOpinion, authz.ReasonNoPath},
		{"fail closed denies even a built-in allow", policy.FailClosed, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), authz.Deny, "nodeguard policy evaluation failed: ..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &policy.AuthzPolicies{Engine: failingAuthzEvaluator{}, Graph: g, FailurePolicy: tt.failure}
			got := decideAuthorization(t, a, p, tt.spec)
			if got.Decision != tt.want || !reasonMatches(got.Reason, tt.reason) {
				t.Errorf("decision = %v %q, want %v %q", got.Decision, got.Reason, tt.want, tt.reason)
			}
			if !strings.Contains(got.evalErr, "policy evaluation failed") || !strings.Contains(got.evalErr, "timed out") {
				t.Errorf("evaluation error = %q, want the timeout named", got.evalErr)
			}
		})
	}
}

func TestAuthorizeWithPolicies(t *testing.T) {
	g := reviewtest.Graph(true)
	engine := newTestEngine(t, g, authzTestPolicies)
	for _, tt := range []struct {
		name                    string
		engine                  policy.AuthzEvaluator
		spec                    *authorizationv1.SubjectAccessReviewSpec
		allowed, denied         bool
		reason, evaluationError string
		logged                  bool
	}{
		{"policy denial", engine, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned")), false, true, "nodeguard policy nodeguard.authz/frozen: ...", "", true},
		{"policy allow", engine, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "shared")), true, false, policy.ReasonAuthzAllow, "", false},
		{"evaluation error", failingAuthzEvaluator{}, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "podcm")), true, false, authz.ReasonConfigMapReadable, "nodeguard policy evaluation failed: ...", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			review := reviewOf(Authorize(authz.New(g, nil), &policy.AuthzPolicies{Engine: tt.engine, Graph: g, FailurePolicy: policy.NoOpinion}, testMaxBody, WithDecisionLog(DecisionLog{Mode: DecisionLogDenials})))
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
			logs := checkDecisionLogged(t, logger, tt.logged)
			if tt.logged && (!strings.Contains(logs, `decidedBy="policy"`) || !strings.Contains(logs, `outcome="deny"`) || !strings.Contains(logs, "latency")) {
				t.Errorf("decision line lacks who decided, the outcome or the latency:\n%s", logs)
			}
		})
	}
}

// TestAuthorizeRecoversPolicyPanics: a panic in the policy step is an
// internal error like one in the built-in rules.
func TestAuthorizeRecoversPolicyPanics(t *testing.T) {
	g := reviewtest.Graph(true)
	review := reviewOf(Authorize(authz.New(g, nil), &policy.AuthzPolicies{Engine: panickyEvaluator{}, Graph: g}, testMaxBody))
	_, ctx := ktesting.NewTestContext(t)
	resp, err := review(ctx, sarBody(t, reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))))
	if err != nil {
		t.Fatal(err)
	}
	if st := decodeSAR(t, resp).Status; st.Allowed || st.Denied || st.Reason != authz.ReasonInternalError {
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
func BenchmarkAuthorizeWithShippedPolicies(b *testing.B) {
	g := reviewtest.Graph(true)
	body, err := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("watch", "ns", "assigned"))})
	if err != nil {
		b.Fatal(err)
	}
	engine := shippedEngine(context.Background(), b, g)
	for _, bc := range []struct {
		name     string
		policies *policy.AuthzPolicies
	}{
		{"built-in", nil},
		{"built-in+shipped-policies", &policy.AuthzPolicies{Engine: engine, Graph: g, FailurePolicy: policy.NoOpinion}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			review := reviewOf(Authorize(authz.New(g, nil), bc.policies, testMaxBody))
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
