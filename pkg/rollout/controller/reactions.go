package controller

import (
	"sync"
	"time"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// reactions times the controller's own reaction to a Node passing its
// trial, for nodeguard_rollout_reaction_seconds: from the moment its Node
// informer handed over the update that shows the pass until it sent the
// assignment that fills the freed slot. Passes and assignments are paired
// first in, first out, so each assignment answers the pass that waited
// longest. The watch's delivery before the handler and the patch's round
// trip after it are the apiserver's, and not in it.
type reactions struct {
	mu sync.Mutex
	// passed are the passes no assignment has answered yet, oldest first.
	passed []time.Time
}

// decided records the passes in a decision's changed verdicts (a Node that
// was in trial and is now updated), each at the time the informer handed
// over its change (handedOver, rolloutState's; at now when none was
// recorded). A decision that leaves nothing to assign (no Node pending, or
// the rollout paused or failed) forgets the passes waiting: no assignment
// will answer them, and a later one must not be charged with them.
func (r *reactions) decided(changed []rollout.NodeResult, previous map[string]rollout.NodeState, handedOver map[string]time.Time, nothingToAssign bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range changed {
		if previous[res.Name] != rollout.StateInTrial || res.State != rollout.StateUpdated {
			continue
		}
		at, ok := handedOver[res.Name]
		if !ok {
			at = now
		}
		r.passed = append(r.passed, at)
	}
	if nothingToAssign {
		r.passed = nil
	}
}

// assigning pairs an assignment sent at now with the oldest pass waiting,
// and returns how long that pass waited; false when none was waiting (the
// canary, the first batch, a Node that joined the pool).
func (r *reactions) assigning(now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.passed) == 0 {
		return 0, false
	}
	at := r.passed[0]
	r.passed = r.passed[1:]
	return now.Sub(at), true
}
