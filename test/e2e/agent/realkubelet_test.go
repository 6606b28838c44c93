package agent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// capacityPods is what the kubelet itself reports as the Node's pod
// capacity: its running maxPods.
func capacityPods(node *corev1.Node) int64 {
	q := node.Status.Capacity[corev1.ResourcePods]
	return q.Value()
}

// configzMaxPods is the maxPods of the configuration the kubelet runs, as
// its /configz serves it.
func (n *node) configzMaxPods() (int64, error) {
	configz, err := n.Configz(n.ctx)
	if err != nil {
		return 0, err
	}
	kc, ok := configz["kubeletconfig"].(map[string]any)
	if !ok {
		return 0, fmt.Errorf("/configz has no kubeletconfig: %v", configz)
	}
	v, ok := kc["maxPods"].(json.Number)
	if !ok {
		f, isFloat := kc["maxPods"].(float64)
		if !isFloat {
			return 0, fmt.Errorf("/configz has no maxPods: %v", kc["maxPods"])
		}
		return int64(f), nil
	}
	return v.Int64()
}

// waitKubeletRuns waits until the kubelet itself reports maxPods both in the
// Node's capacity and in its /configz.
func (n *node) waitKubeletRuns(maxPods int64) {
	n.t.Helper()
	n.eventually(fmt.Sprintf("the kubelet to run maxPods %d", maxPods), func() (bool, string) {
		node := n.waitNodeReady()
		configz, err := n.configzMaxPods()
		if err != nil {
			return false, err.Error()
		}
		return capacityPods(node) == maxPods && configz == maxPods,
			fmt.Sprintf("capacity.pods %d, /configz maxPods %d", capacityPods(node), configz)
	})
}

// TestRealKubeletRunsTheAssignment: what nodeguard assigns is what the real
// kubelet runs, by the kubelet's own account (the Node's capacity it
// reports and its /configz), and a rollback brings the last-known-good back
// there too.
func TestRealKubeletRunsTheAssignment(t *testing.T) {
	n := newNode(t, nodeOptions{})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	n.waitKubeletRuns(110) // the kubelet's default

	good := n.configMap("kubelet-57", "maxPods: 57\n")
	n.assign("kubelet-57")
	n.passed(good)
	n.waitKubeletRuns(57)

	bad := n.configMap("kubelet-bad", "maxPods: 58\n"+framework.CrashingKubelet())
	n.assign("kubelet-bad")
	o := n.waitReport("the bad configuration rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, bad) && is(o.Status.Active, good) && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if !strings.Contains(o.Status.Error, "did not become healthy") {
		t.Errorf("the status does not say why: %q", o.Status.Error)
	}
	n.waitKubeletRuns(57)
	log, err := n.KubeletLog()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "is not a subset of online-cpus") {
		t.Errorf("the kubelet's log does not show it refusing the bad configuration:\n%s", n.KubeletLogTail(40))
	}
}

// TestStricterThanTheKubelet: the kubelet runs with a field it does not
// know (lenient decoding, one log line) and with a cgroup driver that does
// not exist (the runtime's driver wins); nodeguard refuses both in an
// eligible ConfigMap, naming the field, before any node could be given it.
func TestStricterThanTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name, config, field string
	}{
		{"unknown field", "noSuchKubeletField: true\n", "noSuchKubeletField"},
		{"bogus cgroup driver", "cgroupDriver: bogus\n", "cgroupDriver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, nodeOptions{localConfig: tc.config})
			n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
			n.waitKubeletRuns(110)
			if r := n.restartRecords(); len(r) != 1 || r[0].Behavior != framework.KubeletRunning {
				t.Fatalf("the kubelet did not keep running with %q: %+v", tc.config, r)
			}
			if !strings.Contains(n.kubeletFile(), tc.config) {
				t.Fatalf("the kubelet does not run %q:\n%s", tc.config, n.kubeletFile())
			}

			_, err := framework.PutKubeletConfigMap(n.ctx, env.Admin, n.ns, "stricter", "maxPods: 57\n"+tc.config)
			if err == nil {
				t.Fatalf("nodeguard admitted an eligible ConfigMap with %q", tc.config)
			}
			if msg := err.Error(); !strings.Contains(msg, "nodeguard rule 6") || !strings.Contains(msg, tc.field) {
				t.Errorf("the refusal does not name rule 6 and %s: %v", tc.field, err)
			}
			t.Logf("the kubelet runs %q; nodeguard: %v", strings.TrimSpace(tc.config), err)
		})
	}
}

// TestAgentSeedsItsLocalConfiguration: on a node that has only the
// kubelet's own file, as the shipped DaemonSet finds a kubeadm node, the
// agent copies that file byte for byte to its local configuration and
// reports LocalConfig without restarting the kubelet. Once the kubelet's
// file holds an assignment, an agent started without its local file
// refuses to start, saying how to restore it, and copies nothing; the
// kubelet runs on. Restored by hand, the agent starts again.
func TestAgentSeedsItsLocalConfiguration(t *testing.T) {
	n := newNode(t, nodeOptions{withoutLocalConfig: true})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	own, err := os.ReadFile(n.KubeletConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := os.ReadFile(n.LocalConfigFile)
	if err != nil {
		t.Fatalf("the agent did not seed its local configuration: %v", err)
	}
	if !bytes.Equal(seeded, own) {
		t.Errorf("seeded local configuration differs from the kubelet's file:\n%s\nwant:\n%s", seeded, own)
	}
	if restarts, err := n.KubeletRestarts(); err != nil || len(restarts) != 1 {
		t.Errorf("kubelet starts %+v (%v): want only its first", restarts, err)
	}

	good := n.configMap("kubelet-63", "maxPods: 63\n")
	n.assign("kubelet-63")
	n.passed(good)
	n.waitKubeletRuns(63)
	n.StopAgent()
	if err := os.Remove(n.LocalConfigFile); err != nil {
		t.Fatal(err)
	}
	if err := n.SpawnAgent(); err != nil {
		t.Fatal(err)
	}
	n.eventually("the agent to refuse to start", func() (bool, string) { return n.AgentExited(), "running" })
	if log := n.AgentLogTail(20); !strings.Contains(log, "was written by the nodeguard agent") || !strings.Contains(log, "A node is stuck in rollback") {
		t.Errorf("the agent's refusal does not say why and what to do:\n%s", log)
	}
	if _, err := os.Stat(n.LocalConfigFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a local configuration was written from an assigned one: %v", err)
	}
	n.waitKubeletRuns(63)

	n.StopAgent()
	if err := os.WriteFile(n.LocalConfigFile, own, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.StartAgent(n.ctx); err != nil {
		t.Fatal(err)
	}
	n.waitReport("the assignment, after the restore", func(o framework.Report) bool {
		return is(o.Status.Active, good) && reason(o, corev1.ConditionTrue, contract.ReasonConfigActive)
	})
	if restored, err := os.ReadFile(n.LocalConfigFile); err != nil || !bytes.Equal(restored, own) {
		t.Errorf("the restored local configuration changed: %v", err)
	}
}
