package agent_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// passed waits until cm is active, last-known-good and ready.
func (n *node) passed(cm *corev1.ConfigMap) framework.Report {
	n.t.Helper()
	return n.waitReport(cm.Name+" to pass its trial", func(o framework.Report) bool {
		return is(o.Status.Assigned, cm) && is(o.Status.Active, cm) && is(o.Status.LastKnownGood, cm) &&
			o.Status.Error == "" && reason(o, corev1.ConditionTrue, contract.ReasonConfigActive)
	})
}

func TestGoodConfigBecomesLastKnownGood(t *testing.T) {
	n := newNode(t, nodeOptions{})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	if got := n.restarts(); len(got) != 1 {
		t.Fatalf("the agent restarted a kubelet already running the local configuration: %v", got)
	}

	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.waitReport("A on trial", func(o framework.Report) bool {
		return is(o.Status.Active, a) && reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress)
	})
	n.passed(a)
	// The agent's report is one write of nodes/status, and the apiserver
	// keeps the annotation in it: the status subresource's entry in the
	// Node's managedFields owns it (a write on the Node itself, the
	// agent's fallback, would own it from an entry without subresource).
	node, err := env.Admin.CoreV1().Nodes().Get(n.ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, m := range node.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:`+contract.ConfigStatusAnnotation+`"`) {
			owners = append(owners, m.Manager+"/"+m.Subresource)
		}
	}
	if !slices.Equal(owners, []string{"nodeguard-agent/status"}) {
		t.Errorf("%s is owned by %v, want the agent's writes of nodes/status alone", contract.ConfigStatusAnnotation, owners)
	}
	file := n.kubeletFile()
	for _, want := range []string{"maxPods: 42", "providerID: e2e://" + n.Name, fmt.Sprintf("healthzPort: %d", n.KubeletHealthzPort)} {
		if !strings.Contains(file, want) {
			t.Errorf("kubelet file lacks %q:\n%s", want, file)
		}
	}
	if got := n.restarts(); len(got) != 2 {
		t.Errorf("restarts %v, want the initial start and one restart", got)
	}
	events, err := env.Admin.CoreV1().Events("default").List(n.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + n.Name})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, ev := range events.Items {
		reasons = append(reasons, ev.Reason)
	}
	for _, want := range []string{contract.EventConfigApplied, contract.EventTrialPassed} {
		if !slices.Contains(reasons, want) {
			t.Errorf("no %s event on the Node; events: %v", want, reasons)
		}
	}
	if v, ok := n.metric(`nodeguard_agent_last_known_good_config_info{`); !ok || v != 1 {
		t.Errorf("last-known-good metric: %v %v", v, ok)
	}
}

func TestRuntimeFailureRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.passed(a)
	aRuns := n.restartRecords()
	aSHA := aRuns[len(aRuns)-1].SHA256

	// B makes the real kubelet exit at start-up: rolled back to A.
	b := n.configMap("kubelet-b", "maxPods: 43\n"+framework.CrashingKubelet())
	n.assign("kubelet-b")
	o := n.waitReport("B rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, b) && is(o.Status.Active, a) && is(o.Status.LastKnownGood, a) &&
			reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if !strings.Contains(o.Status.Error, "did not become healthy") {
		t.Errorf("the status does not say why: %q", o.Status.Error)
	}
	if !strings.Contains(n.kubeletFile(), "maxPods: 42") {
		t.Errorf("the kubelet file is not A's:\n%s", n.kubeletFile())
	}
	n.eventually("the kubelet to run A again", func() (bool, string) {
		r := n.restartRecords()
		last := r[len(r)-1]
		return last.SHA256 == aSHA && last.Behavior == framework.KubeletRunning, fmt.Sprintf("%+v", last)
	})
	n.waitNodeReady()
	if v, ok := n.metric("nodeguard_agent_rollbacks_total"); !ok || v != 1 {
		t.Errorf("rollbacks_total = %v, %v", v, ok)
	}

	// An edit is a new version: tried again, and fixed, it passes.
	b = n.configMap("kubelet-b", "maxPods: 45\n")
	n.passed(b)
}

// TestHangingKubeletRollsBack: a real kubelet that hangs during a trial
// (frozen with SIGSTOP: its socket still accepts the probes, nothing
// answers, as a deadlocked kubelet) is rolled back; its unit's stop
// (SIGTERM, then SIGCONT, as systemd sends them) ends it, and the kubelet
// runs the last-known-good again.
func TestHangingKubeletRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{"--trial-period=30s"}})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.passed(a)
	b := n.configMap("kubelet-b", "maxPods: 44\n")
	n.assign("kubelet-b")
	n.waitReport("B on trial", func(o framework.Report) bool {
		return is(o.Status.Active, b) && reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress)
	})
	n.waitKubeletRuns(44)
	if err := n.SignalKubelet(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	o := n.waitReport("the hanging B rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, b) && is(o.Status.Active, a) && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if !strings.Contains(o.Status.Error, "deadline") && !strings.Contains(o.Status.Error, "Timeout") {
		t.Errorf("the status does not say the kubelet hung: %q", o.Status.Error)
	}
	n.waitKubeletRuns(42)
}

// TestInvalidConfigIsNeverApplied uses the one kind of invalid configuration
// admission lets through: one that is valid for the kubelet version the Node
// reports, but not for the version the agent is told its kubelet has
// (version skew during an upgrade). Everything else invalid is refused by
// admission before any node sees it.
func TestInvalidConfigIsNeverApplied(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: []string{"--kubelet-version=1.36.0"}})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	before := n.kubeletFile()

	// Alpha since 1.37: unknown to a 1.36 kubelet.
	gate := n.configMap("kubelet-gate", "featureGates:\n  APIServerWebhookAuthenticationToken: false\n")
	n.assign("kubelet-gate")
	o := n.waitReport("the feature-gate failure", func(o framework.Report) bool {
		return is(o.Status.Assigned, gate) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonValidationFailed)
	})
	if !strings.Contains(o.Status.Error, "APIServerWebhookAuthenticationToken") || !strings.Contains(o.Status.Error, "1.36") {
		t.Errorf("the status does not name the gate and the version: %q", o.Status.Error)
	}
	if n.kubeletFile() != before {
		t.Errorf("the kubelet file changed:\n%s", n.kubeletFile())
	}
	if got := n.restarts(); len(got) != 1 {
		t.Errorf("the kubelet was restarted: %v", got)
	}

	// Fixed: applied.
	gate = n.configMap("kubelet-gate", "maxPods: 42\n")
	n.passed(gate)
}

func TestDeleteAndRecreateConfigMap(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.passed(a)

	if err := env.Admin.CoreV1().ConfigMaps(n.ns).Delete(n.ctx, "kubelet-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitReport("the deletion to be noticed", func(o framework.Report) bool {
		return is(o.Status.Active, a) && reason(o, corev1.ConditionFalse, contract.ReasonDownloadFailed)
	})
	if !strings.Contains(n.kubeletFile(), "maxPods: 42") {
		t.Error("the deletion changed the kubelet file")
	}

	again := n.configMap("kubelet-a", "maxPods: 50\n")
	n.passed(again)
	if !strings.Contains(n.kubeletFile(), "maxPods: 50") {
		t.Errorf("the re-created ConfigMap is not applied:\n%s", n.kubeletFile())
	}
}

func TestClearingTheAssignmentRestoresTheLocalConfig(t *testing.T) {
	n := newNode(t, nodeOptions{})
	local, err := os.ReadFile(n.LocalConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.passed(a)

	n.assign("")
	n.waitReport("the local configuration", func(o framework.Report) bool {
		return o.Status.Assigned == nil && o.Status.Active == nil && o.Status.LastKnownGood == nil &&
			reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig)
	})
	if n.kubeletFile() != string(local) {
		t.Errorf("the kubelet file is not the local configuration:\n%s", n.kubeletFile())
	}
}

func TestAPIServerOutage(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	n.assign("kubelet-a")
	n.passed(a)
	restartsBefore := len(n.restarts())

	stopAPIServer(t)
	// The agent restarts while the apiserver is away: it comes up from its
	// checkpoints, keeps A, and leaves the kubelet alone.
	n.stopAgent()
	n.startAgent()
	n.eventually("the agent to report A active from its checkpoints", func() (bool, string) {
		_, body, err := n.AgentGet("/metrics")
		want := fmt.Sprintf(`nodeguard_agent_active_config_info{name="kubelet-a",namespace=%q,resource_version=%q,source="configmap",uid=%q} 1`, n.ns, a.ResourceVersion, a.UID)
		return err == nil && strings.Contains(body, want), fmt.Sprint(err)
	})
	if code, body, err := n.AgentGet("/healthz"); err != nil || code != 200 {
		t.Fatalf("agent /healthz during the outage: %d %s %v", code, body, err)
	}
	if got := len(n.restarts()); got != restartsBefore {
		t.Fatalf("the kubelet was restarted during the outage: %v", n.restarts())
	}
	if !strings.Contains(n.kubeletFile(), "maxPods: 42") {
		t.Fatal("the kubelet file changed during the outage")
	}

	startAPIServer(t)
	// Recovered: a new assignment goes through.
	b := n.configMap("kubelet-b", "maxPods: 43\n")
	n.assign("kubelet-b")
	n.passed(b)
}

func TestBootstrapAndCertificateRotation(t *testing.T) {
	n := newNode(t, nodeOptions{withoutCertificate: true})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	// No certificate yet: the agent runs (healthy, newNode checked) and
	// waits, saying so; the kubelet cannot register its Node either.
	n.eventually("the agent to say it waits for TLS bootstrap", func() (bool, string) {
		log := n.AgentLogTail(200)
		return strings.Contains(log, "Waiting for the kubelet's credentials"), "no such log line"
	})
	n.noNodeYet()
	// The kubelet's bootstrap completes: systemd's restarts bring it up
	// with the certificate, it registers, and the agent reports.
	n.rotateCertificate("1")
	n.waitRegistered()
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.assign("kubelet-a")
	n.passed(a)

	// The kubelet rotates its certificate; the old file goes away. The
	// apiserver restart drops every connection, so the agent must open new
	// ones, and reads the certificate again for them.
	n.rotateCertificate("2")
	if err := os.Remove(n.CertificatePath("1")); err != nil {
		t.Fatal(err)
	}
	stopAPIServer(t)
	startAPIServer(t)
	b := n.configMap("kubelet-b", "maxPods: 43\n")
	n.assign("kubelet-b")
	n.passed(b)
	n.waitKubeletRuns(43)
}

func TestRapidReassignments(t *testing.T) {
	// A long trial: every reassignment interrupts one.
	n := newNode(t, nodeOptions{agentArgs: []string{"--trial-period=1h"}})
	a := n.configMap("kubelet-a", "maxPods: 42\n")
	b := n.configMap("kubelet-b", "maxPods: 43\n")
	n.assign("kubelet-a")
	n.waitReport("A on trial", func(o framework.Report) bool { return is(o.Status.Active, a) })

	goroutines := func() int {
		v, ok := n.metric("go_goroutines ")
		if !ok {
			t.Fatal("no go_goroutines metric")
		}
		return int(v)
	}
	baseGoroutines, baseFDs := goroutines(), n.openFDs()

	const reassignments = 100
	for i := range reassignments {
		n.assign([]string{"kubelet-b", "kubelet-a"}[i%2])
	}
	last := []*corev1.ConfigMap{b, a}[(reassignments-1)%2]
	n.waitReport("the last assignment to be active", func(o framework.Report) bool {
		return is(o.Status.Assigned, last) && is(o.Status.Active, last) && reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress)
	})
	if !strings.Contains(n.kubeletFile(), fmt.Sprintf("maxPods: %s", map[string]string{"kubelet-a": "42", "kubelet-b": "43"}[last.Name])) {
		t.Fatalf("the kubelet file is not the last assignment's:\n%s", n.kubeletFile())
	}
	// Old ConfigMap watches end a moment after they are cancelled; wait for
	// that rather than sample once.
	const slack = 10
	n.eventually("goroutines and file descriptors to settle", func() (bool, string) {
		g, fds := goroutines(), n.openFDs()
		return g <= baseGoroutines+slack && fds <= baseFDs+slack,
			fmt.Sprintf("goroutines %d (baseline %d), fds %d (baseline %d)", g, baseGoroutines, fds, baseFDs)
	})
	t.Logf("after %d reassignments: %d kubelet restarts; goroutines %d -> %d, fds %d -> %d",
		reassignments, len(n.restarts()), baseGoroutines, goroutines(), baseFDs, n.openFDs())
}

// stopAPIServer stops the apiserver for an outage, and makes sure it is back
// for the tests that follow whatever happens.
func stopAPIServer(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		// An error only says it is running already.
		_ = env.CP.StartAPIServer(context.Background())
	})
	if err := env.CP.StopAPIServer(); err != nil {
		// It is stopped either way: a kill after a slow graceful
		// shutdown is reported as an error.
		t.Logf("stopping the apiserver: %v", err)
	}
}

func startAPIServer(t *testing.T) {
	t.Helper()
	if err := env.CP.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
}
