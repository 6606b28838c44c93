package kubeletconfig

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const (
	goodConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	// newGateConfig names a gate that kubelets before 1.37 do not know.
	newGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
	// lockedConfig flips a gate locked to true at 1.37.
	lockedConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  CPUManagerPolicyOptions: false\n"
	// unknownGateConfig names a gate no kubelet knows.
	unknownGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n"
)

func TestJudgeAssignment(t *testing.T) {
	ref := contract.ConfigMapRef{Namespace: "kubelet-configs", Name: "c"}
	candidate := func(content string, mutable bool) Candidate {
		cfg, err := Decode([]byte(content))
		if err != nil {
			t.Fatalf("decoding the fixture: %v", err)
		}
		return Candidate{ConfigMap: ref, Config: cfg, Mutable: mutable}
	}
	decodeErr := ConfigMapError(ref.Namespace, ref.Name, contract.ConfigMapKey, errors.New("unknown field \"maxPodz\""))
	mutable := MutableConfigMapWarning("kubelet-configs/c", "n")
	judgedByEveryKubelet := func(reported string) string {
		return `node n reports no parseable kubelet version ("` + reported + `"); kubelet-configs/c was judged against every kubelet nodeguard knows (` + KnownKubelets() + `), not its own`
	}
	tests := []struct {
		name          string
		candidate     Candidate
		kubelet       string
		wantRule      contract.Rule // "" when not refused
		wantNodeState bool
		wantMessage   string // prefix
		wantWarnings  []string
		wantVersion   string // "" when the version does not parse
	}{
		{"good", candidate(goodConfig, false), "v1.37.2", "", false, "", nil, "1.37.2"},
		{"mutable", candidate(goodConfig, true), "v1.37.2", "", false, "", []string{mutable}, "1.37.2"},
		{"does not decode", Candidate{ConfigMap: ref, Err: decodeErr, Mutable: true}, "v1.37.2", contract.RuleConfigContent, false,
			`cannot assign kubelet-configs/c to node "n": ConfigMap kubelet-configs/c data[kubelet]: unknown field "maxPodz"`, nil, ""},
		{"does not decode, no version", Candidate{ConfigMap: ref, Err: decodeErr}, "", contract.RuleConfigContent, false,
			`cannot assign kubelet-configs/c to node "n": ConfigMap`, nil, ""},
		{"gate too new for the kubelet", candidate(newGateConfig, true), "v1.35.1", contract.RuleFeatureGates, true,
			`cannot assign kubelet-configs/c to node "n" (kubelet v1.35.1): featureGates[APIServerWebhookAuthenticationToken]`, []string{mutable}, "1.35.1"},
		{"gate known to the kubelet", candidate(newGateConfig, false), "v1.37.2", "", false, "", nil, "1.37.2"},
		{"locked gate flipped", candidate(lockedConfig, false), "v1.37.2", contract.RuleFeatureGates, true,
			`cannot assign kubelet-configs/c to node "n" (kubelet v1.37.2): featureGates[CPUManagerPolicyOptions]`, nil, "1.37.2"},
		{"gates on a kubelet older than the data", candidate(newGateConfig, false), "v1.20.0", contract.RuleFeatureGates, true,
			`cannot assign kubelet-configs/c to node "n" (kubelet v1.20.0)`, nil, "1.20.0"},
		{"no gates on a kubelet older than the data", candidate(goodConfig, false), "v1.20.0", "", false, "", nil, "1.20.0"},
		{"no kubelet version, some kubelet can run it", candidate(newGateConfig, false), "", "", false, "", []string{judgedByEveryKubelet("")}, ""},
		{"unparseable version, mutable", candidate(goodConfig, true), "garbage", "", false, "", []string{mutable, judgedByEveryKubelet("garbage")}, ""},
		{"unparseable version, no kubelet can run it", candidate(unknownGateConfig, true), "garbage", contract.RuleFeatureGates, false,
			`cannot assign kubelet-configs/c to node "n": it reports no parseable kubelet version ("garbage"), and no kubelet nodeguard knows (` + KnownKubelets() + `) can run it: featureGates[NoSuchGate]`, []string{mutable}, ""},
		{"a gate no kubelet knows, on a parseable version", candidate(unknownGateConfig, false), "v1.37.2", contract.RuleFeatureGates, true,
			`cannot assign kubelet-configs/c to node "n" (kubelet v1.37.2): featureGates[NoSuchGate]`, nil, "1.37.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := JudgeAssignment(tt.candidate, "n", tt.kubelet)
			if j.Refused != (tt.wantRule != "") || j.Rule != tt.wantRule || j.NodeState != tt.wantNodeState {
				t.Fatalf("refused %v under %q (node state %v): %q; want refused %v under %q (node state %v)",
					j.Refused, j.Rule, j.NodeState, j.Message, tt.wantRule != "", tt.wantRule, tt.wantNodeState)
			}
			if !strings.HasPrefix(j.Message, tt.wantMessage) || (tt.wantMessage == "") != (j.Message == "") {
				t.Errorf("message %q, want it to start with %q", j.Message, tt.wantMessage)
			}
			if !slices.Equal(j.Warnings, tt.wantWarnings) {
				t.Errorf("warnings %q, want %q", j.Warnings, tt.wantWarnings)
			}
			got := ""
			if j.KubeletVersion != nil {
				got = j.KubeletVersion.String()
			}
			if tt.wantVersion != "" && got != tt.wantVersion || tt.wantVersion == "" && j.KubeletVersion != nil && !j.Refused {
				t.Errorf("kubelet version %q, want %q", got, tt.wantVersion)
			}
			wantRefusal := ""
			if j.Refused {
				wantRefusal = "nodeguard " + string(tt.wantRule) + ": " + j.Message
			}
			if j.Refusal() != wantRefusal {
				t.Errorf("Refusal() = %q, want %q", j.Refusal(), wantRefusal)
			}
		})
	}
}

func TestCheckEveryKnownKubelet(t *testing.T) {
	for content, wantErrs := range map[string]bool{goodConfig: false, newGateConfig: false, unknownGateConfig: true} {
		cfg, err := Decode([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		if errs := CheckEveryKnownKubelet(cfg); (len(errs) > 0) != wantErrs {
			t.Errorf("CheckEveryKnownKubelet(%q) = %v, want errors: %v", content, errs, wantErrs)
		}
	}
	// The range of the feature-gate data, as messages name it.
	if got := KnownKubelets(); !regexp.MustCompile(`^1\.[0-9]+ to 1\.[0-9]+$`).MatchString(got) {
		t.Errorf("KnownKubelets() = %q, want \"<major>.<minor> to <major>.<minor>\"", got)
	}
}
