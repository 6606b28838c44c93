package graph

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersSeeConsistentAnswers runs writers and lock-free
// readers together (meaningful under -race): a ConfigMap held by a pod that
// is never deleted must stay readable throughout, while other paths churn.
func TestConcurrentReadersSeeConsistentAnswers(t *testing.T) {
	g := New(nil)
	g.UpsertConfigMap(configMap("ns", "cfg", true))
	g.UpsertPod(pod("ns", "anchor", "n0", volumeCM("stable")))
	g.MarkSynced()

	var stop atomic.Bool
	var wrong atomic.Int64
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				if !g.CanReadConfigMap("n0", "ns", "stable") {
					wrong.Add(1)
				}
				g.CanReadConfigMap("n1", "ns", "cfg")
				g.Node("n1")
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("p%d", i%50)
		g.UpsertPod(pod("ns", name, fmt.Sprintf("n%d", i%3), volumeCM("churn"), volumeCM("stable")))
		g.UpsertNode(node("n1", fmt.Sprint(i), []string{"ns/cfg", ""}[i%2]))
		if i%7 == 0 {
			g.DeletePod("ns", name)
		}
	}
	stop.Store(true)
	readers.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("a permanent path was reported missing %d times", n)
	}
}

func BenchmarkCanReadConfigMap(b *testing.B) {
	g := New(nil)
	for n := 0; n < 1000; n++ {
		nodeName := fmt.Sprintf("node-%d", n)
		for p := 0; p < 30; p++ {
			g.UpsertPod(pod("ns", fmt.Sprintf("pod-%d-%d", n, p), nodeName,
				volumeCM(fmt.Sprintf("cm-%d-%d-a", n, p)), volumeCM(fmt.Sprintf("cm-%d-%d-b", n, p))))
		}
	}
	g.MarkSynced()
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !g.CanReadConfigMap("node-500", "ns", "cm-500-7-a") {
				b.Fatal("refused")
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if g.CanReadConfigMap("node-500", "ns", "cm-501-7-a") {
				b.Fatal("allowed")
			}
		}
	})
}
