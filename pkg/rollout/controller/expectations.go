package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// expectations are, per rollout, the writes the controller made whose
// effect its caches must show before it decides on that rollout again.
//
// A write is known by the resourceVersion it produced: the cache shows it
// once the cached object's resourceVersion is that one or a later one.
// resourceVersions are comparable integers since Kubernetes 1.35
// (KEP-5504), which is what makes "later" sound even when another writer
// (a kubelet's heartbeat) came between. A server whose resourceVersions do
// not compare falls back on equality: the write is shown once the cache
// carries none of the versions the write was made over, the decision's
// and those read again on a conflict.
type expectations struct {
	mu        sync.Mutex
	byRollout map[string]*expected
	timeout   time.Duration
}

// write is one successful write of an object.
type write struct {
	// produced is the resourceVersion the write returned.
	produced string
	// over are the resourceVersions it was made over: the decision's, then
	// any read again after a conflict, all older than produced.
	over []string
}

// shownBy reports whether a cache holding version cached shows the write.
func (w write) shownBy(cached string) bool {
	if c, err := resourceversion.CompareResourceVersion(cached, w.produced); err == nil {
		return c >= 0
	}
	return !slices.Contains(w.over, cached)
}

// expected is one rollout's outstanding writes.
type expected struct {
	// nodes are the patched Nodes' writes, by name.
	nodes map[string]write
	// rollout is the status write; nil when none is outstanding.
	rollout *write
	// since is when the oldest outstanding write was recorded.
	since time.Time
}

func newExpectations(timeout time.Duration) *expectations {
	return &expectations{byRollout: map[string]*expected{}, timeout: timeout}
}

func (e *expectations) getLocked(rollout string, now time.Time) *expected {
	x, ok := e.byRollout[rollout]
	if !ok {
		x = &expected{nodes: map[string]write{}, since: now}
		e.byRollout[rollout] = x
	}
	return x
}

// expectNode records a successful patch of node.
func (e *expectations) expectNode(rollout, node string, w write, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.getLocked(rollout, now).nodes[node] = w
}

// expectRollout records a successful status write.
func (e *expectations) expectRollout(rollout string, w write, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.getLocked(rollout, now).rollout = &w
}

// satisfied reports whether the caches show every outstanding write of
// rollout, dropping those they show. nodeVersion gives a cached Node's
// resourceVersion (ok false when the Node is gone, which satisfies its
// expectation: there is nothing left to decide on); rolloutVersion is the
// cached rollout's. Past the timeout the expectations are dropped, so that
// a write whose event never comes cannot stall the rollout; wait is how
// long is left otherwise.
func (e *expectations) satisfied(rollout string, rolloutVersion string, nodeVersion func(string) (string, bool), now time.Time) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, found := e.byRollout[rollout]
	if !found {
		return true, 0
	}
	for node, w := range x.nodes {
		if rv, exists := nodeVersion(node); !exists || w.shownBy(rv) {
			delete(x.nodes, node)
		}
	}
	if x.rollout != nil && x.rollout.shownBy(rolloutVersion) {
		x.rollout = nil
	}
	if len(x.nodes) == 0 && x.rollout == nil {
		delete(e.byRollout, rollout)
		return true, 0
	}
	if left := x.since.Add(e.timeout).Sub(now); left > 0 {
		return false, left
	}
	delete(e.byRollout, rollout)
	return true, 0
}

// forget drops everything about rollout.
func (e *expectations) forget(rollout string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byRollout, rollout)
}
