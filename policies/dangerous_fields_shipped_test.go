package policies_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// These run the shipped dangerous_fields policy as the webhook runs it: the
// engine with the shipped policies, an input built from a ConfigMap write
// and the configuration pkg/kubeletconfig decodes from it (so that what
// pkg/kubeletconfig/hardening finds reaches the policy as it does there).

const kubeletHead = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func shippedEngine(t *testing.T) (*policy.Engine, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e, err := policy.New(ctx, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e, ctx
}

// configMapUpdate is the input for an update of an eligible ConfigMap in
// kubelet-configs from old to body (old "" for none).
func configMapUpdate(t *testing.T, annotations map[string]string, body, old string) *policy.AdmissionInput {
	t.Helper()
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubelet-configs", Name: "kubelet-pool", Annotations: annotations,
			Labels: map[string]string{"nodeguard.dev/kubelet-config": "true"}},
		Data: map[string]string{"kubelet": kubeletHead + body},
	}
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	in := &policy.AdmissionInput{Request: &admissionv1.AdmissionRequest{
		UID: "u", Operation: admissionv1.Update, Namespace: cm.Namespace, Name: cm.Name,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		UserInfo: authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}, Object: runtime.RawExtension{Raw: raw},
	}}
	if in.KubeletConfig, err = kubeletconfig.DecodeConfigMap(cm); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if in.OldKubeletConfig, err = kubeletconfig.Decode([]byte(kubeletHead + old)); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// judged evaluates the shipped admission policies and returns the
// dangerous_fields denials and warnings.
func judged(t *testing.T, e *policy.Engine, ctx context.Context, in *policy.AdmissionInput) (deny, warn []string) {
	t.Helper()
	res, err := e.EvalAdmission(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Deny {
		if v.Rule == "dangerous_fields" {
			deny = append(deny, v.Message)
		}
	}
	for _, v := range res.Warn {
		if v.Rule == "dangerous_fields" {
			warn = append(warn, v.Message)
		}
	}
	return deny, warn
}

// TestKubeletPathsAreDangerous: every field that makes the kubelet execute
// or load from a path is refused by the shipped policy when a configuration
// sets or moves it, and allowed by its own name in the annotation.
func TestKubeletPathsAreDangerous(t *testing.T) {
	e, ctx := shippedEngine(t)
	for field, body := range map[string]string{
		"volumePluginDir":   "volumePluginDir: /var/lib/hostpath-volumes/flex\n",
		"staticPodPath":     "staticPodPath: /var/lib/pods\n",
		"tlsCertFile":       "tlsCertFile: /var/lib/shared/kubelet.crt\n",
		"tlsPrivateKeyFile": "tlsPrivateKeyFile: /var/lib/shared/kubelet.key\n",
		"resolvConf":        "resolvConf: /var/lib/shared/resolv.conf\n",
		"podLogsDir":        "podLogsDir: /var/lib/shared/logs\n",
	} {
		t.Run(field, func(t *testing.T) {
			deny, _ := judged(t, e, ctx, configMapUpdate(t, nil, body, ""))
			if len(deny) != 1 || !strings.Contains(deny[0], "kubelet-configs/kubelet-pool sets "+field+":") {
				t.Fatalf("denials %q, want one naming %s", deny, field)
			}
			if deny, _ := judged(t, e, ctx, configMapUpdate(t, nil, body+"maxPods: 50\n", body)); len(deny) > 0 {
				t.Fatalf("an edit that keeps %s: %q", field, deny)
			}
			deny, warn := judged(t, e, ctx, configMapUpdate(t, map[string]string{contract.AllowDangerousFieldsAnnotation: field}, body, ""))
			if len(deny) > 0 || len(warn) != 1 || !strings.Contains(warn[0], "allowed by annotation") {
				t.Fatalf("allowed by name: denials %q, warnings %q", deny, warn)
			}
		})
	}
}

// TestEveryGoRuleReachesThePolicy: each rule of pkg/kubeletconfig/hardening
// is a denial of the shipped policy, citing its CIS recommendation.
func TestEveryGoRuleReachesThePolicy(t *testing.T) {
	e, ctx := shippedEngine(t)
	for field, c := range map[string]struct{ body, cis string }{
		"authentication.anonymous.enabled":            {"authentication:\n  anonymous:\n    enabled: true\n", "4.2.1"},
		"authorization.mode":                          {"authorization:\n  mode: AlwaysAllow\n", "4.2.2"},
		"readOnlyPort":                                {"readOnlyPort: 10255\n", "4.2.4"},
		"featureGates.RotateKubeletServerCertificate": {"featureGates:\n  RotateKubeletServerCertificate: false\n", "4.2.11"},
		"tlsMinVersion":                               {"tlsMinVersion: VersionTLS10\n", "4.2.12"},
		"podPidsLimit":                                {"podPidsLimit: 0\n", "4.2.13"},
		"enableDebuggingHandlers":                     {"enableDebuggingHandlers: true\n", ""},
		"staticPodURL":                                {"staticPodURL: http://198.51.100.7/pods\n", ""},
	} {
		deny, _ := judged(t, e, ctx, configMapUpdate(t, nil, c.body, ""))
		if len(deny) != 1 || !strings.Contains(deny[0], " sets "+field+":") || (c.cis != "" && !strings.Contains(deny[0], "CIS Kubernetes Benchmark "+c.cis)) {
			t.Errorf("%s: denials %q", field, deny)
		}
	}
	if _, warn := judged(t, e, ctx, configMapUpdate(t, nil, "failSwapOn: false\n", "")); len(warn) != 1 {
		t.Errorf("failSwapOn: warnings %q", warn)
	}
}

// TestAllowanceMatchesTheAgent: the policy and the agent
// (hardening.ParseAllowance) read the allowance annotation alike.
func TestAllowanceMatchesTheAgent(t *testing.T) {
	e, ctx := shippedEngine(t)
	body := "readOnlyPort: 10255\ntlsMinVersion: VersionTLS10\nvolumePluginDir: /srv/flex\n"
	cfg, err := kubeletconfig.Decode([]byte(kubeletHead + body))
	if err != nil {
		t.Fatal(err)
	}
	for _, annotation := range []string{"", "yes", "true", "readOnlyPort", " tlsMinVersion , volumePluginDir", "readOnlyPort,,true", "TRUE", "readonlyport"} {
		deny, _ := judged(t, e, ctx, configMapUpdate(t, map[string]string{contract.AllowDangerousFieldsAnnotation: annotation}, body, ""))
		var policyRefused []string
		for _, m := range deny {
			for _, f := range []string{"readOnlyPort", "tlsMinVersion", "volumePluginDir"} {
				if strings.Contains(m, " sets "+f+":") {
					policyRefused = append(policyRefused, f)
				}
			}
		}
		slices.Sort(policyRefused)
		var agentRefused []string
		for _, f := range hardening.Judge(cfg, nil, hardening.Options{}, hardening.ParseAllowance(annotation)).Refused {
			agentRefused = append(agentRefused, f.Field)
		}
		if !slices.Equal(policyRefused, agentRefused) {
			t.Errorf("annotation %q: the policy refuses %v, the agent %v", annotation, policyRefused, agentRefused)
		}
	}
}

// TestRuntimeEndpointsMatchTheAgent: the policy's default socket allow-list
// is the agent's.
func TestRuntimeEndpointsMatchTheAgent(t *testing.T) {
	e, ctx := shippedEngine(t)
	for _, endpoint := range hardening.DefaultRuntimeEndpoints {
		if deny, _ := judged(t, e, ctx, configMapUpdate(t, nil, "containerRuntimeEndpoint: "+endpoint+"\n", "")); len(deny) > 0 {
			t.Errorf("%s: %q", endpoint, deny)
		}
	}
	if deny, _ := judged(t, e, ctx, configMapUpdate(t, nil, "containerRuntimeEndpoint: unix:///tmp/x.sock\n", "")); len(deny) != 1 {
		t.Errorf("an unknown socket: %q", deny)
	}
}
