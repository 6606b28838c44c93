package policy_test

import (
	"fmt"
	"strings"
	"testing"
)

// kubeletPaths are the fields that make the kubelet execute or load from a
// path, as a shared configuration would point them at a directory a pod can
// write (a hostPath).
var kubeletPaths = []struct {
	field, config string
}{
	{"volumePluginDir", "volumePluginDir: /var/lib/hostpath-volumes/flex\n"},
	{"tlsCertFile", "tlsCertFile: /var/lib/hostpath-volumes/kubelet.crt\n"},
	{"tlsPrivateKeyFile", "tlsPrivateKeyFile: /var/lib/hostpath-volumes/kubelet.key\n"},
	{"resolvConf", "resolvConf: /var/lib/hostpath-volumes/resolv.conf\n"},
	{"podLogsDir", "podLogsDir: /var/lib/hostpath-volumes/logs\n"},
}

// TestKubeletPathsAreRefused: through a real apiserver and the shipped
// policies, each path field is refused by dangerous_fields, naming it (the
// kubelet runs FlexVolume drivers from volumePluginDir as root), and
// allowed, with a warning, only by the annotation naming it.
func TestKubeletPathsAreRefused(t *testing.T) {
	s := newScenario(t)
	for i, tt := range kubeletPaths {
		t.Run(tt.field, func(t *testing.T) {
			name := fmt.Sprintf("%s-path-%d", s.pfx, i)
			err := s.createConfigMap(kubeletConfigMap(configNamespace, name, goodConfig+tt.config, nil))
			forbiddenBy(t, tt.field, err, "nodeguard policy nodeguard.admission/dangerous_fields: ",
				"kubelet configuration "+configNamespace+"/"+name+" sets "+tt.field,
				fmt.Sprintf("nodeguard.dev/allow-dangerous-fields: %q", tt.field))

			s.warnings.take()
			allow := map[string]string{"nodeguard.dev/allow-dangerous-fields": tt.field}
			if err := s.createConfigMap(kubeletConfigMap(configNamespace, name, goodConfig+tt.config, allow)); err != nil {
				t.Fatalf("%s allowed by the annotation: %v", tt.field, err)
			}
			if warnings := strings.Join(s.warnings.take(), "\n"); !strings.Contains(warnings, "sets "+tt.field) {
				t.Errorf("warnings %q do not report %s as allowed by annotation", warnings, tt.field)
			}
		})
	}
}
