package hardening

import (
	"slices"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func decode(t *testing.T, body string) *kubeletconfigv1beta1.KubeletConfiguration {
	t.Helper()
	cfg, err := kubeletconfig.Decode([]byte(head + body))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func fields(found []Finding) []string {
	var names []string
	for _, f := range found {
		names = append(names, f.Field)
	}
	return names
}

// The cases every rule is known by: the setting it refuses, and one of the
// same field it lets through.
var ruleCases = []struct {
	field, refused, fine, cis string
}{
	{"authentication.anonymous.enabled", "authentication:\n  anonymous:\n    enabled: true\n", "authentication:\n  anonymous:\n    enabled: false\n", "4.2.1"},
	{"authorization.mode", "authorization:\n  mode: AlwaysAllow\n", "authorization:\n  mode: Webhook\n", "4.2.2"},
	{"authentication.x509.clientCAFile", "authentication:\n  x509:\n    clientCAFile: /var/lib/other/ca.crt\n", "maxPods: 10\n", "4.2.3"},
	{"authentication.webhook.enabled", "authentication:\n  webhook:\n    enabled: false\n", "authentication:\n  webhook:\n    enabled: true\n", "4.2.3"},
	{"readOnlyPort", "readOnlyPort: 10255\n", "readOnlyPort: 0\n", "4.2.4"},
	{"makeIPTablesUtilChains", "makeIPTablesUtilChains: false\n", "makeIPTablesUtilChains: true\n", "4.2.6"},
	{"featureGates.RotateKubeletServerCertificate", "featureGates:\n  RotateKubeletServerCertificate: false\n", "featureGates:\n  RotateKubeletServerCertificate: true\n", "4.2.11"},
	{"tlsCipherSuites", "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_RC4_128_SHA]\n", "tlsCipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256]\n", "4.2.12"},
	{"tlsMinVersion", "tlsMinVersion: VersionTLS11\n", "tlsMinVersion: VersionTLS12\n", "4.2.12"},
	{"podPidsLimit", "podPidsLimit: -1\n", "podPidsLimit: 4096\n", "4.2.13"},
	{"enableDebuggingHandlers", "enableDebuggingHandlers: true\n", "enableDebuggingHandlers: false\n", ""},
	{"enableProfilingHandler", "enableProfilingHandler: true\n", "enableProfilingHandler: false\n", ""},
	{"enableContentionProfiling", "enableContentionProfiling: true\n", "enableContentionProfiling: false\n", ""},
	{"allowedUnsafeSysctls", "allowedUnsafeSysctls: [net.core.somaxconn, 'net.*']\n", "allowedUnsafeSysctls: [net.core.somaxconn]\n", ""},
	{"staticPodPath", "staticPodPath: /var/lib/pods\n", "maxPods: 10\n", ""},
	{"staticPodURL", "staticPodURL: http://198.51.100.7/pods\n", "staticPodURL: ''\n", ""},
	{"volumePluginDir", "volumePluginDir: /var/lib/hostpath-volumes/flex\n", "maxPods: 10\n", ""},
	{"tlsCertFile", "tlsCertFile: /var/lib/shared/kubelet.crt\n", "maxPods: 10\n", ""},
	{"tlsPrivateKeyFile", "tlsPrivateKeyFile: /var/lib/shared/kubelet.key\n", "maxPods: 10\n", ""},
	{"resolvConf", "resolvConf: /var/lib/shared/resolv.conf\n", "maxPods: 10\n", ""},
	{"podLogsDir", "podLogsDir: /var/lib/shared/logs\n", "maxPods: 10\n", ""},
}

func TestEveryRule(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.field, func(t *testing.T) {
			found := Find(decode(t, tc.refused), nil, Options{})
			if got := fields(found); !slices.Equal(got, []string{tc.field}) {
				t.Fatalf("found %v, want [%s]", got, tc.field)
			}
			if found[0].CIS != tc.cis || found[0].Why == "" {
				t.Fatalf("finding %+v, want CIS %q and a reason", found[0], tc.cis)
			}
			if got := Find(decode(t, tc.fine), nil, Options{}); len(got) > 0 {
				t.Fatalf("%q: found %v", tc.fine, fields(got))
			}
		})
	}
}

// TestPathFieldsAreJudgedOnChange: a path a configuration already set stays
// editable; setting or moving it is refused, and a new configuration (the
// agent's view) is judged as setting it.
func TestPathFieldsAreJudgedOnChange(t *testing.T) {
	old := decode(t, "volumePluginDir: /usr/libexec/kubernetes/kubelet-plugins/volume/exec/\nstaticPodPath: /etc/kubernetes/manifests\n")
	same := decode(t, "volumePluginDir: /usr/libexec/kubernetes/kubelet-plugins/volume/exec/\nstaticPodPath: /etc/kubernetes/manifests\nmaxPods: 50\n")
	if got := Find(same, old, Options{}); len(got) > 0 {
		t.Fatalf("unchanged paths: %v", fields(got))
	}
	moved := decode(t, "volumePluginDir: /var/lib/hostpath-volumes/flex\nstaticPodPath: /etc/kubernetes/manifests\n")
	if got := fields(Find(moved, old, Options{})); !slices.Equal(got, []string{"volumePluginDir"}) {
		t.Fatalf("moved: %v", got)
	}
	if got := fields(Find(same, nil, Options{})); !slices.Equal(got, []string{"staticPodPath", "volumePluginDir"}) {
		t.Fatalf("new: %v", got)
	}
}

func TestRuntimeEndpointsOnlyWithAList(t *testing.T) {
	cfg := decode(t, "containerRuntimeEndpoint: unix:///tmp/evil.sock\nimageServiceEndpoint: unix:///run/crio/crio.sock\n")
	if got := Find(cfg, nil, Options{}); len(got) > 0 {
		t.Fatalf("without a list: %v", fields(got))
	}
	if got := fields(Find(cfg, nil, Options{RuntimeEndpoints: DefaultRuntimeEndpoints})); !slices.Equal(got, []string{"containerRuntimeEndpoint"}) {
		t.Fatalf("with the default list: %v", got)
	}
	if got := Find(cfg, nil, Options{RuntimeEndpoints: []string{"unix:///tmp/evil.sock", "unix:///run/crio/crio.sock"}}); len(got) > 0 {
		t.Fatalf("with a list naming both: %v", fields(got))
	}
}

func TestRisky(t *testing.T) {
	for body, want := range map[string][]string{
		"failSwapOn: false\n":                                 {"failSwapOn"},
		"eventRecordQPS: 0\n":                                 {"eventRecordQPS"},
		"allowedUnsafeSysctls: [net.core.somaxconn]\n":        {"allowedUnsafeSysctls"},
		"allowedUnsafeSysctls: ['net.*']\n":                   nil,
		"failSwapOn: true\neventRecordQPS: 50\nmaxPods: 10\n": nil,
	} {
		if got := fields(Risky(decode(t, body))); !slices.Equal(got, want) {
			t.Errorf("%q: risky %v, want %v", body, got, want)
		}
	}
}

func TestJudgeAndAllowance(t *testing.T) {
	cfg := decode(t, "readOnlyPort: 10255\ntlsMinVersion: VersionTLS10\nfailSwapOn: false\n")
	for annotation, refused := range map[string][]string{
		"":                              {"readOnlyPort", "tlsMinVersion"},
		"yes":                           {"readOnlyPort", "tlsMinVersion"},
		"true":                          nil,
		"readOnlyPort":                  {"tlsMinVersion"},
		" tlsMinVersion , readOnlyPort": nil,
	} {
		v := Judge(cfg, nil, Options{}, ParseAllowance(annotation))
		if got := fields(v.Refused); !slices.Equal(got, refused) {
			t.Errorf("%q: refused %v, want %v", annotation, got, refused)
		}
		if len(v.Refused)+len(v.Allowed) != 2 || len(v.Risky) != 1 {
			t.Errorf("%q: %+v", annotation, v)
		}
		if err := v.Err(); (err != nil) != (len(refused) > 0) || (err != nil && !strings.Contains(err.Error(), contract.AllowDangerousFieldsAnnotation)) {
			t.Errorf("%q: error %v", annotation, err)
		}
	}
}

func TestForbidden(t *testing.T) {
	forbidden := []string{"staticPodPath", "authentication"}
	cfg := decode(t, "staticPodPath: /srv\nmaxPods: 10\n")
	if got := Forbidden(forbidden, nil, cfg); !slices.Equal(got, []string{"staticPodPath"}) {
		t.Fatalf("new: %v", got)
	}
	if got := Forbidden(forbidden, cfg, decode(t, "staticPodPath: /srv\nmaxPods: 20\n")); len(got) > 0 {
		t.Fatalf("unchanged: %v", got)
	}
}
