package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
)

func TestMetrics(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := New(registry, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := &contract.ConfigMapVersion{Namespace: "kube-system", Name: "a", UID: "uid-a", ResourceVersion: "1"}
	m.ObserveReport(status.Report{
		Status:    contract.ConfigStatus{Assigned: a, Active: nil, LastKnownGood: nil, Error: "bad"},
		Condition: status.Condition{Reason: contract.ReasonValidationFailed},
	})
	m.RolledBack()
	m.KubeletRestarted()
	m.SetTrialElapsed(90 * time.Second)
	m.ObserveSync(time.Millisecond, nil)

	want := `
# HELP nodeguard_agent_active_config_info The configuration the kubelet was last restarted with (1).
# TYPE nodeguard_agent_active_config_info gauge
nodeguard_agent_active_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1
# HELP nodeguard_agent_assigned_config_info The configuration assigned to this node (1).
# TYPE nodeguard_agent_assigned_config_info gauge
nodeguard_agent_assigned_config_info{name="a",namespace="kube-system",resource_version="1",source="configmap",uid="uid-a"} 1
# HELP nodeguard_agent_config_error 1 while the config status carries an error, with the KubeletConfigReady reason; 0 with an empty reason otherwise.
# TYPE nodeguard_agent_config_error gauge
nodeguard_agent_config_error{reason="ValidationFailed"} 1
# HELP nodeguard_agent_rollbacks_total Configurations rolled back after failing their trial.
# TYPE nodeguard_agent_rollbacks_total counter
nodeguard_agent_rollbacks_total 1
# HELP nodeguard_agent_trial_elapsed_seconds How long the configuration on trial has been on it (time since boot, this boot); 0 without a trial.
# TYPE nodeguard_agent_trial_elapsed_seconds gauge
nodeguard_agent_trial_elapsed_seconds 90
`
	names := []string{"nodeguard_agent_active_config_info", "nodeguard_agent_assigned_config_info", "nodeguard_agent_config_error",
		"nodeguard_agent_rollbacks_total", "nodeguard_agent_trial_elapsed_seconds"}
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// A clean report replaces every series; nothing stale stays behind.
	m.ObserveReport(status.Report{Status: contract.ConfigStatus{Assigned: a, Active: a, LastKnownGood: a}, Condition: status.Condition{Reason: contract.ReasonConfigActive}})
	if got := testutil.ToFloat64(m.configError.WithLabelValues("")); got != 0 {
		t.Fatalf("config_error{reason=\"\"} = %v", got)
	}
	if n := testutil.CollectAndCount(m.configError); n != 1 {
		t.Fatalf("config_error has %d series, want 1", n)
	}
	if n := testutil.CollectAndCount(m.active); n != 1 {
		t.Fatalf("active_config_info has %d series, want 1", n)
	}

	// The cordon mark: 0 until a Node carries it, 1 while it does, and a
	// pass without a Node (offline) keeps what was last seen.
	if got := testutil.ToFloat64(m.cordoned); got != 0 {
		t.Fatalf("cordoned = %v before any Node was seen, want 0", got)
	}
	marked := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{contract.CordonedAnnotation: "drain for cpuManagerPolicy"}}}
	m.ObserveNode(marked)
	if got := testutil.ToFloat64(m.cordoned); got != 1 {
		t.Fatalf("cordoned = %v with the mark, want 1", got)
	}
	m.ObserveNode(nil)
	if got := testutil.ToFloat64(m.cordoned); got != 1 {
		t.Fatalf("cordoned = %v after an offline pass, want the last value 1", got)
	}
	// An administrator's cordon (unschedulable without the mark) is not the agent's.
	m.ObserveNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}})
	if got := testutil.ToFloat64(m.cordoned); got != 0 {
		t.Fatalf("cordoned = %v for an administrator's cordon, want 0", got)
	}

	// A nil *Metrics is a no-op.
	var none *Metrics
	none.ObserveReport(status.Report{})
	none.ObserveNode(marked)
	none.RolledBack()
	none.KubeletRestarted()
	none.SetTrialElapsed(time.Second)
	none.ObserveSync(time.Second, nil)

	if _, err := New(registry, time.Minute); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
