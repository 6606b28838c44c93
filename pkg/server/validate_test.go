package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	webhookerrors "k8s.io/apiserver/pkg/admission/plugin/webhook/errors"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

func TestValidate(t *testing.T) {
	review := reviewOf(Validate(newAdmitter(t, settings.Default()), nil, testMaxBody))
	refused := reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")).Build(t)
	refused.UID = "refused-uid"
	allowed := reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "status", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")).Build(t)
	allowed.UID = "allowed-uid"
	noUID := reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")).Build(t)
	noUID.UID = ""
	// An object that names its own node first and another one last: the
	// rules stop reading once they have the metadata and spec, where
	// encoding/json would take the last.
	repeated := []byte(strings.Replace(string(admissionReviewBody(t, "admission.k8s.io/v1", allowed)), `},"oldObject":`, `,"metadata":{"name":"n2"}},"oldObject":`, 1))
	repeatedInMetadata := []byte(strings.Replace(string(admissionReviewBody(t, "admission.k8s.io/v1", allowed)), `"object":{"metadata":{`, `"object":{"metadata":{"name":"n2",`, 1))

	for _, tt := range []struct {
		name    string
		body    []byte
		wantErr string
		wantUID string
		allowed bool
		// wantRule is the refusal's rule; "" is rule 1.
		wantRule contract.Rule
	}{
		{"refusal echoes the uid", admissionReviewBody(t, "admission.k8s.io/v1", refused), "", "refused-uid", false, ""},
		{"allow echoes the uid", admissionReviewBody(t, "admission.k8s.io/v1", allowed), "", "allowed-uid", true, ""},
		{"v1beta1", admissionReviewBody(t, "admission.k8s.io/v1beta1", allowed), "expected admission.k8s.io/v1 AdmissionReview", "", false, ""},
		{"no request", admissionReviewBody(t, "admission.k8s.io/v1", nil), "has no request", "", false, ""},
		{"no uid", admissionReviewBody(t, "admission.k8s.io/v1", noUID), "has no uid", "", false, ""},
		{"not JSON", []byte("\x00\x01"), "decoding AdmissionReview", "", false, ""},
		{"wrong type", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`), "decoding", "", false, ""},
		{"object repeats a key", repeated, "", "allowed-uid", false, admission.RuleMalformed},
		{"object's metadata repeats a key", repeatedInMetadata, "", "allowed-uid", false, admission.RuleMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, answered := runReview(t, review, tt.body, tt.wantErr)
			if !answered {
				return
			}
			out := resp.(*admissionv1.AdmissionReview)
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Request != nil {
				t.Fatalf("response envelope = %+v", out.TypeMeta)
			}
			r := out.Response
			if string(r.UID) != tt.wantUID || r.Allowed != tt.allowed {
				t.Fatalf("response = %+v", r)
			}
			if tt.wantRule == "" {
				tt.wantRule = contract.RuleOwnNode
			}
			if !tt.allowed && (r.Result == nil || r.Result.Code != 403 || !strings.Contains(r.Result.Message, "nodeguard "+string(tt.wantRule))) {
				t.Fatalf("refusal status = %+v", r.Result)
			}
		})
	}
}

func TestValidateRecoversAndHonoursDeadline(t *testing.T) {
	// A nil lister makes rule 5 panic when it looks a ConfigMap up.
	a := admission.New(settings.Default, nil, reviewtest.FakeGraph{})
	review := reviewOf(Validate(a, nil, testMaxBody))
	req := reviewtest.NodeRequest(reviewtest.AdminUser, admissionv1.Update, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n2")).Build(t)
	resp, err := review(context.Background(), admissionReviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*admissionv1.AdmissionReview).Response; r.Allowed || r.UID != req.UID || !strings.Contains(r.Result.Message, string(admission.RuleInternal)) {
		t.Fatalf("after panic: %+v %+v", r, r.Result)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err = review(ctx, admissionReviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*admissionv1.AdmissionReview).Response; r.Allowed || !strings.Contains(r.Result.Message, "deadline") {
		t.Fatalf("past deadline: %+v", r.Result)
	}
}

// FuzzValidate feeds arbitrary bodies to the /validate review: it
// must answer or return an error, never panic.
func FuzzValidate(f *testing.F) {
	t := &testing.T{}
	review := reviewOf(Validate(newAdmitter(t, settings.Default()), nil, testMaxBody))
	valid := admissionReviewBody(t, "admission.k8s.io/v1", reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "status", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")).Build(t))
	f.Add(valid)
	f.Add(admissionReviewBody(t, "admission.k8s.io/v1", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("x", reviewtest.GoodConfig), nil).Build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"nodes"},"operation":"UPDATE","object":{"metadata":7},"oldObject":[]}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"configmaps"},"operation":"CREATE","object":{"metadata":{"labels":{"nodeguard.dev/kubelet-config":"true"}},"data":{"kubelet":"{{{"}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := review(context.Background(), body)
		if err == nil {
			if r := resp.(*admissionv1.AdmissionReview).Response; r == nil || r.UID == "" {
				t.Fatalf("answer without a UID for %q", body)
			}
		}
	})
}

// FuzzDecodeAdmissionReview feeds arbitrary bodies to the review decoder:
// nothing may panic, and a review it reads without repeated keys must read
// the same once re-encoded.
func FuzzDecodeAdmissionReview(f *testing.F) {
	t := &testing.T{}
	f.Add(admissionReviewBody(t, "admission.k8s.io/v1", reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "status", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")).Build(t)))
	f.Add(admissionReviewBody(t, "admission.k8s.io/v1", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("x", reviewtest.GoodConfig), nil).Build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":true,"options":{"a":1},"requestKind":{"group":"","version":"v1","kind":"Node"},"userInfo":{"username":"u","extra":{"k":["v"]}},"object":null}}`))
	f.Add([]byte(`{"request":{"userInfo":{"groups":[1]}}}`))
	f.Add([]byte(`{"request":{"kind":{"kind":"A"},"kind":{"group":"B"}}}`))
	f.Add([]byte(`{"request":{"uid":"u","object":{"metadata":{"labels":{"a":"b","a":"c"}}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkReencoded(t, "decodeAdmissionReview", decodeAdmissionReview, compact, body)
	})
}

// compact re-encodes a review's embedded objects the one way encoding/json
// writes them, since re-encoding drops insignificant whitespace and escapes
// characters such as '&' that the original may have written plainly.
func compact(t *testing.T, review *admissionv1.AdmissionReview) *admissionv1.AdmissionReview {
	out := review.DeepCopy()
	if r := out.Request; r != nil {
		for _, ext := range []*runtime.RawExtension{&r.Object, &r.OldObject, &r.Options} {
			if len(ext.Raw) > 0 {
				var v any
				if err := json.Unmarshal(ext.Raw, &v); err != nil {
					t.Fatal(err)
				}
				raw, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				ext.Raw = raw
			}
		}
	}
	return out
}

// TestNodeStateRefusals: a refusal that concerns the target Node's own
// reported state carries the cause that makes a rollout skip the Node; one
// that concerns what is assigned (or anything else) does not, so that it
// still fails the pool.
func TestNodeStateRefusals(t *testing.T) {
	const C, U = admissionv1.Create, admissionv1.Update
	base := settings.Default()
	for _, tt := range []struct {
		name      string
		req       reviewtest.Request
		wantRule  contract.Rule
		nodeState bool
	}{
		{"rule 5: a gate the node's kubelet does not know", reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"))), contract.RuleFeatureGates, true},
		{"rule 5: a gate locked at the node's kubelet version", reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithAssignment("cfg/locked")), reviewtest.Node("n2")), contract.RuleFeatureGates, true},
		{"rule 5 at creation", reviewtest.NodeRequest(reviewtest.AdminUser, C, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), nil), contract.RuleFeatureGates, true},
		{"rule 5: a gate no kubelet knows, on a node without a parseable version", reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithKubelet("garbage"), reviewtest.WithAssignment("cfg/nosuchgate")), reviewtest.Node("n2", reviewtest.WithKubelet("garbage"))), contract.RuleFeatureGates, false},
		{"rule 6: an edit that breaks rule 5 for an assigned node", reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", reviewtest.NewGateConfig), reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig)), contract.RuleConfigContent, false},
		{"rule 6: an assignment that does not decode", reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/broken")), reviewtest.Node("n2")), contract.RuleConfigContent, false},
		{"rule 6: a ConfigMap that does not decode", reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", reviewtest.UnknownField), nil), contract.RuleConfigContent, false},
		{"rule 2: a node labels itself into a pool", reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue")), reviewtest.Node("n1")), contract.RuleNodeRestriction, false},
		{"rule 3: a node assigns itself", reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n1")), contract.RuleConfigSource, false},
		{"malformed", reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n1", reviewtest.Node("n1"), nil), admission.RuleMalformed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req.Build(t)
			got := decideAdmission(context.Background(), t, newAdmitter(t, base), nil, req)
			if got.Allowed || got.Rule != tt.wantRule {
				t.Fatalf("got allowed=%v %s: %s; want refused by %s", got.Allowed, got.Rule, got.Message, tt.wantRule)
			}
			if got.NodeState != tt.nodeState {
				t.Errorf("NodeState = %v, want %v (%s)", got.NodeState, tt.nodeState, got.Message)
			}
			checkNodeStateCause(t, req, got, tt.nodeState)
		})
	}
}

// checkNodeStateCause: the response carries the cause exactly when the
// result is about the Node's state, and a client reads it from the error
// the apiserver makes of the response.
func checkNodeStateCause(t *testing.T, req *admissionv1.AdmissionRequest, result admission.Result, want bool) {
	t.Helper()
	resp := admissionResponse(&admissionv1.AdmissionReview{Request: req}, result).Response
	err := webhookerrors.ToStatusErr("nodes.nodeguard.dev", resp.Result)
	if got := contract.IsNodeStateRefusal(err); got != want {
		t.Errorf("the client reads a node-state refusal: %v, want %v (status %+v)", got, want, resp.Result)
	}
	if d := resp.Result.Details; want && (d == nil || d.Name != req.Name || d.Kind != req.Resource.Resource) {
		t.Errorf("details %+v: want the request's %s %s", resp.Result.Details, req.Resource.Resource, req.Name)
	}
}

// cannedEvaluator answers every evaluation with res.
type cannedEvaluator struct{ res policy.AdmissionResult }

func (c cannedEvaluator) EvalAdmission(context.Context, *policy.AdmissionInput) (policy.AdmissionResult, error) {
	return c.res, nil
}

func TestNodeScopedPolicyDenials(t *testing.T) {
	nodeScoped := policy.Violation{Package: policy.PackageAdmission, Rule: "pool_naming", Message: "pool", NodeScoped: true}
	other := policy.Violation{Package: policy.PackageAdmission, Rule: "config_namespaces", Message: "namespace"}
	relabel := reviewtest.NodeRequest(reviewtest.AdminUser, admissionv1.Update, "", "n2", reviewtest.Node("n2", reviewtest.WithLabel(contract.PoolLabel, "gpu")), reviewtest.Node("n2"))
	for _, tt := range []struct {
		name string
		req  reviewtest.Request
		deny []policy.Violation
		want bool
	}{
		{"node-scoped denial of a Node write", relabel, []policy.Violation{nodeScoped}, true},
		{"every denial node-scoped", relabel, []policy.Violation{nodeScoped, nodeScoped}, true},
		{"one denial not node-scoped", relabel, []policy.Violation{nodeScoped, other}, false},
		{"no scope", relabel, []policy.Violation{other}, false},
		{"node-scoped denial of a ConfigMap write", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("new", reviewtest.GoodConfig), nil), []policy.Violation{nodeScoped}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			req := tt.req.Build(t)
			p := &policy.AdmissionPolicies{Engine: cannedEvaluator{policy.AdmissionResult{Deny: tt.deny}}}
			got := decideAdmission(ctx, t, newAdmitter(t, settings.Default()), p, req)
			if got.Allowed {
				t.Fatal("allowed")
			}
			if got.NodeState != tt.want {
				t.Errorf("NodeState = %v, want %v", got.NodeState, tt.want)
			}
			checkNodeStateCause(t, req, got, tt.want)
		})
	}
}

// TestShippedPoolNamingIsNodeScoped: the shipped pool_naming policy, through
// the whole review, answers with the node-state cause.
func TestShippedPoolNamingIsNodeScoped(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	engine := shippedEngine(ctx, t, testGraph())
	review := reviewOf(Validate(newAdmitter(t, settings.Default()), &policy.AdmissionPolicies{Engine: engine, Graph: testGraph()}, testMaxBody))
	// An administrator moves an assigned Node to another pool: the
	// assignment is unchanged (config_namespaces does not judge it), the
	// pool is not in its name.
	req := reviewtest.NodeRequest(reviewtest.AdminUser, admissionv1.Update, "", "n2",
		reviewtest.Node("n2", reviewtest.WithAssignment("cfg/good"), reviewtest.WithLabel(contract.PoolLabel, "gpu")),
		reviewtest.Node("n2", reviewtest.WithAssignment("cfg/good"), reviewtest.WithLabel(contract.PoolLabel, "good"))).Build(t)
	out, err := review(ctx, admissionReviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(*admissionv1.AdmissionReview).Response
	if resp.Allowed {
		t.Fatal("allowed")
	}
	if !contract.IsNodeStateRefusal(webhookerrors.ToStatusErr("nodes.nodeguard.dev", resp.Result)) {
		t.Errorf("pool_naming's refusal carries no node-state cause: %+v", resp.Result)
	}
}
