package agent_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
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

// BenchmarkAssignmentToRestart measures, on loopback, the time from the
// PATCH that changes a Node's assignment to the kubelet restart the agent
// issues for it (after checkpointing, validating and writing the kubelet's
// file). The restart time is stamped by the stub kubelet when the restart
// signal arrives, so polling adds nothing to the figure. It also reports the
// agent's RSS at rest (local configuration, nothing to do) and after the
// run. Run it with enough iterations for a p99:
//
//	go test -run '^$' -bench AssignmentToRestart -benchtime 200x ./test/e2e/agent/
func BenchmarkAssignmentToRestart(b *testing.B) {
	n := newNode(b, nodeOptions{agentArgs: []string{"--trial-period=1h"}})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, status.ReasonLocalConfig) })
	// Let start-up garbage be collected before calling the agent idle.
	time.Sleep(2 * time.Second)
	restRSS := n.rssKiB()

	cms := []*corev1.ConfigMap{n.configMap("kubelet-a", "maxPods: 42\n"), n.configMap("kubelet-b", "maxPods: 43\n")}
	marker := []string{"maxPods: 42", "maxPods: 43"}
	var latencies []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		which := (i + 1) % 2
		before := len(n.restartRecords())
		start := time.Now()
		n.assign(cms[which].Name)
		var restarted framework.KubeletRestart
		n.eventually("the restart for "+cms[which].Name, func() (bool, string) {
			records := n.restartRecords()
			if len(records) <= before {
				return false, "no restart yet"
			}
			restarted = records[len(records)-1]
			return true, ""
		})
		b.StopTimer()
		data, err := os.ReadFile(n.KubeletConfigFile)
		if err != nil || !strings.Contains(string(data), marker[which]) {
			b.Fatalf("the kubelet file is not %s's: %s %v", cms[which].Name, data, err)
		}
		sum := sha256.Sum256(data)
		if restarted.SHA256 != hex.EncodeToString(sum[:]) {
			b.Fatalf("the kubelet restarted with another file than %s's", cms[which].Name)
		}
		latencies = append(latencies, restarted.Time.Sub(start))
		// Wait for the agent's report, so the next PATCH starts from rest.
		n.waitReport(cms[which].Name+" on trial", func(o framework.Report) bool { return is(o.Status.Active, cms[which]) })
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(latencies)
	percentile := func(p float64) float64 {
		idx := int(float64(len(latencies)-1) * p)
		return float64(latencies[idx].Microseconds()) / 1000
	}
	b.ReportMetric(percentile(0.5), "p50-ms")
	b.ReportMetric(percentile(0.99), "p99-ms")
	b.ReportMetric(restRSS, "rest-rss-KiB")
	b.ReportMetric(n.rssKiB(), "final-rss-KiB")
	b.ReportMetric(0, "ns/op")
}
