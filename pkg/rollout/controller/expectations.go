package controller

import (
	"sync"
	"time"
)

// expectations are, per rollout, the writes the controller made whose
// effect its caches must show before it decides on that rollout again.
// A write is recorded by the resourceVersion it was decided on (the
// patch's precondition, the status update's object): once the cached
// object carries another one, the cache has seen that write or a later
// one. resourceVersions are only compared for equality, as the API
// requires.
type expectations struct {
	mu        sync.Mutex
	byRollout map[string]*expected
	timeout   time.Duration
}

// expected is one rollout's outstanding writes.
type expected struct {
	// nodes maps a patched Node to the resourceVersion it was patched from.
	nodes map[string]string
	// rollout is the resourceVersion the status was written over; "" when
	// none is outstanding.
	rollout string
	// since is when the oldest outstanding write was recorded.
	since time.Time
}

func newExpectations(timeout time.Duration) *expectations {
	return &expectations{byRollout: map[string]*expected{}, timeout: timeout}
}

func (e *expectations) getLocked(rollout string, now time.Time) *expected {
	x, ok := e.byRollout[rollout]
	if !ok {
		x = &expected{nodes: map[string]string{}, since: now}
		e.byRollout[rollout] = x
	}
	return x
}

// expectNode records a successful patch of node, decided on its
// resourceVersion from.
func (e *expectations) expectNode(rollout, node, from string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.getLocked(rollout, now).nodes[node] = from
}

// expectRollout records a successful status write over resourceVersion from.
func (e *expectations) expectRollout(rollout, from string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.getLocked(rollout, now).rollout = from
}

// satisfied reports whether the caches show every outstanding write of
// rollout, dropping those they show. nodeVersion gives a cached Node's
// resourceVersion (ok false when the Node is gone, which satisfies its
// expectation: there is nothing left to decide on); rolloutVersion is the
// cached rollout's. Past the timeout the expectations are dropped, so that
// a write whose event never comes (the object was deleted and recreated
// with the very same resourceVersion, say) cannot stall the rollout; wait
// is how long is left otherwise.
func (e *expectations) satisfied(rollout string, rolloutVersion string, nodeVersion func(string) (string, bool), now time.Time) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, found := e.byRollout[rollout]
	if !found {
		return true, 0
	}
	for node, from := range x.nodes {
		if rv, exists := nodeVersion(node); !exists || rv != from {
			delete(x.nodes, node)
		}
	}
	if x.rollout != "" && rolloutVersion != x.rollout {
		x.rollout = ""
	}
	if len(x.nodes) == 0 && x.rollout == "" {
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
