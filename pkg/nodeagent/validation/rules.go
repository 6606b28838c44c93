package validation

import (
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
)

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
// webhook's --policy-config format; "" forbids none) and takes the runtime
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
	policy, err := config.Parse(data, policyFile)
	if err != nil {
		return Rules{}, fmt.Errorf("the policy file: %w", err)
	}
	r.ForbiddenFields = policy.ForbiddenDynamicFields
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
	a.config, a.annotation = cm.Data[assignment.Key], cm.Annotations[hardening.AllowAnnotation]
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
