package status

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Condition reasons; see the package documentation.
const (
	ReasonConfigActive      = "ConfigActive"
	ReasonLocalConfig       = "LocalConfig"
	ReasonTrialInProgress   = "TrialInProgress"
	ReasonDownloading       = "Downloading"
	ReasonDownloadFailed    = "DownloadFailed"
	ReasonValidationFailed  = "ValidationFailed"
	ReasonRolledBack        = "RolledBack"
	ReasonCheckpointCorrupt = "CheckpointCorrupt"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonAssignmentInvalid = "AssignmentInvalid"
	// ReasonDraining and ReasonRestarting are the phases of a change
	// before its trial (contract.PhaseDraining, contract.PhaseRestarting).
	ReasonDraining   = "Draining"
	ReasonRestarting = "Restarting"
	// ReasonDrainTimedOut: the drain a change needed did not finish within
	// the agent's --drain-timeout; the Node was uncordoned and the change
	// not applied. The message and the status's pendingPods name the pods
	// that blocked it.
	ReasonDrainTimedOut = "DrainTimedOut"
)

// Event reasons, for transitions that are not a condition reason.
const (
	EventConfigApplied = "KubeletConfigApplied"
	EventTrialPassed   = "KubeletConfigTrialPassed"
)

// Condition is the KubeletConfigReady condition to report.
type Condition struct {
	Status  corev1.ConditionStatus
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
	Type    string
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
