package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
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
		{"mutable and refused", mutableConfigMap("c", newGateConfig), "v1.35.1", []string{"nodeguard rule 5 (feature-gates)"}, "ConfigMap kubelet-configs/c is mutable"},
		{"no key", noKeyConfigMap("c"), "v1.37.2", []string{`nodeguard rule 6 (config-content): cannot assign kubelet-configs/c to node "n": ConfigMap kubelet-configs/c`, "data[kubelet] is missing"}, ""},
		{"unparseable version, no kubelet can run it", testConfigMap("c", unknownGateConfig, true), "garbage",
			[]string{`nodeguard rule 5 (feature-gates): cannot assign kubelet-configs/c to node "n": it reports no parseable kubelet version ("garbage"), and no kubelet nodeguard knows`}, ""},
		{"unparseable version and invalid", testConfigMap("c", invalidValue, true), "garbage", []string{"holds an invalid KubeletConfiguration"}, "reports no parseable kubelet version (\"garbage\")"},
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

func mutableConfigMap(name, content string) *corev1.ConfigMap {
	cm := testConfigMap(name, content, true)
	cm.Immutable = nil
	return cm
}

// noKeyConfigMap is eligible, but holds no configuration under the key.
func noKeyConfigMap(name string) *corev1.ConfigMap {
	cm := testConfigMap(name, "", true)
	delete(cm.Data, contract.ConfigMapKey)
	return cm
}
