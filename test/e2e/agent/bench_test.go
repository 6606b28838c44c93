package agent_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// rssKiB reads the agent's resident set size.
func (n *node) rssKiB() float64 {
	n.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.AgentPID()))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				n.t.Fatal(err)
			}
			return kib
		}
	}
	n.t.Fatal("no VmRSS in /proc status")
	return 0
}

// BenchmarkAssignmentToRestart measures, on loopback against a real
// kube-apiserver and a real kubelet, from the PATCH that changes a Node's
// assignment:
//
//   - restart-ms: to the kubelet restart the agent issues for it (after
//     downloading, checkpointing, validating and writing the kubelet's
//     file): the agent's part, stamped by the kubelet's unit when the
//     restart command reaches it, so polling adds nothing;
//   - started-ms: to the new kubelet process's start, once the unit has
//     stopped the old one (SIGTERM, and its exit);
//   - healthz-ms: to the restarted kubelet answering /healthz on the new
//     configuration (polled every 5ms);
//   - node-ms: to the Node reporting the new configuration's pod capacity,
//     written by the kubelet itself (seen through a watch).
//
// It also reports the agent's RSS at rest (local configuration, nothing to
// do) and after the run. Run it with enough iterations for a p99:
//
//	go test -run '^$' -bench AssignmentToRestart -benchtime 20x ./test/e2e/agent/
func BenchmarkAssignmentToRestart(b *testing.B) {
	n := newNode(b, nodeOptions{agentArgs: []string{"--trial-period=1h"}})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	// Let start-up garbage be collected before calling the agent idle.
	time.Sleep(2 * time.Second)
	restRSS := n.rssKiB()

	maxPods := []int64{42, 43}
	cms := []*corev1.ConfigMap{n.configMap("kubelet-a", "maxPods: 42\n"), n.configMap("kubelet-b", "maxPods: 43\n")}
	var restart, started, healthz, reported []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		which := (i + 1) % 2
		before := len(n.restartRecords())
		watch, err := env.Admin.CoreV1().Nodes().Watch(n.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.Name})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n.assign(cms[which].Name)
		reportedAt := make(chan time.Time, 1)
		go func() {
			defer watch.Stop()
			for ev := range watch.ResultChan() {
				if node, ok := ev.Object.(*corev1.Node); ok && capacityPods(node) == maxPods[which] {
					reportedAt <- time.Now()
					return
				}
			}
		}()
		var restarted framework.KubeletRestart
		n.eventually("the restart for "+cms[which].Name, func() (bool, string) {
			records := n.restartRecords()
			if len(records) <= before {
				return false, "no restart yet"
			}
			restarted = records[len(records)-1]
			return true, ""
		})
		n.eventually("the kubelet to answer /healthz on "+cms[which].Name, func() (bool, string) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.KubeletHealthzPort))
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
		healthyAt := time.Now()
		var nodeAt time.Time
		select {
		case nodeAt = <-reportedAt:
		case <-time.After(waitTimeout):
			b.Fatalf("the Node never reported maxPods %d", maxPods[which])
		}
		b.StopTimer()
		data, err := os.ReadFile(n.KubeletConfigFile)
		if err != nil || !strings.Contains(string(data), fmt.Sprintf("maxPods: %d", maxPods[which])) {
			b.Fatalf("the kubelet file is not %s's: %s %v", cms[which].Name, data, err)
		}
		sum := sha256.Sum256(data)
		if restarted.SHA256 != hex.EncodeToString(sum[:]) {
			b.Fatalf("the kubelet restarted with another file than %s's", cms[which].Name)
		}
		if restarted.Asked.IsZero() {
			b.Fatalf("the kubelet's start was not asked for by a command: %+v", restarted)
		}
		restart = append(restart, restarted.Asked.Sub(start))
		started = append(started, restarted.Time.Sub(start))
		healthz = append(healthz, healthyAt.Sub(start))
		reported = append(reported, nodeAt.Sub(start))
		// Wait for the agent's report, so the next PATCH starts from rest.
		n.waitReport(cms[which].Name+" on trial", func(o framework.Report) bool { return is(o.Status.Active, cms[which]) })
		b.StartTimer()
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"restart", restart}, {"started", started}, {"healthz", healthz}, {"node", reported}} {
		slices.Sort(m.d)
		percentile := func(p float64) float64 {
			return float64(m.d[int(float64(len(m.d)-1)*p)].Microseconds()) / 1000
		}
		b.ReportMetric(percentile(0.5), m.name+"-p50-ms")
		b.ReportMetric(percentile(0.99), m.name+"-p99-ms")
	}
	b.ReportMetric(restRSS, "rest-rss-KiB")
	b.ReportMetric(n.rssKiB(), "final-rss-KiB")
	b.ReportMetric(0, "ns/op")
}
