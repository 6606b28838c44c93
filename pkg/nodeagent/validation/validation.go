package validation

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
)

// ErrUnknownKubeletVersion is returned when the feature gates cannot be
// checked because the kubelet's version is not known yet.
var ErrUnknownKubeletVersion = errors.New("the kubelet's version is not known yet (no Node status and no --kubelet-version)")

// ErrForbiddenField and ErrDangerousField wrap the refusals of the
// hardening rules.
var (
	ErrForbiddenField = errors.New("sets a field the policy forbids to change dynamically (forbiddenDynamicFields)")
	ErrDangerousField = errors.New("sets a dangerous field")
)

// Validator checks configurations. Its zero value applies the dangerous
// field rules with the default runtime sockets, forbids no field and knows
// no allowance.
type Validator struct {
	Rules
	// LocalFields are the top-level fields the agent never takes from a
	// ConfigMap (--local-fields): their values there are never applied,
	// so they are not judged.
	LocalFields []string
	// Allowances tells which dangerous fields the ConfigMap a
	// configuration came from allows; nil allows none.
	Allowances *Allowances
}

// Validate decodes config strictly and checks it, then holds it to the
// hardening rules, then checks its feature gates against kubeletVersion.
func (v Validator) Validate(config []byte, kubeletVersion *version.Version) error {
	cfg, err := kubeletconfig.Decode(config)
	if err != nil {
		return err
	}
	if errs := kubeletconfig.Validate(cfg); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if err := v.harden(cfg, config); err != nil {
		return err
	}
	if kubeletVersion == nil {
		return ErrUnknownKubeletVersion
	}
	if errs := kubeletconfig.CheckFeatureGates(cfg, kubeletVersion); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// harden applies forbiddenDynamicFields and the dangerous field rules, as
// to a new configuration, to the fields the agent would apply.
func (v Validator) harden(cfg *kubeletconfigv1beta1.KubeletConfiguration, config []byte) error {
	var forbidden []string
	for _, field := range hardening.Forbidden(v.ForbiddenFields, nil, cfg) {
		if !v.isLocal(field) {
			forbidden = append(forbidden, field)
		}
	}
	if len(forbidden) > 0 {
		return fmt.Errorf("the configuration %w: %s", ErrForbiddenField, strings.Join(forbidden, ", "))
	}
	verdict := hardening.Judge(cfg, nil, hardening.Options{RuntimeEndpoints: v.runtimeEndpoints()}, v.Allowances.For(config))
	verdict.Refused = slices.DeleteFunc(verdict.Refused, func(f hardening.Finding) bool { return v.isLocal(f.Field) })
	if err := verdict.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrDangerousField, err)
	}
	return nil
}

// isLocal reports whether a finding's field (a JSON path) lies in a
// node-local top-level field.
func (v Validator) isLocal(field string) bool {
	top, _, _ := strings.Cut(field, ".")
	return slices.Contains(v.LocalFields, top)
}

func (v Validator) runtimeEndpoints() []string {
	if v.RuntimeEndpoints == nil {
		return hardening.DefaultRuntimeEndpoints
	}
	return v.RuntimeEndpoints
}

// ValidateRendered checks the file about to be written, after the node-local
// fields were applied: a node-local value must not make it invalid.
func (Validator) ValidateRendered(data []byte) error {
	cfg, err := kubeletconfig.Decode(data)
	if err != nil {
		return fmt.Errorf("after applying the node-local fields: %w", err)
	}
	if errs := kubeletconfig.Validate(cfg); len(errs) > 0 {
		return fmt.Errorf("after applying the node-local fields: %w", errs.ToAggregate())
	}
	return nil
}
