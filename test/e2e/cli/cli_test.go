package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

const (
	goodConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	// newGateConfig names a gate that kubelets before 1.37 do not know.
	newGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
	// authzDeadline bounds how long nodeguard's graph takes to see a new
	// object, plus the apiserver's 5s cache of an earlier refusal, with room
	// for a busy machine.
	authzDeadline = 45 * time.Second
)

// scenario gives each test its own namespace, node names and label.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	admin kubernetes.Interface
	ns    string
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	s := &scenario{t: t, ctx: t.Context(), admin: env.Admin, ns: "cli-" + time.Now().Format("150405.000000")}
	s.ns = strings.ReplaceAll(s.ns, ".", "-")
	if _, err := s.admin.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// scenarioLabel, on a scenario's Nodes, is its namespace. It is a label no
// node may write itself, as a rollout's selector must be (the webhook
// refuses one a node could satisfy on its own); the administrator sets it.
const scenarioLabel = contract.Domain + "/e2e-scenario"

// node registers a Node labelled with the scenario's namespace and reports
// its kubelet version, as a kubelet would.
func (s *scenario) node(name, kubeletVersion string) string {
	s.t.Helper()
	name = s.ns + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarioLabel: s.ns}}}
	created, err := s.admin.CoreV1().Nodes().Create(s.ctx, n, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	created.Status.NodeInfo.KubeletVersion = kubeletVersion
	if _, err := s.admin.CoreV1().Nodes().UpdateStatus(s.ctx, created, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	return name
}

func (s *scenario) configMap(name, content string, eligible bool) *corev1.ConfigMap {
	s.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}, Data: map[string]string{contract.ConfigMapKey: content}}
	if eligible {
		cm.Labels = map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
	}
	created, err := s.admin.CoreV1().ConfigMaps(s.ns).Create(s.ctx, cm, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return created
}

func (s *scenario) annotate(node string, annotations map[string]any) {
	s.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("annotating %s: %v", node, err)
	}
}

// report writes what the agent would: the status annotation and the
// KubeletConfigReady condition.
func (s *scenario) report(node string, st contract.ConfigStatus, cond corev1.ConditionStatus, reason, message string) {
	s.t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		s.t.Fatal(err)
	}
	s.annotate(node, map[string]any{contract.ConfigStatusAnnotation: string(data)})
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: contract.ConditionKubeletConfigReady, Status: cond, Reason: reason, Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}}})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		s.t.Fatalf("reporting the condition of %s: %v", node, err)
	}
}

func (s *scenario) assignment(node string) (string, bool) {
	s.t.Helper()
	n, err := s.admin.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	v, ok := n.Annotations[contract.ConfigSourceAnnotation]
	return v, ok
}

func pinned(cm *corev1.ConfigMap) *contract.ConfigMapVersion {
	return &contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
}

func expect(t *testing.T, what string, r result, code int, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: want exit %d, got %s", what, code, r)
	}
	for _, want := range wants {
		if !strings.Contains(r.out, want) {
			t.Fatalf("%s: output lacks %q; got %s", what, want, r)
		}
	}
}

// eventually runs the plugin until check accepts its result or the
// deadline passes.
func eventually(t *testing.T, what string, check func(result) bool, args ...string) result {
	t.Helper()
	end := time.Now().Add(authzDeadline)
	for {
		r := plugin(t, args...)
		if check(r) {
			return r
		}
		if time.Now().After(end) {
			t.Fatalf("%s: still not so after %v; last %s", what, authzDeadline, r)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestBinaryHelp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Exit codes:", "--kubeconfig", "--context", "assign", "create", "explain", "rollout", "status", "unassign"}},
		{[]string{"status", "--help"}, []string{"--selector", "--output", "--no-headers", "LAST-KNOWN-GOOD"}},
		{[]string{"assign", "--help"}, []string{"--dry-run", "--selector", "rule 5", "-n, --namespace"}},
		{[]string{"unassign", "--help"}, []string{"--dry-run", "--selector"}},
		{[]string{"explain", "--help"}, []string{"SubjectAccessReview", "system:node:NODE"}},
		{[]string{"rollout", "--help"}, []string{"status", "pause", "resume", "undo"}},
		{[]string{"rollout", "status", "--help"}, []string{"--watch", "--timeout", "--output", "exits with 3", "Needs:"}},
		{[]string{"rollout", "pause", "--help"}, []string{"spec.paused", "Needs:"}},
		{[]string{"rollout", "resume", "--help"}, []string{"spec.paused", "Needs:"}},
		{[]string{"rollout", "undo", "--help"}, []string{"--dry-run", "--timeout", "nodeguard.dev/previous-config-source", "Needs:"}},
	} {
		out, err := exec.Command(pluginBinary, tt.args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", tt.args, err, out)
		}
		for _, want := range tt.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v lacks %q:\n%s", tt.args, want, out)
			}
		}
	}
	out, err := exec.Command(pluginBinary, "frobnicate").CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != cli.ExitError || !strings.Contains(string(out), `unknown command "frobnicate"`) {
		t.Errorf("an unknown command: %v\n%s", err, out)
	}
}

func TestStatus(t *testing.T) {
	s := newScenario(t)
	a, b := s.configMap("pool-a", goodConfig, true), s.configMap("pool-b", goodConfig, true)
	trial, rolledBack, fresh := s.node("trial", "v1.37.2"), s.node("rolled-back", "v1.37.2"), s.node("fresh", "v1.36.0")

	s.annotate(trial, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/pool-b"})
	since := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	s.report(trial, contract.ConfigStatus{Assigned: pinned(b), Active: pinned(b), LastKnownGood: pinned(a)}, corev1.ConditionFalse,
		contract.ReasonTrialInProgress, "ConfigMap "+s.ns+"/pool-b is active and on trial since "+since+" for 1h0m0s")
	s.annotate(rolledBack, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/pool-b"})
	s.report(rolledBack, contract.ConfigStatus{Assigned: pinned(b), Active: pinned(a), LastKnownGood: pinned(a), Error: "the kubelet failed 3 health checks during its trial"},
		corev1.ConditionFalse, contract.ReasonRolledBack, "the kubelet failed 3 health checks during its trial")

	r := plugin(t, "status", "-l", scenarioLabel+"="+s.ns)
	expect(t, "status", r, cli.ExitOK, "NODE ", "KUBELET ", "ASSIGNED ", "ACTIVE ", "LAST-KNOWN-GOOD ", "RUNNING ", "PHASE ", "PENDING-PODS ", "TRIAL ", "ERROR")
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
		fields := strings.Fields(line)
		rows[fields[0]] = fields
	}
	refA, refB := s.ns+"/pool-a@"+a.ResourceVersion, s.ns+"/pool-b@"+b.ResourceVersion
	if got := strings.Join(rows[trial][1:5], " "); got != "v1.37.2 "+refB+" "+refB+" "+refA {
		t.Errorf("trial row %q", rows[trial])
	}
	if got := strings.Join(rows[trial][5:], " "); !regexp.MustCompile(`^<none> <none> <none> \d+m left <none>$`).MatchString(got) {
		t.Errorf("trial row ends %q, want nothing read of the running configuration yet, no phase or pending pod reported, minutes left and no error", got)
	}
	if got := strings.Join(rows[rolledBack][1:], " "); got != "v1.37.2 "+refB+" "+refA+" "+refA+" <none> <none> <none> <none> the kubelet failed 3 health checks during its trial" {
		t.Errorf("rolled-back row %q", rows[rolledBack])
	}
	if got := strings.Join(rows[fresh][1:], " "); got != "v1.36.0 local <unknown> <unknown> <unknown> <unknown> <none> <none> <none>" {
		t.Errorf("fresh row %q", rows[fresh])
	}

	r = plugin(t, "status", rolledBack, "-o", "wide")
	expect(t, "status -o wide", r, cli.ExitOK, "REASON", contract.ReasonRolledBack, string(a.UID), string(b.UID))

	r = plugin(t, "status", trial, fresh, "-o", "json")
	expect(t, "status -o json", r, cli.ExitOK)
	var list struct {
		Kind  string                 `json:"kind"`
		Items []cli.NodeConfigStatus `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &list); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if list.Kind != cli.StatusListKind || len(list.Items) != 2 {
		t.Fatalf("-o json: %s with %d items", list.Kind, len(list.Items))
	}
	got := list.Items[1]
	if got.Node != trial {
		got = list.Items[0]
	}
	if got.Reported == nil || got.Reported.Active.UID != string(b.UID) || got.Trial == nil || got.Trial.EndsAt == nil || got.Condition.Reason != contract.ReasonTrialInProgress {
		t.Errorf("-o json item for %s: %+v", trial, got)
	}
}

func TestAssignAndUnassign(t *testing.T) {
	s := newScenario(t)
	s.configMap("good", goodConfig, true)
	s.configMap("newgate", newGateConfig, true)
	s.configMap("plain", goodConfig, false)
	current, old := s.node("current", "v1.37.2"), s.node("old", "v1.35.1")
	newgate, good := s.ns+"/newgate", s.ns+"/good"
	unwritten := func(what string) {
		t.Helper()
		for _, n := range []string{current, old} {
			if v, ok := s.assignment(n); ok {
				t.Fatalf("%s wrote %s's assignment: %q", what, n, v)
			}
		}
	}

	r := plugin(t, "assign", newgate, old, current, "--dry-run=client")
	expect(t, "client dry run", r, cli.ExitRefused,
		"node/"+current+": local -> "+newgate+": would be assigned\n",
		"node/"+old+": local -> "+newgate+": refused\n",
		`    client check: nodeguard rule 5 (feature-gates): cannot assign `+newgate+` to node "`+old+`" (kubelet v1.35.1)`,
		"dry run (client): nothing was sent")
	unwritten("client dry run")

	r = plugin(t, "assign", newgate, "-l", scenarioLabel+"="+s.ns, "--dry-run=server")
	expect(t, "server dry run", r, cli.ExitRefused,
		"node/"+current+": local -> "+newgate+": accepted by the server (dry run)\n",
		"node/"+old+": local -> "+newgate+": refused by the server (dry run)\n",
		"    server (dry run): ",
		`denied the request: nodeguard rule 5 (feature-gates): cannot assign `+newgate+` to node "`+old+`" (kubelet v1.35.1)`,
		"dry run (server): nothing was written")
	unwritten("server dry run")

	// The webhook lets a non-eligible ConfigMap through with a warning;
	// the plugin refuses it, and shows the webhook's answer beside.
	r = plugin(t, "-n", s.ns, "assign", "plain", current, "--dry-run=server")
	expect(t, "server dry run of a non-eligible ConfigMap", r, cli.ExitRefused,
		"client check: ConfigMap "+s.ns+"/plain is not an eligible kubelet configuration",
		"    server (dry run): accepted\n",
		"    server warning: ConfigMap "+s.ns+"/plain is not an eligible kubelet configuration")
	unwritten("server dry run of plain")

	r = plugin(t, "assign", newgate, current, old)
	expect(t, "a refused write", r, cli.ExitRefused, ": not written\n", "nothing was written because the client-side checks refused a node")
	unwritten("the refused write")

	r = plugin(t, "assign", good, current, old)
	expect(t, "assign", r, cli.ExitOK, "node/"+current+": local -> "+good+": assigned\n", "node/"+old+": local -> "+good+": assigned\n")
	for _, n := range []string{current, old} {
		if v, _ := s.assignment(n); v != good {
			t.Fatalf("%s assignment %q after assign, want %q", n, v, good)
		}
	}
	r = plugin(t, "assign", good, current)
	expect(t, "assign again", r, cli.ExitOK, "node/"+current+": "+good+": unchanged\n")

	r = plugin(t, "unassign", "-l", scenarioLabel+"="+s.ns, "--dry-run=server")
	expect(t, "unassign dry run", r, cli.ExitOK, "node/"+old+": "+good+" -> local: accepted by the server (dry run)\n")
	if v, _ := s.assignment(old); v != good {
		t.Fatalf("unassign --dry-run=server changed the assignment to %q", v)
	}
	r = plugin(t, "unassign", current, old)
	expect(t, "unassign", r, cli.ExitOK, "node/"+current+": "+good+" -> local: unassigned\n", "node/"+old+": "+good+" -> local: unassigned\n")
	unwritten("unassign")

	r = plugin(t, "assign", good, s.ns+"-missing")
	if r.code != cli.ExitError || !strings.Contains(r.errOut, "not found") {
		t.Errorf("a missing node: %s", r)
	}
}

func TestExplain(t *testing.T) {
	s := newScenario(t)
	s.configMap("pool", goodConfig, true)
	s.configMap("app-settings", "level: debug\n", false)
	assignedNode, other := s.node("assigned", "v1.37.2"), s.node("other", "v1.37.2")
	pool := s.ns + "/pool"
	s.annotate(assignedNode, map[string]any{contract.ConfigSourceAnnotation: pool})

	allowed := func(r result) bool {
		return r.code == cli.ExitOK && strings.Contains(r.out, "  decision:    allowed\n")
	}
	r := eventually(t, "the assigned node may read its ConfigMap", allowed, "explain", assignedNode, pool)
	expect(t, "explain of the assigned node", r, cli.ExitOK,
		"  assignment:  "+assignedNode+" is assigned it (annotation nodeguard.dev/config-source) and it is eligible: a path\n",
		"  path:        yes, through the assignment\n",
		"user system:node:"+assignedNode+", groups system:nodes",
		"  reason:      "+authz.ReasonConfigMapReadable)

	// nodeguard has seen the assignment above, so its answer for the
	// other node is settled.
	r = plugin(t, "explain", other, pool)
	expect(t, "explain of another node", r, cli.ExitOK,
		"  assignment:  "+other+" is not assigned anything (local configuration)\n",
		"  path:        none: not assigned; no pod bound to the node uses it\n",
		"  decision:    not allowed (no authorizer allowed it)\n",
		authz.ReasonNoPath)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"}, Spec: corev1.PodSpec{NodeName: other,
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
		Volumes: []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app-settings"}}}}}}}}}}
	if _, err := s.admin.CoreV1().Pods(s.ns).Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = eventually(t, "a node may read what its pod uses", allowed, "explain", other, "app-settings", "-n", s.ns)
	expect(t, "explain of a pod-referenced ConfigMap", r, cli.ExitOK,
		"  configmap:   exists, not eligible",
		"  pods:        pod "+s.ns+"/web uses it: projected volume \"settings\"\n",
		"  path:        yes, through pod "+s.ns+"/web\n")

	r = plugin(t, "explain", assignedNode, "app-settings", "-n", s.ns)
	expect(t, "explain of someone else's pod ConfigMap", r, cli.ExitOK,
		"  assignment:  "+assignedNode+" is assigned "+pool+", not this ConfigMap\n",
		"  pods:        no pod is bound to "+assignedNode+" in namespace "+s.ns+"\n",
		"  decision:    not allowed")
}
