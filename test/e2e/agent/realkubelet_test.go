package agent_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
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
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, status.ReasonLocalConfig) })
	n.waitKubeletRuns(110) // the kubelet's default

	good := n.configMap("kubelet-57", "maxPods: 57\n")
	n.assign("kubelet-57")
	n.passed(good)
	n.waitKubeletRuns(57)

	bad := n.configMap("kubelet-bad", "maxPods: 58\n"+framework.CrashingKubelet())
	n.assign("kubelet-bad")
	o := n.waitReport("the bad configuration rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, bad) && is(o.Status.Active, good) && reason(o, corev1.ConditionFalse, status.ReasonRolledBack)
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
			n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, status.ReasonLocalConfig) })
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
