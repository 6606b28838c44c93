package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// What active means: the kubelet runs the configuration, by its own /configz,
// not that the agent wrote a file. The kubelet's precedence decides what
// runs: defaults, --config, the drop-ins of --config-dir in lexical order,
// then its command-line flags over every file.

// events lists the reasons and messages of the Events on the Node.
func (n *node) events() []corev1.Event {
	n.t.Helper()
	list, err := env.Admin.CoreV1().Events("default").List(n.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + n.Name})
	if err != nil {
		n.t.Fatal(err)
	}
	return list.Items
}

// waitEvent waits for an Event of reason on the Node whose message holds
// every one of parts, and returns its message.
func (n *node) waitEvent(reason string, parts ...string) string {
	n.t.Helper()
	var found string
	n.eventually("a "+reason+" Event naming "+strings.Join(parts, ", "), func() (bool, string) {
		var seen []string
		for _, ev := range n.events() {
			if ev.Reason != reason {
				continue
			}
			seen = append(seen, ev.Message)
			if containsAll(ev.Message, parts...) {
				found = ev.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s Events: %q", reason, seen)
	})
	return found
}

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// writeFile writes a file the test owns, as an operator's tool would.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newDropInNode starts a node whose kubelet runs with --config-dir and whose
// agent owns 90-nodeguard.conf there (drop-in mode), with localConfig added
// to the kubelet's --config file and the drop-ins files (name to content)
// in the directory before the kubelet starts. It returns the directory.
func newDropInNode(t *testing.T, localConfig string, dropIns map[string]string) (*node, string) {
	t.Helper()
	dir := t.TempDir()
	configDir := filepath.Join(dir, "kubelet", "config.d")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range dropIns {
		writeFile(t, filepath.Join(configDir, name), content)
	}
	n := newNode(t, nodeOptions{
		dir:         dir,
		localConfig: localConfig,
		kubeletArgs: []string{"--config-dir=" + configDir},
		agentArgs:   []string{"--kubelet-config-mode=drop-in", "--kubelet-config-file=" + filepath.Join(configDir, "90-nodeguard.conf")},
	})
	return n, configDir
}

// TestFlagShadowsTheAssignment: a kubelet started with --max-pods=20 (a
// common kubelet extra argument) is assigned maxPods: 50. The file says 50,
// the flag wins, the kubelet runs 20: the trial fails naming the field, both
// values and the flag, the configuration is rolled back, and the kubelet's
// own account (its pod capacity, its /configz) never said 50.
func TestFlagShadowsTheAssignment(t *testing.T) {
	n := newNode(t, nodeOptions{kubeletArgs: []string{"--max-pods=20"}})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.waitKubeletRuns(20)

	shadowed := n.configMap("kubelet-50", "maxPods: 50\n")
	n.assign("kubelet-50")
	o := n.waitReport("maxPods: 50 rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, shadowed) && o.Status.Active == nil && o.Status.LastKnownGood == nil &&
			reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	want := []string{"the kubelet does not run it", "maxPods: 50 asked, 20 running", "set by the kubelet's command line: --max-pods=20"}
	if !containsAll(o.Status.Error, want...) || !containsAll(o.Condition.Message, want...) {
		t.Errorf("the status does not name the field, both values and the flag:\nerror: %s\ncondition: %s", o.Status.Error, o.Condition.Message)
	}
	n.waitEvent(contract.ReasonRolledBack, want...)
	if file := n.kubeletFile(); strings.Contains(file, "maxPods") {
		t.Errorf("the rollback left maxPods in the kubelet's file:\n%s", file)
	}
	n.waitKubeletRuns(20)
}

// TestLaterDropInShadowsTheAssignment: in drop-in mode, a site's drop-in
// that sorts after the agent's 90-nodeguard.conf sets the field the
// assignment sets; the kubelet merges it last. The trial fails naming the
// field, both values and the drop-in.
func TestLaterDropInShadowsTheAssignment(t *testing.T) {
	n, configDir := newDropInNode(t, "", map[string]string{"99-site.conf": framework.KubeletConfigHeader + "maxPods: 20\n"})
	site := filepath.Join(configDir, "99-site.conf")
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.waitKubeletRuns(20)

	shadowed := n.configMap("kubelet-50", "maxPods: 50\n")
	n.assign("kubelet-50")
	o := n.waitReport("maxPods: 50 rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, shadowed) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	want := []string{"maxPods: 50 asked, 20 running", "set by drop-in " + site + ", which the kubelet merges after the agent's file"}
	if !containsAll(o.Status.Error, want...) {
		t.Errorf("the status does not name the field, both values and the drop-in: %s", o.Status.Error)
	}
	n.waitEvent(contract.ReasonRolledBack, want...)
	if data, err := os.ReadFile(site); err != nil || string(data) != framework.KubeletConfigHeader+"maxPods: 20\n" {
		t.Errorf("the site's drop-in was touched: %q, %v", data, err)
	}
}

// TestCleanChangeRunsAsAssigned: a change nothing shadows passes, and the
// status says the kubelet runs it.
func TestCleanChangeRunsAsAssigned(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-57", "maxPods: 57\nimageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\n")
	n.assign("kubelet-57")
	o := n.passed(a)
	if o.Status.Running == nil || o.Status.Running.State != contract.RunningMatches {
		t.Errorf("status.running = %+v, want Matches", o.Status.Running)
	}
	if !strings.Contains(o.Condition.Message, "the kubelet runs it") {
		t.Errorf("the condition does not say the kubelet runs it: %s", o.Condition.Message)
	}
	n.waitKubeletRuns(57)
	if v, ok := n.metric("nodeguard_agent_config_drift "); !ok || v != 0 {
		t.Errorf("nodeguard_agent_config_drift = %v (%v), want 0", v, ok)
	}
}

// TestHandEditedFileIsDriftAndRestored: after ConfigActive, the agent's own
// file is edited by hand and the kubelet restarted with it. At its next
// look (at the latest one resync later) the agent reports drift and
// restores its file, and the kubelet runs the assignment again.
func TestHandEditedFileIsDriftAndRestored(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.configMap("kubelet-57", "maxPods: 57\n")
	n.assign("kubelet-57")
	n.passed(a)
	n.waitKubeletRuns(57)

	edited := strings.Replace(n.kubeletFile(), "maxPods: 57", "maxPods: 33", 1)
	writeFile(t, n.KubeletConfigFile, edited)
	if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
		t.Fatal(err)
	}
	// Whether the kubelet already runs the edit when the agent looks
	// depends on who is quicker; that its own file changed is drift
	// either way.
	n.waitEvent(contract.ReasonConfigDrifted, "was changed behind its back", "restoring the agent's file and restarting the kubelet")
	n.waitKubeletRuns(57)
	n.waitReport("ConfigActive again", func(o framework.Report) bool {
		return is(o.Status.Active, a) && is(o.Status.LastKnownGood, a) && reason(o, corev1.ConditionTrue, contract.ReasonConfigActive) &&
			o.Status.Running != nil && o.Status.Running.State == contract.RunningMatches
	})
	if !strings.Contains(n.kubeletFile(), "maxPods: 57") {
		t.Errorf("the agent's file was not restored:\n%s", n.kubeletFile())
	}
	if v, ok := n.metric("nodeguard_agent_config_drifts_total "); !ok || v < 1 {
		t.Errorf("nodeguard_agent_config_drifts_total = %v (%v), want the drift counted", v, ok)
	}
}

// TestDriftItDoesNotOwnIsReportedNotFought: in drop-in mode, after
// ConfigActive, a site drop-in that sorts after the agent's appears and the
// kubelet is restarted with it. The agent reports drift (ConfigDrifted, the
// gauge at 1, the fields in status.running) and leaves the file and the
// kubelet alone; once the drop-in goes, the configuration is active again.
func TestDriftItDoesNotOwnIsReportedNotFought(t *testing.T) {
	n, configDir := newDropInNode(t, "", nil)
	a := n.configMap("kubelet-57", "maxPods: 57\n")
	n.assign("kubelet-57")
	n.passed(a)

	site := filepath.Join(configDir, "99-site.conf")
	writeFile(t, site, framework.KubeletConfigHeader+"maxPods: 33\n")
	if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
		t.Fatal(err)
	}
	n.waitKubeletRuns(33)
	restarts := len(n.restarts())
	o := n.waitReport("drift reported", func(o framework.Report) bool {
		return reason(o, corev1.ConditionFalse, contract.ReasonConfigDrifted) && o.Status.Running != nil && o.Status.Running.State == contract.RunningDiffers
	})
	wantDiff := contract.FieldDifference{Field: "maxPods", Asked: "57", Running: "33",
		Source: "set by drop-in " + site + ", which the kubelet merges after the agent's file"}
	if len(o.Status.Running.Differences) != 1 || o.Status.Running.Differences[0] != wantDiff {
		t.Errorf("status.running.differences = %+v, want [%+v]", o.Status.Running.Differences, wantDiff)
	}
	if !is(o.Status.Active, a) || !is(o.Status.LastKnownGood, a) {
		t.Errorf("drift moved active or last-known-good: %s", o)
	}
	if !strings.Contains(o.Condition.Message, "the agent changes nothing it does not own") {
		t.Errorf("the condition does not say the agent leaves it: %s", o.Condition.Message)
	}
	n.waitEvent(contract.ReasonConfigDrifted, "maxPods: 57 asked, 33 running", site)
	n.eventually("nodeguard_agent_config_drift at 1", func() (bool, string) {
		v, ok := n.metric("nodeguard_agent_config_drift ")
		return ok && v == 1, fmt.Sprint(v, ok)
	})
	// Not fought: no restart, the site's file as it was.
	n.waitReport("another resync, still drifted", func(o framework.Report) bool {
		return reason(o, corev1.ConditionFalse, contract.ReasonConfigDrifted)
	})
	if got := n.restarts(); len(got) != restarts {
		t.Errorf("the agent restarted the kubelet over drift it does not own: %v", got[restarts:])
	}
	if data, err := os.ReadFile(site); err != nil || !strings.Contains(string(data), "maxPods: 33") {
		t.Errorf("the site's drop-in was touched: %q, %v", data, err)
	}

	if err := os.Remove(site); err != nil {
		t.Fatal(err)
	}
	if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
		t.Fatal(err)
	}
	n.waitReport("active again once the drop-in is gone", func(o framework.Report) bool {
		return reason(o, corev1.ConditionTrue, contract.ReasonConfigActive) && o.Status.Running != nil && o.Status.Running.State == contract.RunningMatches
	})
	n.waitKubeletRuns(57)
	if v, ok := n.metric("nodeguard_agent_config_drift "); !ok || v != 0 {
		t.Errorf("nodeguard_agent_config_drift = %v (%v), want 0", v, ok)
	}
}

// TestDropInChangeClassifiedOnWhatRuns: in drop-in mode the kubelet's
// --config file sets the static CPU manager; a drop-in asking for none is a
// change the kubelet cannot take with its cpu_manager_state in place (it
// refuses to start). Classified on the drop-ins alone (nothing before, none
// after) it looked like no change; classified on what the kubelet runs with
// the drop-in merged in, it is a drain that removes the state file, and the
// kubelet starts and runs none.
func TestDropInChangeClassifiedOnWhatRuns(t *testing.T) {
	n, _ := newDropInNode(t, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n", nil)
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.waitCPUManager("static")

	none := n.configMap("kubelet-none", "cpuManagerPolicy: none\n")
	n.assign("kubelet-none")
	n.passed(none)
	n.waitEvent(contract.ReasonDraining, `cpuManagerPolicy: "static" -> "none"`, "cpu_manager_state")
	n.waitCPUManager("none")
	if got := n.restarts(); slices.Contains(got, framework.KubeletCrashed) {
		t.Errorf("the kubelet crashed on the change: %v", got)
	}
}

// waitCPUManager waits until the kubelet's /configz shows the CPU manager
// policy.
func (n *node) waitCPUManager(policy string) {
	n.t.Helper()
	n.eventually("the kubelet to run the "+policy+" CPU manager", func() (bool, string) {
		configz, err := n.Configz(n.ctx)
		if err != nil {
			return false, err.Error()
		}
		kc, _ := configz["kubeletconfig"].(map[string]any)
		return kc["cpuManagerPolicy"] == policy, fmt.Sprint(kc["cpuManagerPolicy"])
	})
}

// TestUnreadableKubeletIsNeverASilentPass: a kubelet that does not serve
// /configz (enableDebuggingHandlers: false in its --config file, which the
// agent's drop-in leaves as it is) cannot show that it runs an assignment:
// once the trial's period is over, the status says why (ConfigUnverified),
// and the assignment never becomes last-known-good on the health checks
// alone.
func TestUnreadableKubeletIsNeverASilentPass(t *testing.T) {
	n, _ := newDropInNode(t, "enableDebuggingHandlers: false\n", nil)
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })

	a := n.configMap("kubelet-57", "maxPods: 57\n")
	n.assign("kubelet-57")
	o := n.waitReport("the trial held open, saying why", func(o framework.Report) bool {
		return is(o.Status.Active, a) && reason(o, corev1.ConditionFalse, contract.ReasonConfigUnverified)
	})
	if o.Status.LastKnownGood != nil || o.Status.Phase != contract.PhaseTrialInProgress {
		t.Errorf("an unverified configuration moved on: %s", o)
	}
	if !containsAll(o.Status.Error, "cannot tell that the kubelet runs it", "does not serve", "/configz") {
		t.Errorf("the status does not say why: %s", o.Status.Error)
	}
	if o.Status.Running == nil || o.Status.Running.State != contract.RunningUnknown {
		t.Errorf("status.running = %+v, want Unknown", o.Status.Running)
	}
	// And it stays so: the trial's period has long passed, the kubelet is
	// healthy, and only its /configz could let it pass.
	for deadline := time.Now().Add(3 * n.TrialPeriod); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if r := n.observe(); r.Status.LastKnownGood != nil || !reason(r, corev1.ConditionFalse, contract.ReasonConfigUnverified) {
			t.Fatalf("the unverified configuration moved on: %s", r)
		}
	}
}
