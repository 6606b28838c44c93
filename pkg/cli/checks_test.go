package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

func TestJudge(t *testing.T) {
	refOf := func(name string) contract.ConfigMapRef {
		return contract.ConfigMapRef{Namespace: testNamespace, Name: name}
	}
	tests := []struct {
		name        string
		cm          *corev1.ConfigMap
		kubelet     string
		wantProblem []string // substrings, one per problem, in order
		wantWarning string
	}{
		{"good", testConfigMap("c", goodConfig, true), "v1.37.2", nil, ""},
		{"missing", nil, "v1.37.2", []string{"ConfigMap kubelet-configs/c does not exist"}, ""},
		{"not eligible", testConfigMap("c", goodConfig, false), "v1.37.2", []string{"lacks the label nodeguard.dev/kubelet-config=true"}, ""},
		{"unknown field", testConfigMap("c", unknownField, true), "v1.37.2", []string{"nodeguard rule 6 (config-content): cannot assign kubelet-configs/c to node \"n\"", "maxPodz"}, ""},
		{"gate too new for the kubelet", testConfigMap("c", newGateConfig, true), "v1.35.1",
			[]string{`nodeguard rule 5 (feature-gates): cannot assign kubelet-configs/c to node "n" (kubelet v1.35.1): featureGates[APIServerWebhookAuthenticationToken]`}, ""},
		{"gate known to the kubelet", testConfigMap("c", newGateConfig, true), "v1.37.2", nil, ""},
		{"locked gate flipped", testConfigMap("c", lockedConfig, true), "v1.37.2", []string{"rule 5 (feature-gates)", "locked"}, ""},
		{"no kubelet version", testConfigMap("c", newGateConfig, true), "", nil, "reports no parseable kubelet version (\"\"); kubelet-configs/c was judged against every kubelet nodeguard knows"},
		{"invalid value", testConfigMap("c", invalidValue, true), "v1.37.2", []string{"holds an invalid KubeletConfiguration", "imageGCHighThresholdPercent"}, ""},
		{"mutable", mutableConfigMap("c", goodConfig), "v1.37.2", nil, "ConfigMap kubelet-configs/c is mutable: once node n has it open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newCandidate(refOf("c"), tt.cm).judge(testNode("n", tt.kubelet, nil))
			if len(tt.wantProblem) == 0 && v.refused() {
				t.Fatalf("refused: %q", v.problems)
			}
			if len(tt.wantProblem) > 0 {
				joined := strings.Join(v.problems, "\n")
				for _, want := range tt.wantProblem {
					if !strings.Contains(joined, want) {
						t.Errorf("problems %q lack %q", v.problems, want)
					}
				}
				if !strings.Contains(v.problems[0], tt.wantProblem[0]) {
					t.Errorf("first problem %q, want it to say %q", v.problems[0], tt.wantProblem[0])
				}
			}
			if got := strings.Join(v.warnings, "\n"); (tt.wantWarning == "") != (got == "") || !strings.Contains(got, tt.wantWarning) {
				t.Errorf("warnings %q, want %q", v.warnings, tt.wantWarning)
			}
		})
	}
}

func TestRuleNamesMatchTheWebhook(t *testing.T) {
	if ruleFeatureGates != string(contract.RuleFeatureGates) || ruleConfigContent != string(contract.RuleConfigContent) {
		t.Errorf("rule names %q, %q; the webhook's are %q, %q", ruleFeatureGates, ruleConfigContent, contract.RuleFeatureGates, contract.RuleConfigContent)
	}
}

// noGraph stands in for the webhook's graph, which only ConfigMap writes
// consult.
type noGraph struct{}

func (noGraph) NodesAssignedTo(string, string) []string { return nil }
func (noGraph) Node(string) (*graph.NodeInfo, bool)     { return nil, false }

// TestChecksAgreeWithTheWebhook runs each assignment through the webhook's
// own Admitter, as the apiserver would send it for the plugin's patch, and
// through the client-side checks: wherever the webhook refuses, the client
// refuses first with the same message, and it refuses more only for the
// documented reasons (missing, not eligible, invalid).
func TestChecksAgreeWithTheWebhook(t *testing.T) {
	configMaps := []*corev1.ConfigMap{
		testConfigMap("good", goodConfig, true),
		testConfigMap("newgate", newGateConfig, true),
		testConfigMap("locked", lockedConfig, true),
		testConfigMap("broken", unknownField, true),
		testConfigMap("invalid", invalidValue, true),
		testConfigMap("nokey", "", true),
		testConfigMap("plain", goodConfig, false),
		mutableConfigMap("mutable", goodConfig),
	}
	delete(configMaps[5].Data, contract.ConfigMapKey)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	byName := map[string]*corev1.ConfigMap{}
	for _, cm := range configMaps {
		byName[cm.Name] = cm
		// The webhook's informer holds eligible ConfigMaps only.
		if contract.IsEligible(cm.Labels) {
			if err := indexer.Add(cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	webhook := admission.New(config.Default, corelisters.NewConfigMapLister(indexer), noGraph{})
	stricter := map[string]bool{"invalid": true, "plain": true, "missing": true}
	refusedByWebhook := map[contract.Rule]int{}

	for _, name := range []string{"good", "newgate", "locked", "broken", "invalid", "nokey", "plain", "mutable", "missing"} {
		for _, kubelet := range []string{"v1.37.2", "v1.35.1", "v1.20.0", "", "garbage"} {
			t.Run(name+"@"+kubelet, func(t *testing.T) {
				old := testNode("n1", kubelet, nil)
				updated := testNode("n1", kubelet, assigned(testNamespace+"/"+name))
				result := webhook.Admit(context.Background(), nodeUpdate(t, updated, old))
				v := newCandidate(contract.ConfigMapRef{Namespace: testNamespace, Name: name}, byName[name]).judge(old)

				if !result.Allowed {
					refusedByWebhook[result.Rule]++
					want := fmt.Sprintf("nodeguard %s: %s", result.Rule, result.Message)
					if !v.refused() || v.problems[0] != want {
						t.Fatalf("the webhook refuses with %q; the client says %q", want, v.problems)
					}
					return
				}
				if v.refused() && !stricter[name] {
					t.Fatalf("the webhook allows; the client refuses: %q", v.problems)
				}
				if !v.refused() && !slices.Equal(v.warnings, result.Warnings) {
					t.Errorf("warnings: the webhook %q, the client %q", result.Warnings, v.warnings)
				}
			})
		}
	}
	// Both rules must have been exercised, or the comparison proved little.
	if refusedByWebhook[contract.RuleFeatureGates] == 0 || refusedByWebhook[contract.RuleConfigContent] == 0 {
		t.Errorf("the webhook refused %v; want refusals under rules 5 and 6", refusedByWebhook)
	}
}

func nodeUpdate(t *testing.T, node, old *corev1.Node) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(n *corev1.Node) runtime.RawExtension {
		data, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	return &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Name:      node.Name,
		Operation: admissionv1.Update,
		UserInfo:  authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters", "system:authenticated"}},
		Object:    raw(node),
		OldObject: raw(old),
	}
}

func mutableConfigMap(name, content string) *corev1.ConfigMap {
	cm := testConfigMap(name, content, true)
	cm.Immutable = nil
	return cm
}
