package controller

import (
	"sync"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// refusals are the admission refusals of assignments not yet recorded in
// their rollout's status, kept by rollout and target version: a refusal is
// about one version of one ConfigMap, and must not fail the next one. They
// live in memory only: a controller that dies before writing the Failed
// condition tries the assignment again, and is refused again.
type refusals struct {
	mu        sync.Mutex
	byRollout map[string]refused
}

type refused struct {
	target contract.ObjectRef
	list   []rollout.Refusal
}

func newRefusals() *refusals { return &refusals{byRollout: map[string]refused{}} }

// add keeps a refusal of an assignment of target; refusals of an earlier
// target go.
func (r *refusals) add(name string, target contract.ObjectRef, refusal rollout.Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	entry := r.byRollout[name]
	if entry.target != target {
		entry = refused{target: target}
	}
	for _, have := range entry.list {
		if have.Node == refusal.Node {
			return
		}
	}
	entry.list = append(entry.list, refusal)
	r.byRollout[name] = entry
}

// of returns the refusals of assignments of target, the current one;
// nil target (no ConfigMap) has none.
func (r *refusals) of(name string, target *contract.ObjectRef) []rollout.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	entry, ok := r.byRollout[name]
	if !ok || target == nil || entry.target != *target {
		return nil
	}
	return append([]rollout.Refusal(nil), entry.list...)
}

// recorded drops the refusals of target once a status naming the failure
// of target is written.
func (r *refusals) recorded(name string, target contract.ObjectRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if entry, ok := r.byRollout[name]; ok && entry.target == target {
		delete(r.byRollout, name)
	}
}

func (r *refusals) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byRollout, name)
}
