package graph

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCutWatchRelistAppliesTombstones runs real informers over scripted
// lists and watches: the watches are cut, a ConfigMap and a pod are deleted
// while they are, and the graph goes stale at the bound; when lists work
// again the relist delivers the deletes as DeletedFinalStateUnknown
// tombstones, the graph drops both paths, and it is fresh again.
func TestCutWatchRelistAppliesTombstones(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g := New(metrics)
	fresh, err := NewFreshness(g, testStaleAfter, clock)
	if err != nil {
		t.Fatal(err)
	}

	n1, cmA := node("n1", "1", "ns/a"), configMap("ns", "a", true)
	cmB, p1 := configMap("ns", "b", true), pod("ns", "p1", "n2", volumeCM("b"))
	p1.ResourceVersion = "1"
	nodes := &scriptedListWatch{list: func() (runtime.Object, error) {
		return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []corev1.Node{*n1}}, nil
	}}
	pods := &scriptedListWatch{list: func() (runtime.Object, error) {
		return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []corev1.Pod{*p1}}, nil
	}}
	configMaps := &scriptedListWatch{list: func() (runtime.Object, error) {
		return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "10"},
			Items: []metav1.PartialObjectMetadata{*cmA, *cmB}}, nil
	}}
	inf := Informers{
		Nodes:      cache.NewSharedIndexInformer(fresh.monitor("nodes", nodes), &corev1.Node{}, 0, cache.Indexers{}),
		Pods:       cache.NewSharedIndexInformer(fresh.monitor("pods", pods), &corev1.Pod{}, 0, cache.Indexers{}),
		ConfigMaps: cache.NewSharedIndexInformer(fresh.monitor("configmaps", configMaps), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{}),
	}
	var tombstones atomic.Int32
	for _, i := range []cache.SharedIndexInformer{inf.Pods, inf.ConfigMaps} {
		if _, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				tombstones.Add(1)
			}
		}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := NewPopulator(g, inf)
	if err != nil {
		t.Fatal(err)
	}
	go p.Run(ctx)

	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v (stale=%v, check=%v)", what, err, g.Stale(), fresh.Check())
		}
	}
	watching := func(lw *scriptedListWatch) func() bool { return func() bool { return lw.lastWatch() != nil } }
	poll("the graph to sync", g.Synced)
	poll("the watches to open", func() bool { return watching(nodes)() && watching(pods)() && watching(configMaps)() })
	if !g.CanReadConfigMap("n1", "ns", "a") || !g.CanReadConfigMap("n2", "ns", "b") {
		t.Fatal("paths missing after sync")
	}
	if g.Stale() {
		t.Fatalf("stale after sync: %v", fresh.Check())
	}

	// Cut: every new call is refused and the open watches end.
	for _, lw := range []*scriptedListWatch{nodes, pods, configMaps} {
		lw.mu.Lock()
		lw.watchErr = errRefused
		lw.mu.Unlock()
		lw.setList(func() (runtime.Object, error) { return nil, errRefused })
		lw.lastWatch().Stop()
	}
	poll("the informers to see the cut", func() bool {
		return fresh.Check() == nil && func() bool {
			fresh.mu.Lock()
			defer fresh.mu.Unlock()
			for _, s := range fresh.sources {
				if s.connected {
					return false
				}
			}
			return true
		}()
	})
	if g.Stale() {
		t.Fatal("stale before the bound")
	}
	clock.Step(testStaleAfter)
	poll("the graph to go stale", g.Stale)
	if got := testutil.ToFloat64(metrics.stale); got != 1 {
		t.Errorf("nodeguard_graph_stale = %v while stale, want 1", got)
	}
	if !g.CanReadConfigMap("n1", "ns", "a") {
		t.Fatal("the stale graph should still hold the old path; only the authorizer stops trusting it")
	}

	// While cut, A and p1 are deleted; the relist is all that shows it.
	for _, lw := range []*scriptedListWatch{nodes, pods, configMaps} {
		lw.mu.Lock()
		lw.watchErr = nil
		lw.mu.Unlock()
	}
	configMaps.setList(func() (runtime.Object, error) {
		return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "20"}, Items: []metav1.PartialObjectMetadata{*cmB}}, nil
	})
	pods.setList(func() (runtime.Object, error) {
		return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "20"}}, nil
	})
	nodes.setList(func() (runtime.Object, error) {
		return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "20"}, Items: []corev1.Node{*n1}}, nil
	})
	poll("the deletes to reach the graph", func() bool {
		return !g.CanReadConfigMap("n1", "ns", "a") && !g.CanReadConfigMap("n2", "ns", "b")
	})
	poll("the graph to be fresh again", func() bool { return !g.Stale() })
	if got := tombstones.Load(); got != 2 {
		t.Fatalf("saw %d tombstones, want 2 (the ConfigMap and the pod)", got)
	}
	for _, informer := range []string{"pods", "configmaps"} {
		if got := testutil.ToFloat64(metrics.tombstones.WithLabelValues(informer)); got != 1 {
			t.Errorf("nodeguard_graph_tombstones_total{informer=%q} = %v, want 1", informer, got)
		}
		if got := testutil.ToFloat64(metrics.connected.WithLabelValues(informer)); got != 1 {
			t.Errorf("nodeguard_graph_informer_connected{informer=%q} = %v, want 1", informer, got)
		}
	}
	if got := testutil.ToFloat64(metrics.stale); got != 0 {
		t.Errorf("nodeguard_graph_stale = %v after recovery, want 0", got)
	}
	if got := g.NodesAssignedTo("ns", "a"); len(got) != 1 || got[0] != "n1" {
		t.Fatalf("NodesAssignedTo(ns/a) = %v: the assignment itself stands, only its ConfigMap is gone", got)
	}
}
