package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// expectations are, per rollout, the status write whose effect the
// rollout cache must show before the controller decides on that rollout
// again: the next decision reads the status (its target, its Failed
// condition) and writes the next one over its resourceVersion. The Node
// writes are read through unseen instead, without waiting.
//
// A write is known by the resourceVersion it produced: the cache shows it
// once the cached object's resourceVersion is that one or a later one.
// resourceVersions are comparable integers since Kubernetes 1.35
// (KEP-5504), which is what makes "later" sound even when another writer
// came between. A server whose resourceVersions do not compare falls back
// on equality: the write is shown once the cache carries none of the
// versions the write was made over, the decision's and those read again on
// a conflict.
type expectations struct {
	mu        sync.Mutex
	byRollout map[string]expected
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

// expected is one rollout's outstanding status write and when it was
// recorded.
type expected struct {
	write write
	since time.Time
}

func newExpectations(timeout time.Duration) *expectations {
	return &expectations{byRollout: map[string]expected{}, timeout: timeout}
}

// expectRollout records a successful status write.
func (e *expectations) expectRollout(rollout string, w write, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byRollout[rollout] = expected{write: w, since: now}
}

// satisfied reports whether the rollout cache, holding rolloutVersion,
// shows the outstanding status write of rollout, dropping it once it does.
// Past the timeout it is dropped, so that a write whose event never comes
// cannot stall the rollout; wait is how long is left otherwise.
func (e *expectations) satisfied(rollout string, rolloutVersion string, now time.Time) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, found := e.byRollout[rollout]
	if !found {
		return true, 0
	}
	if x.write.shownBy(rolloutVersion) {
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
