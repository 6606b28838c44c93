package server

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// testPolicies judge what the review passes them: the decoded
// configurations (new and old), and the requesting node with its kubelet
// version from the graph.
const admissionTestPolicies = `package nodeguard.admission

deny contains {"rule": "max_pods", "msg": sprintf("maxPods %d is above 100", [input.nodeguard.kubeletConfig.maxPods])} if {
	input.request.resource.resource == "configmaps"
	input.nodeguard.kubeletConfig.maxPods > 100
}

deny contains {"rule": "max_open_files", "msg": "maxOpenFiles is set"} if {
	input.request.resource.resource == "configmaps"
	input.nodeguard.kubeletConfig.maxOpenFiles
}

deny contains "no ConfigMaps named forbidden" if {
	input.request.resource.resource == "configmaps"
	input.request.name == "forbidden"
}

warn contains {"rule": "pods_changed", "msg": sprintf("maxPods goes from %d to %d", [input.nodeguard.oldKubeletConfig.maxPods, input.nodeguard.kubeletConfig.maxPods])} if {
	input.request.resource.resource == "configmaps"
	input.nodeguard.oldKubeletConfig.maxPods != input.nodeguard.kubeletConfig.maxPods
}

warn contains {"rule": "no_config", "msg": "no kubelet configuration"} if {
	input.request.resource.resource == "configmaps"
	input.nodeguard.kubeletConfig == null
}

deny contains {"rule": "status", "msg": sprintf("node %s on kubelet %s may not report status", [input.nodeguard.node, input.nodeguard.kubeletVersion])} if {
	input.request.resource.resource == "nodes"
	input.request.subResource == "status"
	input.nodeguard.node == "n1"
	input.nodeguard.kubeletVersion == "v1.37.2"
}
`

const (
	fewPods  = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 60\n"
	manyPods = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 200\nmaxOpenFiles: 1000\n"
)

// policyGraph is the graph as the policy engine reads it.
type policyGraph struct{ reviewtest.FakeGraph }

func (policyGraph) CanReadConfigMap(string, string, string) bool { return false }

// failingEvaluator fails every evaluation as a policy error does.
type failingAdmissionEvaluator struct{}

func (failingAdmissionEvaluator) EvalAdmission(context.Context, *policy.AdmissionInput) (policy.AdmissionResult, error) {
	return policy.AdmissionResult{}, &policy.EvalError{Package: policy.PackageAdmission, Err: errorString("eval_conflict_error: complete rules must not produce multiple outputs")}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func testGraph() policyGraph {
	return policyGraph{reviewtest.FakeGraph{Versions: map[string]string{"n1": "v1.37.2"}}}
}

func TestAdmissionPoliciesCombineWithBuiltInRules(t *testing.T) {
	const C, U = admissionv1.Create, admissionv1.Update
	forbidStatic := &settings.Settings{ForbiddenDynamicFields: []string{"staticPodPath"}, ExemptUsers: []string{"break-glass"}}
	engine := newTestEngine(t, testGraph(), admissionTestPolicies)
	tests := []struct {
		name      string
		req       reviewtest.Request
		wantRule  contract.Rule // empty: allowed
		wantText  string        // in the message when refused
		warnings  []string      // each in some warning
		evaluated bool
	}{
		{"built-in refusal stays, policies not consulted", reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("forbidden", reviewtest.UnknownField), nil), contract.RuleConfigContent, "maxPodz", nil, false},
		{"built-in refusal of a node stays", reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")), contract.RuleOwnNode, `Node "n2"`, nil, false},
		{"policy deny wins over built-in allow", reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("forbidden", reviewtest.GoodConfig), nil),
			"policy nodeguard.admission", "no ConfigMaps named forbidden; policy nodeguard.admission/max_pods: maxPods 110 is above 100", nil, true},
		{"denials of one policy are listed once", reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("big", manyPods), nil),
			"policy nodeguard.admission/max_open_files", "maxOpenFiles is set; policy nodeguard.admission/max_pods: maxPods 200 is above 100", nil, true},
		{"policy warnings join built-in warnings", reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", fewPods), reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig)), "", "",
			[]string{"reports no parseable kubelet version", "nodeguard policy nodeguard.admission/pods_changed: maxPods goes from 110 to 60"}, true},
		{"warnings stay with a policy denial", reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", manyPods), reviewtest.EligibleConfigMap("good", fewPods)),
			"policy nodeguard.admission/max_open_files", "maxPods 200", []string{"maxPods goes from 60 to 200"}, true},
		{"an ineligible ConfigMap has no configuration", reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.PlainConfigMap("app", reviewtest.GoodConfig), nil), "", "", []string{"policy nodeguard.admission/no_config"}, true},
		{"an exempt user's config is decoded for the policies", reviewtest.ConfigMapRequest(reviewtest.Exempt, C, reviewtest.EligibleConfigMap("staticpods", manyPods+"staticPodPath: /x\n"), nil),
			"policy nodeguard.admission/max_open_files", "maxPods 200", nil, true},
		{"the node and its kubelet version come from the graph", reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")),
			"policy nodeguard.admission/status", "node n1 on kubelet v1.37.2 may not report status", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			counting := &countingEvaluator{next: engine}
			policies := &policy.AdmissionPolicies{Engine: counting, Graph: testGraph()}
			got := decideAdmission(ctx, t, newAdmitter(t, forbidStatic), policies, tt.req.Build(t))
			if tt.wantRule == "" && !got.Allowed {
				t.Fatalf("refused: %s: %s", got.Rule, got.Message)
			}
			if tt.wantRule != "" && (got.Allowed || got.Rule != tt.wantRule || !strings.Contains(got.Message, tt.wantText)) {
				t.Fatalf("got allowed=%v %s: %q; want %s mentioning %q", got.Allowed, got.Rule, got.Message, tt.wantRule, tt.wantText)
			}
			for _, w := range tt.warnings {
				if !strings.Contains(strings.Join(got.Warnings, "\n"), w) {
					t.Errorf("warnings %q do not mention %q", got.Warnings, w)
				}
			}
			if evaluated := counting.calls.Load() > 0; evaluated != tt.evaluated {
				t.Errorf("policies evaluated = %v, want %v", evaluated, tt.evaluated)
			}
		})
	}
}

func TestAdmissionPolicyEvaluationFailure(t *testing.T) {
	req := reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("new", reviewtest.GoodConfig), nil)
	for _, tt := range []struct {
		name    string
		failure policy.FailurePolicy
		allowed bool
	}{
		{"fail closed refuses", policy.FailClosed, false},
		{"ignore admits with a warning", policy.NoOpinion, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			got := decideAdmission(ctx, t, newAdmitter(t, settings.Default()), &policy.AdmissionPolicies{Engine: failingAdmissionEvaluator{}, FailurePolicy: tt.failure}, req.Build(t))
			if got.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", got.Allowed, tt.allowed, got)
			}
			text := got.Message
			if got.Allowed {
				text = strings.Join(got.Warnings, "\n")
			} else if got.Rule != policy.RuleEvaluationFailed {
				t.Errorf("rule = %q, want %q", got.Rule, policy.RuleEvaluationFailed)
			}
			if !strings.Contains(text, "eval_conflict_error") {
				t.Errorf("the error is not named: %q", text)
			}
		})
	}
}

func TestValidateWithPolicies(t *testing.T) {
	engine := newTestEngine(t, testGraph(), admissionTestPolicies)
	for _, tt := range []struct {
		name    string
		req     reviewtest.Request
		mode    DecisionLogMode
		allowed bool
		message string
		warning string
		logged  bool
	}{
		{"policy refusal", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("big", manyPods), nil), DecisionLogDenials, false,
			"nodeguard policy nodeguard.admission/max_open_files: maxOpenFiles is set; policy nodeguard.admission/max_pods: maxPods 200 is above 100", "", true},
		{"built-in refusal", reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")), DecisionLogDenials, false,
			"nodeguard rule 1 (own-node): ", "", true},
		{"allowed with a policy warning, denials only", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.PlainConfigMap("app", reviewtest.GoodConfig), nil), DecisionLogDenials, true,
			"", "nodeguard policy nodeguard.admission/no_config: no kubelet configuration", false},
		{"allowed, all logged", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.PlainConfigMap("app", reviewtest.GoodConfig), nil), DecisionLogAll, true, "", "", true},
		{"refused, log off", reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("big", manyPods), nil), DecisionLogOff, false, "nodeguard policy", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			review := reviewOf(Validate(newAdmitter(t, settings.Default()), &policy.AdmissionPolicies{Engine: engine, Graph: testGraph()}, testMaxBody, WithDecisionLog(DecisionLog{Mode: tt.mode, Sample: 1})))
			resp, err := review(klog.NewContext(context.Background(), logger), admissionReviewBody(t, "admission.k8s.io/v1", tt.req.Build(t)))
			if err != nil {
				t.Fatal(err)
			}
			r := resp.(*admissionv1.AdmissionReview).Response
			if r.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", r.Allowed, tt.allowed, r.Result)
			}
			if !tt.allowed && (r.Result == nil || r.Result.Code != 403 || !strings.HasPrefix(r.Result.Message, tt.message)) {
				t.Errorf("refusal = %+v, want a message starting %q", r.Result, tt.message)
			}
			if tt.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tt.warning) {
				t.Errorf("warnings %q lack %q", r.Warnings, tt.warning)
			}
			logs := checkDecisionLogged(t, logger, tt.logged)
			if tt.logged && (!strings.Contains(logs, `user="admin"`) && !strings.Contains(logs, `user="system:node:n1"`) || !strings.Contains(logs, "latency=")) {
				t.Errorf("decision line lacks the user or the latency:\n%s", logs)
			}
		})
	}
}

var _ policy.GraphReader = policyGraph{}

// BenchmarkReviewWithShippedPolicies compares a kubelet's Node status
// update, the most frequent admission review, decided by the built-in rules
// alone and with the shipped policies after them, decoding included.
func BenchmarkValidateWithShippedPolicies(b *testing.B) {
	node := reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"), reviewtest.WithLabel("nodeguard.dev/pool", "good"))
	for i := range 40 {
		node.Status.Images = append(node.Status.Images, reviewtest.Image(i))
	}
	t := &testing.T{}
	body := admissionReviewBody(t, "admission.k8s.io/v1", reviewtest.NodeRequest(reviewtest.N1User, admissionv1.Update, "status", "n1", node, node).Build(t))
	engine := shippedEngine(context.Background(), b, testGraph())
	for _, bc := range []struct {
		name     string
		policies *policy.AdmissionPolicies
	}{
		{"built-in", nil},
		{"built-in+shipped-policies", &policy.AdmissionPolicies{Engine: engine, Graph: testGraph()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			review := reviewOf(Validate(newAdmitter(t, settings.Default()), bc.policies, testMaxBody))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := review(context.Background(), body)
				if err != nil || !resp.(*admissionv1.AdmissionReview).Response.Allowed {
					b.Fatal(err, resp)
				}
			}
		})
	}
}
