package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/settings"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

func TestRewriteSettings(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(root, "manifests", "base", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var original settings.File
	if err := yaml.UnmarshalStrict(shipped, &original); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		settings   string
		minVersion string
		// wantErr is part of the error expected; empty means success.
		wantErr string
	}{
		{name: "shipped", settings: string(shipped), minVersion: "1.35.0"},
		{name: "minimal", settings: "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\n", minVersion: "1.34.0"},
		{name: "bad version", settings: string(shipped), minVersion: "one", wantErr: "minKubeletVersion"},
		{name: "unknown field", settings: string(shipped) + "surprise: true\n", minVersion: "1.34.0", wantErr: "surprise"},
		{name: "wrong kind", settings: "apiVersion: v1\nkind: ConfigMap\n", minVersion: "1.34.0", wantErr: "apiVersion/kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rewriteSettings([]byte(tc.settings), tc.minVersion)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var f settings.File
			if err := yaml.UnmarshalStrict([]byte(got), &f); err != nil {
				t.Fatal(err)
			}
			if f.MinKubeletVersion != tc.minVersion {
				t.Errorf("minKubeletVersion %q, want %q", f.MinKubeletVersion, tc.minVersion)
			}
			if tc.name == "shipped" {
				if !slices.Equal(f.ForbiddenDynamicFields, original.ForbiddenDynamicFields) || len(original.ForbiddenDynamicFields) == 0 {
					t.Errorf("forbiddenDynamicFields %v, want the shipped ones: %v", f.ForbiddenDynamicFields, original.ForbiddenDynamicFields)
				}
				if f.AllowNodeSelfAssignment != original.AllowNodeSelfAssignment || !slices.Equal(f.ExemptUsers, original.ExemptUsers) {
					t.Errorf("the rest of the shipped settings changed: %+v, was %+v", f, original)
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*options)
		wantErr string
	}{
		{"defaults", func(*options) {}, ""},
		{"zero trial", func(o *options) { o.trialPeriod = 0 }, "--trial-period"},
		{"unparseable minimum", func(o *options) { o.minKubeletVersion = "latest" }, "--min-kubelet-version"},
		{"minimum below the old node", func(o *options) { o.minKubeletVersion = "1.29.0" }, "too-old node"},
		{"minimum above the nodes", func(o *options) { o.minKubeletVersion = "1.40.0" }, "simulated nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			tc.change(&o)
			err := o.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}
