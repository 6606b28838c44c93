package admission

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	webhookerrors "k8s.io/apiserver/pkg/admission/plugin/webhook/errors"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// TestNodeStateRefusals: a refusal that concerns the target Node's own
// reported state carries the cause that makes a rollout skip the Node; one
// that concerns what is assigned (or anything else) does not, so that it
// still fails the pool.
func TestNodeStateRefusals(t *testing.T) {
	const C, U = admissionv1.Create, admissionv1.Update
	base := config.Default()
	for _, tt := range []struct {
		name      string
		req       request
		wantRule  contract.Rule
		nodeState bool
	}{
		{"rule 5: a gate the node's kubelet does not know", nodeReq(adminUser, U, "", "n2",
			mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate")), mkNode("n2", withKubelet("v1.35.1"))), contract.RuleFeatureGates, true},
		{"rule 5: a gate locked at the node's kubelet version", nodeReq(adminUser, U, "", "n2",
			mkNode("n2", withAssignment("cfg/locked")), mkNode("n2")), contract.RuleFeatureGates, true},
		{"rule 5 at creation", nodeReq(adminUser, C, "", "n2", mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate")), nil), contract.RuleFeatureGates, true},
		{"rule 5: a gate no kubelet knows, on a node without a parseable version", nodeReq(adminUser, U, "", "n2",
			mkNode("n2", withKubelet("garbage"), withAssignment("cfg/nosuchgate")), mkNode("n2", withKubelet("garbage"))), contract.RuleFeatureGates, false},
		{"rule 5: an edit that breaks an assigned node", cmReq(adminUser, U, eligibleCM("good", newGateConfig), eligibleCM("good", goodConfig)), contract.RuleFeatureGates, false},
		{"rule 6: an assignment that does not decode", nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/broken")), mkNode("n2")), contract.RuleConfigContent, false},
		{"rule 6: a ConfigMap that does not decode", cmReq(adminUser, C, eligibleCM("new", unknownField), nil), contract.RuleConfigContent, false},
		{"rule 2: a node labels itself into a pool", nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel(contract.PoolLabel, "blue")), mkNode("n1")), contract.RuleNodeRestriction, false},
		{"rule 3: a node assigns itself", nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/good")), mkNode("n1")), contract.RuleConfigSource, false},
		{"malformed", nodeReq(adminUser, U, "", "n1", mkNode("n1"), nil), RuleMalformed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req.build(t)
			got := newAdmitter(t, base).Admit(context.Background(), req)
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
func checkNodeStateCause(t *testing.T, req *admissionv1.AdmissionRequest, result Result, want bool) {
	t.Helper()
	resp := response(req, result)
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
	relabel := nodeReq(adminUser, admissionv1.Update, "", "n2", mkNode("n2", withLabel(contract.PoolLabel, "gpu")), mkNode("n2"))
	for _, tt := range []struct {
		name string
		req  request
		deny []policy.Violation
		want bool
	}{
		{"node-scoped denial of a Node write", relabel, []policy.Violation{nodeScoped}, true},
		{"every denial node-scoped", relabel, []policy.Violation{nodeScoped, nodeScoped}, true},
		{"one denial not node-scoped", relabel, []policy.Violation{nodeScoped, other}, false},
		{"no scope", relabel, []policy.Violation{other}, false},
		{"node-scoped denial of a ConfigMap write", cmReq(adminUser, admissionv1.Create, eligibleCM("new", goodConfig), nil), []policy.Violation{nodeScoped}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			req := tt.req.build(t)
			p := &Policies{Engine: cannedEvaluator{policy.AdmissionResult{Deny: tt.deny}}}
			got := admitSafely(ctx, newAdmitter(t, config.Default()), p, req)
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
	engine, err := policy.New(ctx, policy.Options{Graph: testGraph()})
	if err != nil || engine.Ready() != nil {
		t.Fatal(err, engine.Ready())
	}
	review := ReviewFunc(newAdmitter(t, config.Default()), nil, WithPolicies(&Policies{Engine: engine, Graph: testGraph()}))
	// An administrator moves an assigned Node to another pool: the
	// assignment is unchanged (config_namespaces does not judge it), the
	// pool is not in its name.
	req := nodeReq(adminUser, admissionv1.Update, "", "n2",
		mkNode("n2", withAssignment("cfg/good"), withLabel(contract.PoolLabel, "gpu")),
		mkNode("n2", withAssignment("cfg/good"), withLabel(contract.PoolLabel, "good"))).build(t)
	out, err := review(ctx, reviewBody(t, "admission.k8s.io/v1", req))
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
