package reconciler

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// TestRefusesWhatTheWebhookRefuses: a configuration that sets a forbidden
// or a dangerous field is a validation failure, before the kubelet's
// version is even looked at; the allowance of the ConfigMap it came from
// lifts a dangerous field, never a forbidden one; node-local fields are
// never judged.
func TestRefusesWhatTheWebhookRefuses(t *testing.T) {
	v := version.MustParseGeneric("1.37.2")
	allowances := &Allowances{}
	validator := Validator{
		Rules:       Rules{ForbiddenFields: []string{"staticPodPath", "authentication", "maxOpenFiles"}},
		LocalFields: []string{"staticPodPath", "authentication", "resolvConf"},
		Allowances:  allowances,
	}
	seen := func(config, annotation string) {
		allowances.Seen(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AllowDangerousFieldsAnnotation: annotation}},
			Data: map[string]string{"kubelet": config}}, &contract.Assignment{Key: "kubelet"})
	}
	for _, tc := range []struct {
		name, config, allowance string
		want                    error
	}{
		{name: "plain", config: head + "maxPods: 50\n"},
		{name: "forbidden", config: head + "maxOpenFiles: 100\n", want: ErrForbiddenField},
		{name: "forbidden, annotated", config: head + "maxOpenFiles: 100\n", allowance: "true", want: ErrForbiddenField},
		{name: "volume plugins", config: head + "volumePluginDir: /var/lib/hostpath/flex\n", want: ErrDangerousField},
		{name: "volume plugins, allowed by name", config: head + "volumePluginDir: /var/lib/hostpath/flex\n", allowance: "volumePluginDir"},
		{name: "volume plugins, another field allowed", config: head + "volumePluginDir: /var/lib/hostpath/flex\n", allowance: "readOnlyPort", want: ErrDangerousField},
		{name: "read-only port", config: head + "readOnlyPort: 10255\n", want: ErrDangerousField},
		{name: "unknown runtime socket", config: head + "imageServiceEndpoint: unix:///tmp/x.sock\n", want: ErrDangerousField},
		{name: "node-local, forbidden", config: head + "staticPodPath: /srv/pods\n"},
		{name: "node-local, dangerous", config: head + "authentication:\n  anonymous:\n    enabled: true\nresolvConf: /srv/resolv.conf\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen(tc.config, tc.allowance)
			err := validator.Validate([]byte(tc.config), v)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err := validator.Validate([]byte(tc.config), nil); !errors.Is(err, tc.want) {
				t.Fatalf("without a kubelet version: %v, want %v first", err, tc.want)
			}
		})
	}
}

// TestAllowanceIsTheConfigurationsOwn: an allowance counts only for the
// configuration it was read with.
func TestAllowanceIsTheConfigurationsOwn(t *testing.T) {
	allowances := &Allowances{}
	validator := Validator{Allowances: allowances}
	dangerous := head + "enableDebuggingHandlers: true\n"
	allowances.Seen(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AllowDangerousFieldsAnnotation: "true"}},
		Data: map[string]string{"kubelet": head + "maxPods: 50\n"}}, &contract.Assignment{Key: "kubelet"})
	if err := validator.Validate([]byte(dangerous), version.MustParseGeneric("1.37.2")); !errors.Is(err, ErrDangerousField) {
		t.Fatalf("another ConfigMap's allowance: %v", err)
	}
	allowances.Seen(nil, nil)
	if err := (Validator{}).Validate([]byte(dangerous), version.MustParseGeneric("1.37.2")); !errors.Is(err, ErrDangerousField) ||
		!strings.Contains(err.Error(), "enableDebuggingHandlers") {
		t.Fatalf("the zero Validator: %v", err)
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nforbiddenDynamicFields: [staticPodPath, readOnlyPort]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRules(file, []string{"unix:///run/k3s.sock"})
	if err != nil || len(r.ForbiddenFields) != 2 || r.RuntimeEndpoints[0] != "unix:///run/k3s.sock" {
		t.Fatalf("got %+v, %v", r, err)
	}
	if r, err := LoadRules("", nil); err != nil || r.ForbiddenFields != nil || r.RuntimeEndpoints != nil {
		t.Fatalf("no file: %+v, %v", r, err)
	}
	if err := os.WriteFile(file, []byte("kind: Other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRules(file, nil); err == nil {
		t.Fatal("a file that is no NodeguardPolicy loaded")
	}
	if _, err := LoadRules(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestValidate(t *testing.T) {
	v := version.MustParseGeneric("1.37.2")
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	cases := []struct {
		name, config string
		version      *version.Version
		wantErr      string
	}{
		{name: "valid", config: head + "maxPods: 50\n", version: v},
		{name: "unknown field", config: head + "maxPodz: 50\n", version: v, wantErr: "maxPodz"},
		{name: "invalid value", config: head + "eventRecordQPS: -1\n", version: v, wantErr: "eventRecordQPS"},
		{name: "unknown gate", config: head + "featureGates:\n  NoSuchGate: true\n", version: v, wantErr: "NoSuchGate"},
		{name: "no version", config: head, wantErr: "version is not known"},
		{name: "empty", config: "", version: v, wantErr: "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validator{}.Validate([]byte(tc.config), tc.version)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
	if err := (Validator{}).Validate([]byte(head), nil); !errors.Is(err, ErrUnknownKubeletVersion) {
		t.Fatalf("got %v", err)
	}
}

func TestValidateRendered(t *testing.T) {
	if err := (Validator{}).ValidateRendered([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: 99999\n")); err == nil || !strings.Contains(err.Error(), "node-local") {
		t.Fatalf("got %v", err)
	}
}
