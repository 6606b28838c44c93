package validation

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

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
