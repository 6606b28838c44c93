package controller

import (
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// unseen are, per rollout, the Node changes the controller has sent whose
// effect its Node cache does not show yet: in flight, or answered and not
// yet delivered by the watch. The next decision reads each such Node as
// the change leaves it (overlay), so that it neither waits for the
// change's round trip nor moves the Node again, and counts a Node being
// assigned as unavailable from the moment the patch is sent.
//
// An answered change is known by the resourceVersion it produced and is
// dropped once the cache shows that version or a later one (write.shownBy),
// or after timeout, so that a watch event that never comes cannot hide the
// Node's real annotations for good. A change that failed is dropped at
// once: the Node is as the cache shows it.
type unseen struct {
	mu        sync.Mutex
	byRollout map[string]map[string]*unseenChange
	timeout   time.Duration
}

type unseenChange struct {
	change rollout.Change
	// answered is when the apiserver answered; zero while in flight.
	answered time.Time
	w        write
}

func newUnseen(timeout time.Duration) *unseen {
	return &unseen{byRollout: map[string]map[string]*unseenChange{}, timeout: timeout}
}

func (u *unseen) changesLocked(rollout string) map[string]*unseenChange {
	m, ok := u.byRollout[rollout]
	if !ok {
		m = map[string]*unseenChange{}
		u.byRollout[rollout] = m
	}
	return m
}

// sending records changes about to be sent.
func (u *unseen) sending(rollout string, changes []rollout.Change) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.changesLocked(rollout)
	for _, c := range changes {
		m[c.Node] = &unseenChange{change: c}
	}
}

// applied records the answer to a change sent: w is the write, change as
// it was last sent (its resourceVersion the one it applied over). The
// answer to a change of a rollout forgotten since is dropped.
func (u *unseen) applied(rollout string, change rollout.Change, w write, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m, ok := u.byRollout[rollout]
	if !ok {
		return
	}
	m[change.Node] = &unseenChange{change: change, answered: now, w: w}
}

// failed drops a change that did not apply.
func (u *unseen) failed(rollout, node string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byRollout[rollout], node)
}

// inFlight reports whether any change of rollout awaits its answer.
func (u *unseen) inFlight(rollout string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.byRollout[rollout] {
		if c.answered.IsZero() {
			return true
		}
	}
	return false
}

// forget drops everything about rollout.
func (u *unseen) forget(rollout string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byRollout, rollout)
}

// overlay returns the cached nodes with rollout's unseen changes applied,
// each to a copy (the cache's objects are never modified). An answered
// change also gives the copy the resourceVersion it produced, which the
// next change of that Node is made over. Changes the cache shows, or
// answered longer than the timeout ago, are dropped.
func (u *unseen) overlay(rollout string, nodes []*corev1.Node, now time.Time) []*corev1.Node {
	u.mu.Lock()
	defer u.mu.Unlock()
	changes := u.byRollout[rollout]
	if len(changes) == 0 {
		return nodes
	}
	out := make([]*corev1.Node, len(nodes))
	for i, node := range nodes {
		out[i] = node
		c, ok := changes[node.Name]
		if !ok {
			continue
		}
		if !c.answered.IsZero() && (c.w.shownBy(node.ResourceVersion) || now.Sub(c.answered) >= u.timeout) {
			delete(changes, node.Name)
			continue
		}
		changed := node.DeepCopy()
		changed.Annotations = maps.Clone(changed.Annotations)
		if changed.Annotations == nil {
			changed.Annotations = map[string]string{}
		}
		for key, value := range c.change.Annotations {
			if value == nil {
				delete(changed.Annotations, key)
			} else {
				changed.Annotations[key] = *value
			}
		}
		if !c.answered.IsZero() {
			changed.ResourceVersion = c.w.produced
		}
		out[i] = changed
	}
	for name, c := range changes {
		// A Node no longer selected (or gone) is not listed above.
		if !c.answered.IsZero() && now.Sub(c.answered) >= u.timeout {
			delete(changes, name)
		}
	}
	return out
}
