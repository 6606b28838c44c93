package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// TestAnEarlyReportIsNotCountedUpdated: a canary whose agent reports the
// target active and last-known-good the moment it is assigned (an agent
// that lies, played by the node's own credentials with its agent stopped)
// is not counted updated before the rollout's trial period (spec.trial, 40s)
// has passed since its assignment: the next Node waits, through a failover
// of the controller, which resumes from the time the assignment wrote on
// the Node (nodeguard.dev/trial-ends). Once the period is over the canary
// counts, and the next Node is assigned.
func TestAnEarlyReportIsNotCountedUpdated(t *testing.T) {
	settle(t, green...)
	canaryNode, next := green[0], green[1]
	// Its agent stopped before the assignment, so that the report is the
	// only word from it; fakeReport starts it again when the test ends,
	// or this does if the test ends before.
	nodes[canaryNode].StopAgent()
	t.Cleanup(func() {
		if nodes[canaryNode].AgentPID() == 0 {
			if err := nodes[canaryNode].StartAgent(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	cm := configMap(t, "early-74", "maxPods: 74\n")
	period := int32(40)
	createRollout(t, "early", rolloutSpec{selector: pool("green"), configMap: cm.Name, canary: 1, maxUnavailable: 2,
		trial: &contract.TrialTerms{PeriodSeconds: &period}})
	t.Cleanup(func() { pauseInCleanup(t, "early") })
	waitRollout(t, "early", canaryNode+" assigned", func(r *v1alpha1.KubeletConfigRollout) bool {
		return source(t, canaryNode) == configNamespace+"/"+cm.Name
	})
	assigned := node(t, canaryNode)
	ends, err := time.Parse(time.RFC3339, assigned.Annotations[contract.TrialEndsAnnotation])
	if err != nil {
		t.Fatalf("%s's %s: %v", canaryNode, contract.TrialEndsAnnotation, err)
	}
	if got := assigned.Annotations[contract.TrialAnnotation]; got != `{"periodSeconds":40}` {
		t.Errorf("%s's %s is %q, want the rollout's spec.trial", canaryNode, contract.TrialAnnotation, got)
	}
	target := targetOf(cm)
	fakeReport(t, canaryNode, contract.ConfigStatus{Assigned: &target, Active: &target, LastKnownGood: &target}, corev1.ConditionTrue, contract.ReasonConfigActive)

	notCounted := func() (bool, string) {
		r, err := getRollout(t.Context(), "early")
		if err != nil {
			return false, err.Error()
		}
		if r.Status.Updated != 0 || source(t, next) == configNamespace+"/"+cm.Name ||
			node(t, canaryNode).Annotations[contract.TrialPassedAnnotation] != "" {
			return false, fmt.Sprintf("counted before %s: %s; %s on %q", ends.Format(time.RFC3339), describe(r), next, source(t, next))
		}
		return true, ""
	}
	// A second short of the end, for the clocks of this test and of the
	// controller, which are the same machine's, to differ by nothing that
	// matters.
	holdUntil := func(until time.Time) {
		if d := time.Until(until); d > 0 {
			holds(t, d, "the early report is not counted", notCounted)
		}
	}
	leader := waitLeader(t, "")
	holdUntil(time.Now().Add(time.Until(ends) / 3))
	leader.Kill()
	t.Cleanup(func() {
		if err := leader.Start(context.Background()); err != nil {
			t.Errorf("restarting %s: %v", leader.Identity, err)
		}
	})
	successor := waitLeader(t, leader.Identity)
	t.Logf("%s killed; %s leads, %v before the canary's trial period ends", leader.Identity, successor.Identity, time.Until(ends).Round(time.Second))
	holdUntil(ends.Add(-time.Second))

	waitRollout(t, "early", "the canary counted and "+next+" assigned once the period is over", func(r *v1alpha1.KubeletConfigRollout) bool {
		return r.Status.Updated >= 1 && source(t, next) == configNamespace+"/"+cm.Name
	})
	if got := node(t, canaryNode).Annotations[contract.TrialPassedAnnotation]; got != rollout.TrialPassedValue(target) {
		t.Errorf("%s's trial mark %q once counted", canaryNode, got)
	}
}
