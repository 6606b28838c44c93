package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func reportedStatus(t *testing.T, s contract.ConfigStatus) string {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func ref(name, rv string) *contract.ConfigMapVersion {
	return &contract.ConfigMapVersion{Namespace: testNamespace, Name: name, UID: "uid-" + name + "-" + rv, ResourceVersion: rv}
}

func withCondition(n *corev1.Node, st corev1.ConditionStatus, reason, message string) *corev1.Node {
	n.Status.Conditions = append(n.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: st, Reason: reason, Message: message})
	return n
}

func TestTrialOf(t *testing.T) {
	since := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		message    string
		wantPeriod string
		wantEnds   *time.Time
		wantLeft   time.Duration
		wantKnown  bool
	}{
		{"ConfigMap kc/a (uid u, resourceVersion 5) is active and on trial since 2030-01-02T03:00:00Z for 10m0s",
			"10m0s", ptrTo(since.Add(10 * time.Minute)), 5*time.Minute + 55*time.Second, true},
		{"ConfigMap kc/a (uid u, resourceVersion 5) is active and on trial since 2030-01-02T02:00:00Z for 10m0s",
			"10m0s", ptrTo(since.Add(-50 * time.Minute)), 0, true},
		{"ConfigMap kc/a is active and on trial for 10m0s", "10m0s", nil, 0, false},
		{"on trial since yesterday for 10m0s", "10m0s", nil, 0, false},
		{"on trial since 2030-01-02T03:00:00Z for ever", "", nil, 0, false},
		{"the agent words it differently now", "", nil, 0, false},
	}
	for _, tt := range tests {
		trial := trialOf(tt.message)
		if trial.Period != tt.wantPeriod {
			t.Errorf("%q: period %q, want %q", tt.message, trial.Period, tt.wantPeriod)
		}
		if (trial.EndsAt == nil) != (tt.wantEnds == nil) || (tt.wantEnds != nil && !trial.EndsAt.Time.Equal(*tt.wantEnds)) {
			t.Errorf("%q: ends at %v, want %v", tt.message, trial.EndsAt, tt.wantEnds)
		}
		left, known := trial.remaining(testNow)
		if left != tt.wantLeft || known != tt.wantKnown {
			t.Errorf("%q: remaining %v, %v; want %v, %v", tt.message, left, known, tt.wantLeft, tt.wantKnown)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestCells(t *testing.T) {
	trialMsg := "ConfigMap kc/b is active and on trial since 2030-01-02T03:00:00Z for 1h0m0s"
	tests := []struct {
		name                                  string
		node                                  *corev1.Node
		assigned, active, lkg, trial, errCell string
	}{
		{"not reported, nothing assigned", testNode("n", "v1.37.2", nil),
			"local", "<unknown>", "<unknown>", "<none>", "<none>"},
		{"not reported, assigned", testNode("n", "v1.37.2", assigned("kubelet-configs/a")),
			"kubelet-configs/a", "<unknown>", "<unknown>", "<none>", "<none>"},
		{"caught up and active", testNode("n", "v1.37.2", map[string]string{
			contract.ConfigSourceAnnotation: "kubelet-configs/a",
			contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("a", "5"), Active: ref("a", "5"), LastKnownGood: ref("a", "5")}),
		}), "kubelet-configs/a@5", "kubelet-configs/a@5", "kubelet-configs/a@5", "<none>", "<none>"},
		{"agent still on the previous assignment", testNode("n", "v1.37.2", map[string]string{
			contract.ConfigSourceAnnotation: "kubelet-configs/b",
			contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("a", "5"), Active: ref("a", "5")}),
		}), "kubelet-configs/b (pending)", "kubelet-configs/a@5", "local", "<none>", "<none>"},
		{"unassigned, agent not caught up", testNode("n", "v1.37.2", map[string]string{
			contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("a", "5"), Active: ref("a", "5")}),
		}), "local (pending)", "kubelet-configs/a@5", "local", "<none>", "<none>"},
		{"rolled back", testNode("n", "v1.37.2", map[string]string{
			contract.ConfigSourceAnnotation: "kubelet-configs/b",
			contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("b", "7"), LastKnownGood: ref("a", "5"),
				Active: ref("a", "5"), Error: "the kubelet failed 3 health checks during its trial"}),
		}), "kubelet-configs/b@7", "kubelet-configs/a@5", "kubelet-configs/a@5", "<none>", "the kubelet failed 3 health checks during its trial"},
		{"on trial", withCondition(testNode("n", "v1.37.2", map[string]string{
			contract.ConfigSourceAnnotation: "kubelet-configs/b",
			contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("b", "7"), Active: ref("b", "7"), LastKnownGood: ref("a", "5")}),
		}), corev1.ConditionFalse, contract.ReasonTrialInProgress, trialMsg),
			"kubelet-configs/b@7", "kubelet-configs/b@7", "kubelet-configs/a@5", "55m left", "<none>"},
		{"on trial, message without times", withCondition(testNode("n", "v1.37.2", nil), corev1.ConditionFalse, contract.ReasonTrialInProgress, "on trial"),
			"local", "<unknown>", "<unknown>", "running", "<none>"},
		{"legacy source", func() *corev1.Node {
			n := testNode("n", "v1.37.2", nil)
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: testNamespace, Name: "old", KubeletConfigKey: "kubelet"}}
			return n
		}(), "kubelet-configs/old (legacy)", "<unknown>", "<unknown>", "<none>", "<none>"},
		{"malformed assignment", testNode("n", "", assigned("no-slash")),
			"<invalid>", "<unknown>", "<unknown>", "<none>", `the nodeguard.dev/config-source annotation is invalid: config source "no-slash": want <namespace>/<name>`},
		{"malformed status", testNode("n", "v1.37.2", map[string]string{contract.ConfigStatusAnnotation: "{"}),
			"local", "<unknown>", "<unknown>", "<none>", "the nodeguard.dev/config-status annotation is not a config status: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := statusOf(tt.node)
			pick := func(f func(*contract.ConfigStatus) *contract.ConfigMapVersion) string { return reportedCell(&s, f) }
			got := []string{assignedCell(&s),
				pick(func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.Active }),
				pick(func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.LastKnownGood }),
				trialCell(&s, testNow), errorCell(&s)}
			want := []string{tt.assigned, tt.active, tt.lkg, tt.trial, tt.errCell}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("cells = %q,\nwant %q", got, want)
					break
				}
			}
		})
	}
}

// statusNodes is a small cluster in four states: on trial, rolled back,
// not reported yet, and draining.
func statusNodes(t *testing.T) *fake.Clientset {
	trial := withCondition(testNode("node-a", "v1.37.2", map[string]string{
		contract.ConfigSourceAnnotation: "kubelet-configs/b",
		contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("b", "7"), Active: ref("b", "7"), LastKnownGood: ref("a", "5"),
			Phase: contract.PhaseTrialInProgress}),
	}), corev1.ConditionFalse, contract.ReasonTrialInProgress, "ConfigMap kubelet-configs/b is active and on trial since 2030-01-02T03:00:00Z for 10m0s")
	longError := "the kubelet did not become healthy within 1m0s of its restart; last: Get \"http://127.0.0.1:10248/healthz\": connection refused"
	rolledBack := withCondition(testNode("node-b", "v1.36.4", map[string]string{
		contract.ConfigSourceAnnotation: "kubelet-configs/c",
		contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("c", "9"), Active: ref("a", "5"), LastKnownGood: ref("a", "5"), Error: longError,
			Running: &contract.RunningConfig{State: contract.RunningMatches}}),
	}), corev1.ConditionFalse, contract.ReasonRolledBack, longError)
	fresh := testNode("node-c", "v1.37.2", nil)
	fresh.Labels = nil
	draining := withCondition(testNode("node-d", "v1.37.2", map[string]string{
		contract.ConfigSourceAnnotation: "kubelet-configs/d",
		contract.ConfigStatusAnnotation: reportedStatus(t, contract.ConfigStatus{Assigned: ref("d", "11"), Active: ref("a", "5"), LastKnownGood: ref("a", "5"),
			Phase: contract.PhaseDraining, PendingPods: []string{"default/web-0", "default/web-1", "monitoring/prometheus-k8s-0"}}),
	}), corev1.ConditionFalse, contract.ReasonDraining, "draining the Node to apply kubelet-configs/d: waiting on default/web-0 (eviction refused)")
	draining.Labels = nil
	return fake.NewClientset(trial, rolledBack, fresh, draining)
}

func TestStatusTable(t *testing.T) {
	r := runFake(t, statusNodes(t), "status")
	want := `NODE     KUBELET   ASSIGNED               ACTIVE                LAST-KNOWN-GOOD       RUNNING     PHASE             PENDING-PODS                          TRIAL        ERROR
node-a   v1.37.2   kubelet-configs/b@7    kubelet-configs/b@7   kubelet-configs/a@5   <none>      TrialInProgress   <none>                                5m55s left   <none>
node-b   v1.36.4   kubelet-configs/c@9    kubelet-configs/a@5   kubelet-configs/a@5   Matches     <none>            <none>                                <none>       the kubelet did not become healthy within 1m0s of its restart; last: ...
node-c   v1.37.2   local                  <unknown>             <unknown>             <unknown>   <unknown>         <none>                                <none>       <none>
node-d   v1.37.2   kubelet-configs/d@11   kubelet-configs/a@5   kubelet-configs/a@5   <none>      Draining          default/web-0,default/web-1,+1 more   <none>       <none>
`
	if r.code != ExitOK || r.out != want {
		t.Fatalf("exit %d, stderr %q, output:\n%s\nwant:\n%s", r.code, r.errOut, r.out, want)
	}

	r = runFake(t, statusNodes(t), "status", "-l", "pool=blue", "-o", "wide", "--no-headers")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != ExitOK || len(lines) != 2 {
		t.Fatalf("wide with selector: exit %d, output:\n%s", r.code, r.out)
	}
	for _, want := range []string{"False", contract.ReasonRolledBack, "uid-c-9", "uid-a-5", "connection refused"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("wide row %q lacks %q", lines[1], want)
		}
	}
	// Wide output lists every pending pod.
	wide := runFake(t, statusNodes(t), "status", "node-d", "-o", "wide")
	if !strings.Contains(wide.out, "Draining ") || !strings.Contains(wide.out, "default/web-0,default/web-1,monitoring/prometheus-k8s-0") {
		t.Errorf("wide output of a draining node:\n%s", wide.out)
	}
	if strings.HasPrefix(r.out, "NODE") {
		t.Errorf("--no-headers printed headers:\n%s", r.out)
	}
}

func TestRunningCell(t *testing.T) {
	for _, tt := range []struct {
		running *contract.RunningConfig
		want    string
	}{
		{nil, "<none>"},
		{&contract.RunningConfig{State: contract.RunningMatches}, "Matches"},
		{&contract.RunningConfig{State: contract.RunningUnknown, Error: "403"}, "Unknown"},
		{&contract.RunningConfig{State: contract.RunningDiffers, Differences: []contract.FieldDifference{
			{Field: "maxPods", Asked: "50", Running: "20"}, {Field: "evictionHard[memory.available]"}}}, "Differs: maxPods,evictionHard[memory.available]"},
	} {
		s := NodeConfigStatus{Reported: &contract.ConfigStatus{Running: tt.running}}
		if got := runningCell(&s); got != tt.want {
			t.Errorf("runningCell(%+v) = %q, want %q", tt.running, got, tt.want)
		}
	}
	if got := runningCell(&NodeConfigStatus{}); got != "<unknown>" {
		t.Errorf("not reported: %q", got)
	}
}

func TestStatusStructured(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		r := runFake(t, statusNodes(t), "status", "node-b", "node-a", "-o", format)
		if r.code != ExitOK {
			t.Fatalf("-o %s: exit %d: %s", format, r.code, r.errOut)
		}
		var list struct {
			APIVersion string             `json:"apiVersion"`
			Kind       string             `json:"kind"`
			Items      []NodeConfigStatus `json:"items"`
		}
		if err := yaml.UnmarshalStrict([]byte(r.out), &list); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, r.out)
		}
		if list.APIVersion != StatusListAPIVersion || list.Kind != StatusListKind || len(list.Items) != 2 {
			t.Fatalf("-o %s: %s %s with %d items", format, list.APIVersion, list.Kind, len(list.Items))
		}
		a, b := list.Items[0], list.Items[1]
		if a.Node != "node-a" || b.Node != "node-b" {
			t.Fatalf("-o %s: items %s, %s; want sorted by name", format, a.Node, b.Node)
		}
		if a.Trial == nil || a.Trial.EndsAt == nil || !a.Trial.EndsAt.Time.Equal(time.Date(2030, 1, 2, 3, 10, 0, 0, time.UTC)) || a.Trial.Period != "10m0s" {
			t.Errorf("-o %s: trial %+v", format, a.Trial)
		}
		if b.Reported == nil || b.Reported.Assigned.ResourceVersion != "9" || b.Reported.LastKnownGood.UID != "uid-a-5" || !strings.Contains(b.Reported.Error, "connection refused") {
			t.Errorf("-o %s: reported %+v", format, b.Reported)
		}
		if b.Assignment == nil || b.Assignment.Name != "c" || b.Assignment.Key != contract.ConfigMapKey || b.Condition == nil || b.Condition.Reason != contract.ReasonRolledBack {
			t.Errorf("-o %s: assignment %+v, condition %+v", format, b.Assignment, b.Condition)
		}
	}
	// The phase and the pending pods are the agent's, as it reported them.
	r := runFake(t, statusNodes(t), "status", "node-d", "-o", "json")
	for _, want := range []string{`"phase": "Draining"`, `"pendingPods": [`, `"monitoring/prometheus-k8s-0"`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("-o json of a draining node lacks %s:\n%s", want, r.out)
		}
	}
	// A node with nothing reported has explicit nulls, not missing fields.
	r = runFake(t, statusNodes(t), "status", "node-c", "-o", "json")
	for _, want := range []string{`"assignment": null`, `"reported": null`, `"condition": null`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("-o json of an unreported node lacks %s:\n%s", want, r.out)
		}
	}
}

func TestStatusErrors(t *testing.T) {
	client := statusNodes(t)
	r := runFake(t, client, "status", "node-a", "node-x")
	if r.code != ExitError || !strings.Contains(r.errOut, `node "node-x" not found`) || !strings.Contains(r.out, "node-a") {
		t.Errorf("a missing node: exit %d, out %q, err %q; want node-a shown and exit 1", r.code, r.out, r.errOut)
	}
	for _, args := range [][]string{
		{"status", "-o", "name"},
		{"status", "node-a", "-l", "pool=blue"},
		{"status", "-l", "pool in (blue"},
		{"status", "--bogus"},
	} {
		r := runFake(t, client, args...)
		if r.code != ExitError || !strings.Contains(r.errOut, "--help' for usage") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, r.code, r.errOut)
		}
	}
	r = runFake(t, client, "status", "-l", "pool=green")
	if r.code != ExitOK || r.out != "" || !strings.Contains(r.errOut, "No nodes found") {
		t.Errorf("no match: exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
}

func TestPhaseCells(t *testing.T) {
	for _, tc := range []struct {
		name           string
		reported       *contract.ConfigStatus
		phase, pending string
	}{
		{"not reported", nil, "<unknown>", "<none>"},
		{"between changes", &contract.ConfigStatus{}, "<none>", "<none>"},
		{"draining", &contract.ConfigStatus{Phase: contract.PhaseDraining, PendingPods: []string{"default/web-0", "default/web-1"}}, "Draining", "default/web-0,default/web-1"},
		{"restarting", &contract.ConfigStatus{Phase: contract.PhaseRestarting}, "Restarting", "<none>"},
		{"a drain that timed out", &contract.ConfigStatus{Error: "drain timed out", PendingPods: []string{"default/web-0"}}, "<none>", "default/web-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &NodeConfigStatus{Reported: tc.reported}
			if got := phaseCell(s); got != tc.phase {
				t.Errorf("phase %q, want %q", got, tc.phase)
			}
			if got := pendingCell(s); got != tc.pending {
				t.Errorf("pending pods %q, want %q", got, tc.pending)
			}
		})
	}
}

func TestShortenList(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"a/b,c/d", 40, "a/b,c/d"},
		{"default/web-0,default/web-1,monitoring/prometheus-k8s-0", 40, "default/web-0,default/web-1,+1 more"},
		{"default/web-0,default/web-1,monitoring/prometheus-k8s-0", 20, "default/web-0,+2 more"},
		{"monitoring/prometheus-k8s-0,default/web-0", 12, "monitorin...,+1 more"},
		{"monitoring/prometheus-k8s-0", 12, "monitorin..."},
	} {
		if got := shortenList(tc.in, tc.width); got != tc.want {
			t.Errorf("shortenList(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

// TestTrialOfAWaivedCheck: the message of a trial whose after-drain check
// was waived still gives its start and period.
func TestTrialOfAWaivedCheck(t *testing.T) {
	tr := trialOf("ConfigMap kc/a (uid u, resourceVersion 5) is active (the after-drain check was waived (allowShrink): the 5 pods it ran before the drain no longer fit its allocatable: pods: 5 requested, 2 allocatable, 3 short) and on trial since 2030-01-02T03:00:00Z for 10m0s")
	if tr.Period != "10m0s" || tr.Since == nil {
		t.Errorf("trialOf = %+v, want the period and start read", tr)
	}
}
