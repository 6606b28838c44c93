package status

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Condition is the KubeletConfigReady condition to report.
type Condition struct {
	Status corev1.ConditionStatus
	// Reason is one of the contract.Reason* constants.
	Reason  string
	Message string
}

// Report is everything the agent says about its configuration at one moment.
type Report struct {
	Status    contract.ConfigStatus
	Condition Condition
}

// Event is a Kubernetes Event about the Node.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is a contract.Reason* or contract.Event* constant.
	Reason  string
	Message string
}

// Log writes the event to the agent's log, which is all that happens to it
// while the apiserver is out of reach.
func (e Event) Log(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if e.Type == corev1.EventTypeWarning {
		logger.Info("Warning event", "reason", e.Reason, "message", e.Message)
		return
	}
	logger.Info("Event", "reason", e.Reason, "message", e.Message)
}
