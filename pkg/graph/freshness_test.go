package graph

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

const testStaleAfter = 10 * time.Second

var errRefused = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")

// scriptedListWatch answers lists and watches as a test tells it to.
type scriptedListWatch struct {
	mu       sync.Mutex
	list     func() (runtime.Object, error)
	watchErr error
	watches  []*watch.FakeWatcher
}

func (s *scriptedListWatch) List(metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	list := s.list
	s.mu.Unlock()
	if list == nil {
		return &metav1.PartialObjectMetadataList{}, nil
	}
	return list()
}

func (s *scriptedListWatch) Watch(metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchErr != nil {
		return nil, s.watchErr
	}
	w := watch.NewFakeWithChanSize(10, false)
	s.watches = append(s.watches, w)
	return w, nil
}

func (s *scriptedListWatch) setList(list func() (runtime.Object, error)) {
	s.mu.Lock()
	s.list = list
	s.mu.Unlock()
}

func (s *scriptedListWatch) lastWatch() *watch.FakeWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watches) == 0 {
		return nil
	}
	return s.watches[len(s.watches)-1]
}

// IsWatchListSemanticsUnSupported keeps reflectors on list-then-watch,
// which these fakes script.
func (s *scriptedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

type freshnessHarness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	graph   *Graph
	fresh   *Freshness
	monitor map[string]cache.ListerWatcher
	// opened holds, per informer, the watches opened through the monitor.
	opened map[string][]watch.Interface
	fakes  map[string][]*watch.FakeWatcher
}

type step func(h *freshnessHarness)

func list(name string) step {
	return func(h *freshnessHarness) {
		if _, err := h.monitor[name].List(metav1.ListOptions{}); err != nil {
			h.t.Fatalf("list %s: %v", name, err)
		}
	}
}

func listFails(name string) step {
	return func(h *freshnessHarness) {
		lw := &scriptedListWatch{list: func() (runtime.Object, error) { return nil, errRefused }}
		wrapped := h.fresh.monitorSource(h.sourceOf(name), lw)
		if _, err := wrapped.List(metav1.ListOptions{}); err == nil {
			h.t.Fatalf("list %s succeeded, want the scripted failure", name)
		}
	}
}

func openWatch(name string, streaming bool) step {
	return func(h *freshnessHarness) {
		opts := metav1.ListOptions{}
		if streaming {
			opts.SendInitialEvents = new(bool)
			*opts.SendInitialEvents = true
		}
		w, err := h.monitor[name].Watch(opts)
		if err != nil {
			h.t.Fatalf("watch %s: %v", name, err)
		}
		h.opened[name] = append(h.opened[name], w)
	}
}

// endWatch closes the i-th watch of the informer from the server side and
// waits until the monitor has seen it end.
func endWatch(name string, i int) step {
	return func(h *freshnessHarness) {
		h.fakeWatch(name, i).Stop()
		for range h.opened[name][i].ResultChan() {
		}
	}
}

// expired sends the 410 Gone a watch gets when its resource version is no
// longer served, as after an apiserver restart.
func expired(name string) step {
	return func(h *freshnessHarness) {
		last := len(h.opened[name]) - 1
		h.fakeWatch(name, last).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
		<-h.opened[name][last].ResultChan()
	}
}

func initialEventsEnd(name string) step {
	return func(h *freshnessHarness) {
		last := len(h.opened[name]) - 1
		h.fakeWatch(name, last).Action(watch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		<-h.opened[name][last].ResultChan()
	}
}

func advance(d time.Duration) step { return func(h *freshnessHarness) { h.clock.Step(d) } }

// expectStale checks the graph's state. A crossing of the bound is seen by
// a timer in its own goroutine, so a wanted stale is polled for; fresh
// transitions happen in the call that reconnects.
func expectStale(want bool, detail ...string) step {
	return func(h *freshnessHarness) {
		h.t.Helper()
		if want {
			err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
				func(context.Context) (bool, error) { return h.graph.Stale(), nil })
			if err != nil {
				h.t.Fatal("graph did not become stale")
			}
		} else if h.graph.Stale() {
			h.t.Fatalf("graph stale, want fresh: %v", h.fresh.Check())
		}
		check := h.fresh.Check()
		if (h.fresh.Degraded() != "") != want {
			h.t.Fatalf("Degraded() = %q, want a detail = %v", h.fresh.Degraded(), want)
		}
		if (check != nil) != want {
			h.t.Fatalf("Check() = %v, want failing = %v", check, want)
		}
		for _, d := range detail {
			if !strings.Contains(check.Error(), d) {
				h.t.Fatalf("Check() = %q, want it to name %q", check, d)
			}
		}
	}
}

func (h *freshnessHarness) fakeWatch(name string, i int) *watch.FakeWatcher { return h.fakes[name][i] }

func (h *freshnessHarness) sourceOf(name string) *source {
	return h.monitor[name].(*monitoredListWatch).source
}

// monitorSource wraps lw for an existing source, so that a step can script
// one failing call without replacing the informer's fake.
func (f *Freshness) monitorSource(s *source, lw cache.ListerWatcher) cache.ListerWatcher {
	return &monitoredListWatch{inner: cache.ToListerWatcherWithContext(lw), outer: lw, freshness: f, source: s}
}

// recordingListWatch remembers the fake watches it hands out.
type recordingListWatch struct {
	*scriptedListWatch
	h    *freshnessHarness
	name string
}

func (r recordingListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.scriptedListWatch.Watch(opts)
	if err == nil {
		r.h.fakes[r.name] = append(r.h.fakes[r.name], r.scriptedListWatch.lastWatch())
	}
	return w, err
}

func TestFreshness(t *testing.T) {
	tests := []struct {
		name    string
		sources []string
		steps   []step
	}{
		{"fresh while every informer lists and watches", []string{"nodes", "pods"}, []step{
			list("nodes"), openWatch("nodes", false), list("pods"), openWatch("pods", false),
			advance(time.Hour), expectStale(false),
		}},
		{"an informer never listed goes stale at the bound", []string{"nodes"}, []step{
			advance(testStaleAfter - time.Second), expectStale(false),
			advance(time.Second), expectStale(true, "nodes disconnected", "not listed yet"),
			list("nodes"), expectStale(false),
		}},
		{"a cut watch goes stale at the bound and a relist makes it fresh", []string{"pods"}, []step{
			list("pods"), openWatch("pods", false), endWatch("pods", 0),
			advance(testStaleAfter - time.Second), expectStale(false),
			advance(2 * time.Second), expectStale(true, "pods disconnected", "watch stream ended"),
			listFails("pods"), expectStale(true, "connection refused"),
			list("pods"), expectStale(false),
		}},
		{"a watch resumed where it stopped makes it fresh", []string{"pods"}, []step{
			list("pods"), openWatch("pods", false), endWatch("pods", 0),
			advance(testStaleAfter), expectStale(true),
			openWatch("pods", false), expectStale(false),
		}},
		{"reconnecting before the bound never marks it stale", []string{"pods"}, []step{
			list("pods"), openWatch("pods", false), endWatch("pods", 0),
			advance(testStaleAfter / 2), openWatch("pods", false),
			advance(time.Hour), expectStale(false),
		}},
		{"a 410 Gone on the watch counts as cut until the relist", []string{"configmaps"}, []step{
			list("configmaps"), openWatch("configmaps", false), expired("configmaps"),
			advance(testStaleAfter), expectStale(true, "too old resource version"),
			list("configmaps"), expectStale(false),
		}},
		{"the end of a watch already replaced is ignored", []string{"nodes"}, []step{
			list("nodes"), openWatch("nodes", false), list("nodes"), openWatch("nodes", false),
			endWatch("nodes", 0), advance(time.Hour), expectStale(false),
		}},
		{"a streaming list counts only once its initial state is in", []string{"nodes"}, []step{
			openWatch("nodes", true), advance(testStaleAfter), expectStale(true),
			initialEventsEnd("nodes"), expectStale(false),
		}},
		{"one cut informer is enough, and only its recovery clears it", []string{"nodes", "pods"}, []step{
			list("nodes"), openWatch("nodes", false), list("pods"), openWatch("pods", false),
			endWatch("pods", 0), advance(testStaleAfter), expectStale(true, "pods disconnected"),
			list("nodes"), expectStale(true),
			list("pods"), expectStale(false),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &freshnessHarness{t: t, clock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), graph: New(nil),
				monitor: map[string]cache.ListerWatcher{}, opened: map[string][]watch.Interface{}, fakes: map[string][]*watch.FakeWatcher{}}
			var err error
			if h.fresh, err = NewFreshness(h.graph, testStaleAfter, h.clock); err != nil {
				t.Fatal(err)
			}
			for _, name := range tt.sources {
				h.monitor[name] = h.fresh.monitor(name, recordingListWatch{&scriptedListWatch{}, h, name})
			}
			for _, s := range tt.steps {
				s(h)
			}
		})
	}
}

func TestNewFreshnessRefusesNonPositiveBound(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := NewFreshness(New(nil), d, nil); err == nil {
			t.Errorf("NewFreshness(%v) succeeded", d)
		}
	}
}

func TestUnmonitoredInformersNeverGoStale(t *testing.T) {
	var f *Freshness
	lw := &scriptedListWatch{}
	if got := f.monitor("pods", lw); got != cache.ListerWatcher(lw) {
		t.Fatalf("nil Freshness wrapped the ListerWatcher: %T", got)
	}
	if err := f.Check(); err != nil || f.Degraded() != "" {
		t.Fatalf("nil Freshness: Check() = %v, Degraded() = %q; want it always ready", err, f.Degraded())
	}
}
