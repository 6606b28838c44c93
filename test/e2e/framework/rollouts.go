package framework

import (
	"fmt"
	"strings"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
)

// Rollouts is a client of KubeletConfigRollouts as the control plane's
// administrator, from the generated clientset.
func (e *Env) Rollouts() (nodeguardclient.KubeletConfigRolloutInterface, error) {
	client, err := versioned.NewForConfig(e.CP.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("building the KubeletConfigRollout client: %w", err)
	}
	return client.NodeguardV1alpha1().KubeletConfigRollouts(), nil
}

// DescribeRollout puts a rollout's counts and conditions in one line, for
// a test's failure messages.
func DescribeRollout(r *v1alpha1.KubeletConfigRollout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "selected %d updated %d inTrial %d failed %d", r.Status.Selected, r.Status.Updated, r.Status.InTrial, r.Status.Failed)
	for _, c := range r.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
