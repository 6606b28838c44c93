package cli

import (
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// NodeConfigStatus is one node's configuration as status shows it: what it
// is assigned, and what its agent last reported. It is the item type of
// `status -o json|yaml`, so its JSON names are part of the plugin's output
// contract.
type NodeConfigStatus struct {
	Node           string `json:"node"`
	UID            string `json:"uid"`
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	// Assignment is what the node is told to run; nil is its local
	// configuration.
	Assignment *AssignmentView `json:"assignment"`
	// AssignmentError says why the assignment annotation does not parse
	// (it then assigns nothing).
	AssignmentError string `json:"assignmentError,omitempty"`
	// Reported is the agent's nodeguard.dev/config-status annotation; nil
	// until the agent reports.
	Reported *contract.ConfigStatus `json:"reported"`
	// ReportedError says why the status annotation could not be read.
	ReportedError string `json:"reportedError,omitempty"`
	// Condition is the KubeletConfigReady condition; nil until reported.
	Condition *ConditionView `json:"condition"`
	// Trial is set while the condition says a trial is running.
	Trial *TrialView `json:"trial,omitempty"`
}

// AssignmentView is a node's assignment.
type AssignmentView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Key is the ConfigMap data key holding the configuration.
	Key string `json:"key"`
	// Legacy is true for an assignment read from spec.configSource.
	Legacy bool `json:"legacy,omitempty"`
}

// ConditionView is the KubeletConfigReady condition.
type ConditionView struct {
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
}

// TrialView is a running trial. The agent states it in the condition's
// message; what the message does not say is left out.
type TrialView struct {
	// Since is when the trial started.
	Since *metav1.Time `json:"since,omitempty"`
	// Period is the trial's length, as the agent wrote it.
	Period string `json:"period,omitempty"`
	// EndsAt is Since plus Period.
	EndsAt *metav1.Time `json:"endsAt,omitempty"`
}

// trialMessage finds the trial's start and length in the agent's
// TrialInProgress message: "... is active and on trial since
// 2026-01-02T03:04:05Z for 10m0s". The start is absent when the agent lost
// it, and either may be absent from another agent's wording.
var trialMessage = regexp.MustCompile(`on trial(?: since (\S+))? for (\S+)$`)

// statusOf reads a Node's assignment and what its agent reported. It never
// fails: what cannot be read is said in the *Error fields.
func statusOf(node *corev1.Node) NodeConfigStatus {
	s := NodeConfigStatus{Node: node.Name, UID: string(node.UID), KubeletVersion: node.Status.NodeInfo.KubeletVersion}
	assignment, ok, err := contract.AssignmentOf(node)
	switch {
	case err != nil:
		s.AssignmentError = err.Error()
	case ok:
		s.Assignment = &AssignmentView{Namespace: assignment.ConfigMap.Namespace, Name: assignment.ConfigMap.Name,
			Key: assignment.Key, Legacy: assignment.Legacy}
	}
	if raw, present := node.Annotations[contract.ConfigStatusAnnotation]; present {
		reported, err := contract.ParseConfigStatus(raw)
		if err != nil {
			s.ReportedError = fmt.Sprintf("the %s annotation is not a config status: %v", contract.ConfigStatusAnnotation, err)
		} else {
			s.Reported = reported
		}
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type != contract.ConditionKubeletConfigReady {
			continue
		}
		s.Condition = &ConditionView{Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		if c.Reason == contract.ReasonTrialInProgress {
			s.Trial = trialOf(c.Message)
		}
		break
	}
	return s
}

// trialOf reads what it can of a trial from the condition's message; a
// message it cannot read still means a trial is running.
func trialOf(message string) *TrialView {
	trial := &TrialView{}
	m := trialMessage.FindStringSubmatch(message)
	if m == nil {
		return trial
	}
	period, err := time.ParseDuration(m[2])
	if err == nil {
		trial.Period = m[2]
	}
	if m[1] == "" {
		return trial
	}
	since, sinceErr := time.Parse(time.RFC3339, m[1])
	if sinceErr != nil {
		return trial
	}
	trial.Since = &metav1.Time{Time: since}
	if err == nil {
		trial.EndsAt = &metav1.Time{Time: since.Add(period)}
	}
	return trial
}

// remaining is how much of the trial is left at now, if known.
func (t *TrialView) remaining(now time.Time) (time.Duration, bool) {
	if t == nil || t.EndsAt == nil {
		return 0, false
	}
	return max(t.EndsAt.Sub(now), 0), true
}
