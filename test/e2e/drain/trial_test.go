package drain_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// agentEvent is the first Event the node's agent posted on its Node with
// reason whose message contains text.
func agentEvent(t *testing.T, node, reason, text string) *corev1.Event {
	t.Helper()
	var found *corev1.Event
	err := framework.Eventually(t.Context(), waitTimeout, "the agent's "+reason+" Event", func(ctx context.Context) (bool, string, error) {
		events, err := env.Admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for i := range events.Items {
			e := &events.Items[i]
			if e.Source.Component == "nodeguard-agent" && strings.Contains(e.Message, text) {
				found = e
				return true, "", nil
			}
			seen = append(seen, e.Message)
		}
		return false, strings.Join(seen, " | "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestARolloutsTrialTermsJudgeItsNodes: a rollout whose spec.trial gives a
// 30s period (the agent's flag says 8s) and turns the pressure signal off
// moves its node with a configuration that raises MemoryPressure (a soft
// eviction threshold above the host's memory), which the agent's own terms
// roll back (TestFailedStaticTrialReturnsThroughDrain). The agent, not
// restarted, judges it by the rollout's terms: the pressure does not fail
// it, and it passes no sooner than 30s after the restart, by the agent's
// own Events.
func TestARolloutsTrialTermsJudgeItsNodes(t *testing.T) {
	n := startPool(t, "terms", 1)[0]
	cm := configMap(t, "terms-pressure", "evictionSoft:\n  memory.available: 100Ti\nevictionSoftGracePeriod:\n  memory.available: 0s\n")
	period, off := int32(30), false
	terms := &contract.TrialTerms{PeriodSeconds: &period, Signals: &contract.TrialSignals{Pressure: &off}}

	// Whether the node raised MemoryPressure while on trial: the signal
	// turned off must have had something to see.
	var pressured atomic.Bool
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if node, err := env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				var st contract.ConfigStatus
				_ = json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &st)
				for _, c := range node.Status.Conditions {
					if c.Type == corev1.NodeMemoryPressure && c.Status == corev1.ConditionTrue && st.Phase == contract.PhaseTrialInProgress {
						pressured.Store(true)
					}
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	createRollout(t, "terms", "terms", cm.Name, "", func(s *v1alpha1.KubeletConfigRolloutSpec) { s.Trial = terms })
	r := waitRollout(t, "terms", v1alpha1.ConditionComplete)
	stop()
	<-done
	t.Logf("rollout: %s", framework.DescribeRollout(r))

	node, err := env.Admin.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Annotations[contract.TrialAnnotation]; got != `{"periodSeconds":30,"signals":{"pressure":false}}` {
		t.Errorf("the Node's %s is %q, want the rollout's spec.trial", contract.TrialAnnotation, got)
	}
	if !pressured.Load() {
		t.Fatal("the node never raised MemoryPressure during its trial: the test shows nothing")
	}
	applied := agentEvent(t, n.Name, contract.EventConfigApplied, "on trial for 30s")
	passed := agentEvent(t, n.Name, contract.EventTrialPassed, cm.Name)
	if took := passed.FirstTimestamp.Sub(applied.FirstTimestamp.Time); took < 29*time.Second {
		t.Errorf("the trial passed %v after the restart, by the agent's Events; want its own 30s", took)
	}
}
