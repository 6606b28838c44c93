package hardening

import (
	"fmt"
	"slices"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// Verdict is what Judge finds in a configuration.
type Verdict struct {
	// Refused are the dangerous fields the allowance does not allow.
	Refused []Finding
	// Allowed are the dangerous fields the allowance allows, and Risky the
	// fields that deserve a warning: neither refuses.
	Allowed, Risky []Finding
}

// Err is the verdict as an error naming every refused field, nil when
// nothing is refused.
func (v Verdict) Err() error {
	if len(v.Refused) == 0 {
		return nil
	}
	parts := make([]string, len(v.Refused))
	for i, f := range v.Refused {
		parts[i] = f.String()
	}
	return fmt.Errorf("the configuration %s; annotate the ConfigMap %s with the field (or \"true\" for every field) to allow it",
		strings.Join(parts, "; "), contract.AllowDangerousFieldsAnnotation)
}

// Judge applies Find and Risky, and the allowance.
func Judge(cfg, old *kubeletconfigv1beta1.KubeletConfiguration, opts Options, allowance Allowance) Verdict {
	var v Verdict
	for _, f := range Find(cfg, old, opts) {
		if allowance.Allows(f.Field) {
			v.Allowed = append(v.Allowed, f)
		} else {
			v.Refused = append(v.Refused, f)
		}
	}
	v.Risky = Risky(cfg)
	return v
}

// Forbidden lists the top-level fields of forbidden (the NodeguardPolicy's
// forbiddenDynamicFields) that cfg sets or changes from old (nil for a new
// configuration), sorted.
func Forbidden(forbidden []string, old, cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var changed []string
	for _, field := range kubeletconfig.Diff(old, cfg) {
		if slices.Contains(forbidden, field) {
			changed = append(changed, field)
		}
	}
	return changed
}
