package agent_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestDropInMode runs the agent with --kubelet-config-mode=drop-in: it owns
// one drop-in in the real kubelet's --config-dir, which the kubelet merges
// over its --config file, and never writes the --config
// file. A config passes its trial through the drop-in; one that crashes the
// kubelet is rolled back by restoring the previous drop-in; clearing the
// assignment removes the drop-in.
func TestDropInMode(t *testing.T) {
	dir := t.TempDir()
	configDir := filepath.Join(dir, "kubelet", "config.d")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(configDir, "90-nodeguard.conf")
	n := newNode(t, nodeOptions{
		dir:         dir,
		kubeletArgs: []string{"--config-dir=" + configDir},
		agentArgs:   []string{"--kubelet-config-mode=drop-in", "--kubelet-config-file=" + dropIn},
	})
	base := n.kubeletFile()
	readDropIn := func() (string, bool) {
		t.Helper()
		data, err := os.ReadFile(dropIn)
		if errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(data), true
	}
	checkBaseUntouched := func() {
		t.Helper()
		if got := n.kubeletFile(); got != base {
			t.Fatalf("the agent wrote the kubelet's --config file in drop-in mode:\n%s", got)
		}
	}

	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	if content, ok := readDropIn(); ok {
		t.Fatalf("a drop-in exists with the local configuration:\n%s", content)
	}
	if got := n.restarts(); len(got) != 1 {
		t.Fatalf("the agent restarted a kubelet already running the local configuration: %v", got)
	}

	// A, with a node-local field that must stay out of the drop-in.
	a := n.configMap("kubelet-a", "maxPods: 42\nresolvConf: /etc/shared-resolv.conf\n")
	n.assign("kubelet-a")
	n.passed(a)
	contentA, ok := readDropIn()
	if !ok {
		t.Fatal("A passed its trial without a drop-in")
	}
	for _, want := range []string{"apiVersion: kubelet.config.k8s.io/v1beta1", "kind: KubeletConfiguration", "maxPods: 42"} {
		if !strings.Contains(contentA, want) {
			t.Errorf("the drop-in lacks %q:\n%s", want, contentA)
		}
	}
	if strings.Contains(contentA, "resolvConf") {
		t.Errorf("the drop-in carries the node-local field resolvConf:\n%s", contentA)
	}
	if got := n.restarts(); len(got) != 2 || got[1] != framework.KubeletRunning {
		t.Errorf("restarts %v, want the initial start and one restart for A, still running", got)
	}
	checkBaseUntouched()

	// B makes the kubelet exit at start-up: only through the merge does
	// the kubelet see B's reservedSystemCPUs. Rolled back: A's drop-in is
	// back.
	b := n.configMap("kubelet-b", "maxPods: 43\n"+framework.CrashingKubelet())
	n.assign("kubelet-b")
	n.waitReport("B rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, b) && is(o.Status.Active, a) && is(o.Status.LastKnownGood, a) &&
			reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	n.eventually("the kubelet to run A's drop-in again", func() (bool, string) {
		got := n.restarts()
		return slices.Contains(got, framework.KubeletCrashed) && got[len(got)-1] == framework.KubeletRunning, fmt.Sprint(got)
	})
	if content, _ := readDropIn(); content != contentA {
		t.Errorf("after the rollback the drop-in is not A's:\n%s\nwant:\n%s", content, contentA)
	}
	checkBaseUntouched()

	// Clearing the assignment: the drop-in goes, the kubelet runs its
	// --config file alone.
	restartsBefore := len(n.restarts())
	n.assign("")
	n.waitReport("the local configuration again", func(o framework.Report) bool {
		return o.Status.Assigned == nil && o.Status.Active == nil && reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig)
	})
	if content, ok := readDropIn(); ok {
		t.Errorf("the drop-in is still there after clearing the assignment:\n%s", content)
	}
	if got := n.restarts(); len(got) != restartsBefore+1 || got[len(got)-1] != framework.KubeletRunning {
		t.Errorf("restarts %v, want one more, running, for the local configuration", got)
	}
	entries, err := os.ReadDir(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the config dir is not empty: %v", names)
	}
	checkBaseUntouched()
}
