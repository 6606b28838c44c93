package policy

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

const configNamespacesPolicy = `package nodeguard.admission

deny contains ns if {
	some ns in data.nodeguard.config.allowed_namespaces
}
`

func allowedNamespacesData(namespaces ...string) map[string]any {
	list := make([]any, len(namespaces))
	for i, ns := range namespaces {
		list[i] = ns
	}
	return map[string]any{"nodeguard": map[string]any{"config": map[string]any{AllowedNamespacesKey: list}}}
}

func TestCheckAllowedNamespaces(t *testing.T) {
	exempt := DefaultExemptNamespaces()
	for _, tt := range []struct {
		name  string
		value any
		want  string
	}{
		{"own namespaces", []any{"kubelet-configs", "infra"}, ""},
		{"empty", []any{}, ""},
		{"kube-system", []any{"kube-system", "infra"}, "allowed_namespaces names kube-system, which the admission webhook does not judge (its namespaceSelector exempts kube-system, nodeguard)"},
		{"both, once each", []any{"nodeguard", "kube-system", "nodeguard"}, "names kube-system, nodeguard,"},
		{"not a list", "kube-system", "must be a list of namespace names, got string"},
		{"not a name", []any{"infra", 3}, "allowed_namespaces[1] must be a namespace name"},
		{"empty name", []any{""}, "allowed_namespaces[0] must be a namespace name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAllowedNamespaces(tt.value, exempt)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := CheckAllowedNamespaces([]any{"kube-system"}, []string{}); err != nil {
		t.Errorf("with nothing exempt: %v", err)
	}
}

// An exempt namespace in allowed_namespaces, from --policy-data or from a
// rule, keeps the set out of service; a rule doing it on reload leaves the
// last good set serving.
func TestExemptAllowedNamespaceDoesNotLoad(t *testing.T) {
	t.Run("data", func(t *testing.T) {
		e, dir := newEngine(t, map[string]string{"p.rego": configNamespacesPolicy}, Options{Data: allowedNamespacesData("kube-system", "infra")})
		var loadErr *LoadError
		if err := e.LoadError(); !errors.As(err, &loadErr) || !strings.Contains(err.Error(), "names kube-system") {
			t.Fatalf("LoadError() = %v, want one naming kube-system", err)
		}
		if p := loadErr.Problems[0]; p.File != dir+" (data.nodeguard.config, from --policy-data)" {
			t.Errorf("problem names %q, want the data", p.File)
		}
		if e.Ready() == nil {
			t.Error("engine is ready with kube-system allowed")
		}
	})
	t.Run("data, check off", func(t *testing.T) {
		e, _ := newEngine(t, map[string]string{"p.rego": configNamespacesPolicy}, Options{Data: allowedNamespacesData("kube-system"), ExemptNamespaces: []string{}})
		if err := e.LoadError(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rule on reload", func(t *testing.T) {
		e, dir := newEngine(t, map[string]string{
			"p.rego":      configNamespacesPolicy,
			"config.rego": "package nodeguard.config\n\nallowed_namespaces := {\"infra\"}\n",
		}, Options{})
		if err := e.Ready(); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"config.rego": "package nodeguard.config\n\nallowed_namespaces := {\"infra\", \"nodeguard\"}\n"})
		err := e.Reload(testContext(t))
		var loadErr *LoadError
		if !errors.As(err, &loadErr) || !strings.Contains(err.Error(), "names nodeguard") {
			t.Fatalf("Reload = %v, want a load error naming nodeguard", err)
		}
		if p := loadErr.Problems[0]; p.File != filepath.Join(dir, "config.rego") || p.Line != 3 {
			t.Errorf("problem at %s:%d, want config.rego:3", p.File, p.Line)
		}
		if got := admissionDenials(t, e); len(got) != 1 || got[0] != "infra" {
			t.Errorf("denials = %v, want the last good set's [infra]", got)
		}
	})
}
