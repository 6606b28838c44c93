package admission

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// testPolicies judge what the review passes them: the decoded
// configurations (new and old), and the requesting node with its kubelet
// version from the graph.
const testPolicies = `package nodeguard.admission

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
type policyGraph struct{ fakeGraph }

func (policyGraph) CanReadConfigMap(string, string, string) bool { return false }

type countingEvaluator struct {
	next  PolicyEvaluator
	calls atomic.Int32
}

func (c *countingEvaluator) EvalAdmission(ctx context.Context, in *policy.AdmissionInput) (policy.AdmissionResult, error) {
	c.calls.Add(1)
	return c.next.EvalAdmission(ctx, in)
}

// failingEvaluator fails every evaluation as a policy error does.
type failingEvaluator struct{}

func (failingEvaluator) EvalAdmission(context.Context, *policy.AdmissionInput) (policy.AdmissionResult, error) {
	return policy.AdmissionResult{}, &policy.EvalError{Package: policy.PackageAdmission, Err: errorString("eval_conflict_error: complete rules must not produce multiple outputs")}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func newTestEngine(t *testing.T, g policy.GraphReader) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test.rego"), []byte(testPolicies), 0o644); err != nil {
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

func testGraph() policyGraph {
	return policyGraph{fakeGraph{versions: map[string]string{"n1": "v1.37.2"}}}
}

func TestPoliciesCombineWithBuiltInRules(t *testing.T) {
	const C, U = admissionv1.Create, admissionv1.Update
	forbidStatic := &config.Settings{ForbiddenDynamicFields: []string{"staticPodPath"}, ExemptUsers: []string{"break-glass"}}
	engine := newTestEngine(t, testGraph())
	tests := []struct {
		name      string
		req       request
		wantRule  contract.Rule // empty: allowed
		wantText  string        // in the message when refused
		warnings  []string      // each in some warning
		evaluated bool
	}{
		{"built-in refusal stays, policies not consulted", cmReq(adminUser, C, eligibleCM("forbidden", unknownField), nil), contract.RuleConfigContent, "maxPodz", nil, false},
		{"built-in refusal of a node stays", nodeReq(n1User, U, "status", "n2", mkNode("n2"), mkNode("n2")), contract.RuleOwnNode, `Node "n2"`, nil, false},
		{"policy deny wins over built-in allow", cmReq(adminUser, C, eligibleCM("forbidden", goodConfig), nil),
			"policy nodeguard.admission", "no ConfigMaps named forbidden; policy nodeguard.admission/max_pods: maxPods 110 is above 100", nil, true},
		{"denials of one policy are listed once", cmReq(adminUser, C, eligibleCM("big", manyPods), nil),
			"policy nodeguard.admission/max_open_files", "maxOpenFiles is set; policy nodeguard.admission/max_pods: maxPods 200 is above 100", nil, true},
		{"policy warnings join built-in warnings", cmReq(adminUser, U, eligibleCM("good", fewPods), eligibleCM("good", goodConfig)), "", "",
			[]string{"reports no parseable kubelet version", "nodeguard policy nodeguard.admission/pods_changed: maxPods goes from 110 to 60"}, true},
		{"warnings stay with a policy denial", cmReq(adminUser, U, eligibleCM("good", manyPods), eligibleCM("good", fewPods)),
			"policy nodeguard.admission/max_open_files", "maxPods 200", []string{"maxPods goes from 60 to 200"}, true},
		{"an ineligible ConfigMap has no configuration", cmReq(adminUser, C, plainCM("app", goodConfig), nil), "", "", []string{"policy nodeguard.admission/no_config"}, true},
		{"an exempt user's config is decoded for the policies", cmReq(exempt, C, eligibleCM("staticpods", manyPods+"staticPodPath: /x\n"), nil),
			"policy nodeguard.admission/max_open_files", "maxPods 200", nil, true},
		{"the node and its kubelet version come from the graph", nodeReq(n1User, U, "status", "n1", mkNode("n1"), mkNode("n1")),
			"policy nodeguard.admission/status", "node n1 on kubelet v1.37.2 may not report status", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			counting := &countingEvaluator{next: engine}
			policies := &Policies{Engine: counting, Graph: testGraph()}
			got := admitSafely(ctx, newAdmitter(t, forbidStatic), policies, tt.req.build(t))
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

func TestPolicyEvaluationFailure(t *testing.T) {
	req := cmReq(adminUser, admissionv1.Create, eligibleCM("new", goodConfig), nil)
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
			got := admitSafely(ctx, newAdmitter(t, config.Default()), &Policies{Engine: failingEvaluator{}, FailurePolicy: tt.failure}, req.build(t))
			if got.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", got.Allowed, tt.allowed, got)
			}
			text := got.Message
			if got.Allowed {
				text = strings.Join(got.Warnings, "\n")
			} else if got.Rule != RulePolicyEvaluation {
				t.Errorf("rule = %q, want %q", got.Rule, RulePolicyEvaluation)
			}
			if !strings.Contains(text, "eval_conflict_error") {
				t.Errorf("the error is not named: %q", text)
			}
		})
	}
}

func TestReviewFuncWithPolicies(t *testing.T) {
	engine := newTestEngine(t, testGraph())
	for _, tt := range []struct {
		name    string
		req     request
		mode    server.DecisionLogMode
		allowed bool
		message string
		warning string
		logged  bool
	}{
		{"policy refusal", cmReq(adminUser, admissionv1.Create, eligibleCM("big", manyPods), nil), server.DecisionLogDenials, false,
			"nodeguard policy nodeguard.admission/max_open_files: maxOpenFiles is set; policy nodeguard.admission/max_pods: maxPods 200 is above 100", "", true},
		{"built-in refusal", nodeReq(n1User, admissionv1.Update, "", "n2", mkNode("n2"), mkNode("n2")), server.DecisionLogDenials, false,
			"nodeguard rule 1 (own-node): ", "", true},
		{"allowed with a policy warning, denials only", cmReq(adminUser, admissionv1.Create, plainCM("app", goodConfig), nil), server.DecisionLogDenials, true,
			"", "nodeguard policy nodeguard.admission/no_config: no kubelet configuration", false},
		{"allowed, all logged", cmReq(adminUser, admissionv1.Create, plainCM("app", goodConfig), nil), server.DecisionLogAll, true, "", "", true},
		{"refused, log off", cmReq(adminUser, admissionv1.Create, eligibleCM("big", manyPods), nil), server.DecisionLogOff, false, "nodeguard policy", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			review := ReviewFunc(newAdmitter(t, config.Default()), nil,
				WithPolicies(&Policies{Engine: engine, Graph: testGraph()}),
				WithDecisionLog(server.DecisionLog{Mode: tt.mode, Sample: 1}))
			resp, err := review(klog.NewContext(context.Background(), logger), reviewBody(t, "admission.k8s.io/v1", tt.req.build(t)))
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
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if logged := strings.Contains(logs, "INFO Decision "); logged != tt.logged {
				t.Errorf("decision logged = %v, want %v; log:\n%s", logged, tt.logged, logs)
			}
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
func BenchmarkReviewWithShippedPolicies(b *testing.B) {
	node := mkNode("n1", withAssignment("cfg/good"), withLabel("nodeguard.dev/pool", "good"))
	for i := range 40 {
		node.Status.Images = append(node.Status.Images, corev1Image(i))
	}
	t := &testing.T{}
	body := reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", node, node).build(t))
	engine, err := policy.New(context.Background(), policy.Options{Graph: testGraph()})
	if err != nil || engine.Ready() != nil {
		b.Fatal(err, engine.Ready())
	}
	for _, bc := range []struct {
		name string
		opts []ReviewOption
	}{
		{"built-in", nil},
		{"built-in+shipped-policies", []ReviewOption{WithPolicies(&Policies{Engine: engine, Graph: testGraph()})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			review := ReviewFunc(newAdmitter(t, config.Default()), nil, bc.opts...)
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
