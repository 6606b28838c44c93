package policy_test

import (
	"fmt"
	"strings"
	"testing"
)

// Each setting the shipped dangerous_fields policy refuses, as an operator
// or a careless edit would write it, and the field the refusal names.
var refusedSettings = []struct {
	field, config string
}{
	{"authentication.anonymous.enabled", "authentication:\n  anonymous:\n    enabled: true\n"},
	{"authorization.mode", "authorization:\n  mode: AlwaysAllow\n"},
	{"readOnlyPort", "readOnlyPort: 10255\n"},
	{"imageServiceEndpoint", "imageServiceEndpoint: unix:///tmp/not-an-image-service.sock\n"},
	{"staticPodURL", "staticPodURL: http://198.51.100.7/pods\n"},
	{"tlsCipherSuites", "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_RC4_128_SHA, TLS_RSA_WITH_3DES_EDE_CBC_SHA]\n"},
	{"tlsMinVersion", "tlsMinVersion: VersionTLS11\n"},
	{"authentication.webhook.enabled", "authentication:\n  webhook:\n    enabled: false\n"},
	{"authentication.x509.clientCAFile", "authentication:\n  x509:\n    clientCAFile: /var/lib/attacker/ca.crt\n"},
	{"containerRuntimeEndpoint", "containerRuntimeEndpoint: unix:///tmp/not-a-runtime.sock\n"},
	{"enableDebuggingHandlers", "enableDebuggingHandlers: true\n"},
	{"enableProfilingHandler", "enableProfilingHandler: true\n"},
	{"enableContentionProfiling", "enableProfilingHandler: false\nenableContentionProfiling: true\n"},
	{"allowedUnsafeSysctls", "allowedUnsafeSysctls: [\"net.*\"]\n"},
	{"staticPodPath", "staticPodPath: /var/lib/attacker/pods\n"},
	{"podPidsLimit", "podPidsLimit: -1\n"},
	{"makeIPTablesUtilChains", "makeIPTablesUtilChains: false\n"},
	{"featureGates.RotateKubeletServerCertificate", "featureGates:\n  RotateKubeletServerCertificate: false\n"},
}

// TestKubeletHardening is issue 17 item 1: each setting is refused, naming
// its field, and allowed (with a warning) only by the per-ConfigMap
// annotation naming that field, or "true".
func TestKubeletHardening(t *testing.T) {
	s := newScenario(t)
	for i, tt := range refusedSettings {
		t.Run(tt.field, func(t *testing.T) {
			name := fmt.Sprintf("%s-hard-%d", s.pfx, i)
			err := s.createConfigMap(kubeletConfigMap(configNamespace, name, goodConfig+tt.config, nil))
			forbiddenBy(t, tt.field, err, "nodeguard policy nodeguard.admission/dangerous_fields: ",
				"kubelet configuration "+configNamespace+"/"+name+" sets "+tt.field,
				fmt.Sprintf("nodeguard.dev/allow-dangerous-fields: %q", tt.field))

			// Another field's allowance does not cover it.
			other := map[string]string{"nodeguard.dev/allow-dangerous-fields": "failSwapOn"}
			err = s.createConfigMap(kubeletConfigMap(configNamespace, name, goodConfig+tt.config, other))
			forbiddenBy(t, tt.field+" with another field allowed", err, "sets "+tt.field)

			s.warnings.take()
			allow := map[string]string{"nodeguard.dev/allow-dangerous-fields": "failSwapOn, " + tt.field}
			if err := s.createConfigMap(kubeletConfigMap(configNamespace, name, goodConfig+tt.config, allow)); err != nil {
				t.Fatalf("%s allowed by the annotation: %v", tt.field, err)
			}
			warnings := strings.Join(s.warnings.take(), "\n")
			if !strings.Contains(warnings, "sets "+tt.field) || !strings.Contains(warnings, "allowed by annotation") {
				t.Errorf("warnings %q do not report %s as allowed by annotation", warnings, tt.field)
			}
		})
	}
}
