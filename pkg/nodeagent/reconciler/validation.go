package reconciler

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
	"github.com/nodeguard/nodeguard/pkg/settings"
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

// Rules are the deployment's settings of the hardening rules, as the
// webhook has them.
type Rules struct {
	// ForbiddenFields are the NodeguardPolicy's forbiddenDynamicFields.
	ForbiddenFields []string
	// RuntimeEndpoints are the sockets containerRuntimeEndpoint and
	// imageServiceEndpoint may name (the webhook's
	// data.nodeguard.config.container_runtime_endpoints); nil means
	// hardening.DefaultRuntimeEndpoints.
	RuntimeEndpoints []string
}

// LoadRules reads the forbidden fields from a NodeguardPolicy file (the
// webhook's --settings format; "" forbids none) and takes the runtime
// sockets as given.
func LoadRules(policyFile string, runtimeEndpoints []string) (Rules, error) {
	r := Rules{RuntimeEndpoints: runtimeEndpoints}
	if policyFile == "" {
		return r, nil
	}
	data, err := os.ReadFile(policyFile)
	if err != nil {
		return Rules{}, fmt.Errorf("reading the policy file: %w", err)
	}
	settings, err := settings.Parse(data, policyFile)
	if err != nil {
		return Rules{}, fmt.Errorf("the policy file: %w", err)
	}
	r.ForbiddenFields = settings.ForbiddenDynamicFields
	return r, nil
}

// Allowances remembers the allowance annotation of the assigned ConfigMap
// the agent last read, with its configuration, so that Validate, which is
// given the configuration alone, honours the annotation the webhook
// honoured. Safe for concurrent use; a nil *Allowances allows nothing.
type Allowances struct {
	mu         sync.Mutex
	config     string
	annotation string
}

// Seen records the assigned ConfigMap as read, and the data key the
// assignment names. A nil ConfigMap (not read, or the agent offline)
// keeps what was seen last.
func (a *Allowances) Seen(cm *corev1.ConfigMap, assignment *contract.Assignment) {
	if a == nil || cm == nil || assignment == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.config, a.annotation = cm.Data[assignment.Key], cm.Annotations[contract.AllowDangerousFieldsAnnotation]
}

// For is the allowance of config: the annotation of the ConfigMap last seen
// holding exactly it, none otherwise. A configuration judged before its
// ConfigMap was read (an agent started without the apiserver, with a
// checkpoint it never validated) is judged without its allowance.
func (a *Allowances) For(config []byte) hardening.Allowance {
	if a == nil {
		return hardening.ParseAllowance("")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.config != string(config) {
		return hardening.ParseAllowance("")
	}
	return hardening.ParseAllowance(a.annotation)
}
