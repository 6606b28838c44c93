package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// The fixtures only the tests of the reviews use; those they share with the
// tests of pkg/admission and pkg/authz are in pkg/internal/reviewtest.

// newAdmitter is an Admitter with settings over the shared fixtures: the
// ConfigMaps of reviewtest.ConfigMapLister and reviewtest.AdmitterGraph.
func newAdmitter(t *testing.T, s *settings.Settings) *admission.Admitter {
	t.Helper()
	return admission.New(func() *settings.Settings { return s }, reviewtest.ConfigMapLister(t), reviewtest.AdmitterGraph())
}

// newTestEngine is a policy engine over g with the policies rego, loaded.
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

// countingEvaluator counts the evaluations, of either kind, it passes to
// next, so tests can tell that the policies were not consulted.
type countingEvaluator struct {
	next  *policy.Engine
	calls atomic.Int32
}

func (c *countingEvaluator) EvalAdmission(ctx context.Context, in *policy.AdmissionInput) (policy.AdmissionResult, error) {
	c.calls.Add(1)
	return c.next.EvalAdmission(ctx, in)
}

func (c *countingEvaluator) EvalAuthz(ctx context.Context, in *policy.AuthzInput) (policy.AuthzResult, error) {
	c.calls.Add(1)
	return c.next.EvalAuthz(ctx, in)
}

// testMaxBody is the body limit of the endpoints under test.
const testMaxBody = 8 << 20

// reviewFunc calls a review endpoint as the apiserver would.
type reviewFunc func(ctx context.Context, body []byte) (any, error)

// reviewOf calls the review endpoint h with body, as the apiserver would:
// an HTTP error is an error, and an answer is the review it decodes to
// (*admissionv1.AdmissionReview or *authorizationv1.SubjectAccessReview).
func reviewOf(h http.Handler) reviewFunc {
	return func(ctx context.Context, body []byte) (any, error) {
		answer, err := reviewtest.Serve(ctx, h, body)
		if err != nil {
			return nil, err
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(answer, &tm); err != nil {
			return nil, fmt.Errorf("answer %s: %w", answer, err)
		}
		var out any = &authorizationv1.SubjectAccessReview{}
		if tm.Kind == "AdmissionReview" {
			out = &admissionv1.AdmissionReview{}
		}
		if err := json.Unmarshal(answer, out); err != nil {
			return nil, fmt.Errorf("answer %s: %w", answer, err)
		}
		return out, nil
	}
}

// runReview runs review on body. When wantErr is set, the review must fail
// with an error that mentions it, and runReview reports no answer; otherwise it
// must not fail.
func runReview(t *testing.T, review reviewFunc, body []byte, wantErr string) (resp any, answered bool) {
	t.Helper()
	resp, err := review(context.Background(), body)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return resp, true
}

// shippedEngine is a policy engine over g with the shipped policies, loaded.
func shippedEngine(ctx context.Context, tb testing.TB, g policy.GraphReader) *policy.Engine {
	tb.Helper()
	engine, err := policy.New(ctx, policy.Options{Graph: g})
	if err != nil || engine.Ready() != nil {
		tb.Fatal(err, engine.Ready())
	}
	return engine
}

// checkDecisionLogged checks that logger, which buffers, logged a decision
// exactly when want, and returns what it logged.
func checkDecisionLogged(t *testing.T, logger klog.Logger, want bool) string {
	t.Helper()
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if logged := strings.Contains(logs, "INFO Decision "); logged != want {
		t.Errorf("decision logged = %v, want %v; log:\n%s", logged, want, logs)
	}
	return logs
}

// checkReencoded is what the fuzz targets of the review decoders check: a
// review that decode (named name) reads from body without repeated keys
// reads the same once re-encoded (where omitempty makes empty and absent
// alike), compared after normalize unless it is nil.
func checkReencoded[R any](t *testing.T, name string, decode func([]byte) (R, error, error), normalize func(*testing.T, R) R, body []byte) {
	t.Helper()
	got, repeated, err := decode(body)
	if err != nil || repeated != nil {
		return
	}
	encoded, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("re-encoding %q: %v", body, err)
	}
	again, repeated, err := decode(encoded)
	if err != nil || repeated != nil {
		t.Fatalf("%s(%q) of the re-encoded %q: %v, %v", name, encoded, body, err, repeated)
	}
	left, right := got, again
	if normalize != nil {
		left, right = normalize(t, got), normalize(t, again)
	}
	if !apiequality.Semantic.DeepEqual(left, right) {
		t.Fatalf("%s(%q) =\n%#v\nonce re-encoded:\n%#v", name, body, got, again)
	}
}

// panicky is a graph reader that fails the way a bug would.
type panicky struct{}

func (panicky) Synced() bool                                          { return true }
func (panicky) Stale() bool                                           { return false }
func (panicky) CanReadConfigMap(string, string, string) bool          { panic("boom") }
func (panicky) Node(string) (*graph.NodeInfo, bool)                   { return nil, false }
func (panicky) Lookup(string, string, string) (*graph.NodeInfo, bool) { panic("boom") }

// decodeSAR decodes what a reviewFunc returned, as the apiserver would.
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

// decideAdmission decides req through /validate and reads the Result
// back from the answer.
func decideAdmission(ctx context.Context, t *testing.T, a *admission.Admitter, p *policy.AdmissionPolicies, req *admissionv1.AdmissionRequest) admission.Result {
	t.Helper()
	if req.UID == "" {
		req.UID = "uid"
	}
	out, err := reviewOf(Validate(a, p, testMaxBody))(ctx, admissionReviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(*admissionv1.AdmissionReview).Response
	result := admission.Result{Allowed: resp.Allowed, Warnings: resp.Warnings}
	if st := resp.Result; st != nil && !resp.Allowed {
		rule, message, _ := strings.Cut(strings.TrimPrefix(st.Message, "nodeguard "), ": ")
		result.Rule, result.Message = contract.Rule(rule), message
		result.NodeState = st.Details != nil && len(st.Details.Causes) > 0 && st.Details.Causes[0].Type == contract.CauseNodeState
	}
	return result
}

// decideAuthorization decides spec through /authorize and reads the
// outcome back from the answer and its decision log line.
func decideAuthorization(t *testing.T, a *authz.Authorizer, p *policy.AuthzPolicies, spec *authorizationv1.SubjectAccessReviewSpec) authzOutcome {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	h := Authorize(a, p, testMaxBody, WithDecisionLog(DecisionLog{Mode: DecisionLogAll, Sample: 1}))
	out, err := reviewOf(h)(ctx, sarBody(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	st := out.(*authorizationv1.SubjectAccessReview).Status
	o := authzOutcome{Result: authz.Result{Decision: authz.NoOpinion, Reason: st.Reason}, evalErr: st.EvaluationError}
	switch {
	case st.Allowed:
		o.Decision = authz.Allow
	case st.Denied:
		o.Decision = authz.Deny
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	o.byPolicy = strings.Contains(logs, `decidedBy="policy"`)
	return o
}

func admissionReviewBody(t *testing.T, apiVersion string, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func sarBody(t testing.TB, spec *authorizationv1.SubjectAccessReviewSpec) []byte {
	t.Helper()
	body, err := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}, Spec: *spec})
	if err != nil {
		t.Fatal(err)
	}
	return body
}
