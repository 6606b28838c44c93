package reconciler

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
)

// result assembles the report.
func (c *Reconciler) result(p *pass) Result {
	st := status.Report{}
	st.Status.Assigned = p.shownAssigned
	st.Status.LastKnownGood = c.records.lastKnownGood
	if c.records.active != nil {
		st.Status.Active = c.records.active.Ref
		st.Status.Waived = c.records.active.Waived
	}
	if p.waived != "" {
		st.Status.Waived = p.waived
	}
	st.Status.Running = p.running
	cond := &st.Condition
	var main *problem
	var messages, errorMessages []string
	for _, pr := range p.problems {
		if main == nil || pr.reason == contract.ReasonApplyFailed {
			main = pr
		}
		messages = append(messages, pr.message)
		if pr.reason != contract.ReasonDownloading {
			errorMessages = append(errorMessages, pr.message)
		}
	}
	switch {
	case main != nil:
		*cond = status.Condition{Status: corev1.ConditionFalse, Reason: main.reason, Message: strings.Join(messages, "; ")}
		st.Status.Error = strings.Join(errorMessages, "; ")
		st.Status.PendingPods = main.pendingPods
	case p.waiting != nil:
		*cond = status.Condition{Status: corev1.ConditionFalse, Reason: p.waiting.reason, Message: p.waiting.message}
	case p.phase == OnTrial:
		since := ""
		if t := c.records.trial; t != nil {
			since = " since " + t.StartedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		*cond = status.Condition{Status: corev1.ConditionFalse, Reason: contract.ReasonTrialInProgress, Message: fmt.Sprintf(
			"%s is active%s and on trial%s for %v", describe(st.Status.Active), aside(p.waived), since, c.trialPeriod())}
	case st.Status.Assigned == nil:
		*cond = status.Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig, Message: "No configuration is assigned; the node's local configuration is active"}
	default:
		message := describe(st.Status.Active) + " is active and passed its trial"
		if p.running != nil && p.running.State == contract.RunningMatches {
			message += "; the kubelet runs it (its /configz shows every field it sets)"
		}
		*cond = status.Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonConfigActive, Message: message + sentence(st.Status.Waived)}
	}

	switch {
	case p.waiting != nil:
		st.Status.Phase, st.Status.PendingPods = p.waiting.reason, p.waiting.pendingPods
	case p.phase == OnTrial && (main == nil || main.reason != contract.ReasonApplyFailed):
		// A trial whose step failed says so rather than that it goes on.
		st.Status.Phase = contract.PhaseTrialInProgress
	}

	// One warning per problem and assignment, not one per pass.
	key := ""
	if st.Status.Error != "" {
		key = cond.Reason + "|" + describe(st.Status.Assigned)
		announced := slices.ContainsFunc(p.events, func(e status.Event) bool { return e.Reason == cond.Reason })
		if key != c.warned.problem && !announced {
			p.event(corev1.EventTypeWarning, cond.Reason, "%s", st.Status.Error)
		}
	}
	c.warned.problem = key
	return Result{Report: st, Events: p.events, Phase: p.phase, RequeueAfter: p.requeue}
}

// aside adds s to a message in parentheses, before the words that close
// it ("... on trial since TIME for PERIOD", which kubectl nodeguard status
// reads); "" adds nothing.
func aside(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
