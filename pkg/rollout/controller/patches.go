package controller

import (
	"context"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// maxPatchesInFlight bounds a rollout's Node patches sent at once.
// Patches one after the other cap a rollout at one Node per round trip to
// the apiserver, which on a large pool is slower than its Nodes finish
// their trials; a bound keeps one sync of a wide batch from crowding the
// apiserver's inflight limit, which the kubelets' heartbeats share.
const maxPatchesInFlight = 16

// patched is the outcome of one change sent by patchAll.
type patched struct {
	change rollout.Change
	result string
	err    error
}

// patchAll sends changes through a sliding window: a change is sent once
// every change a window or more ahead of it is answered, so a patch
// answered late holds its own slot, not a whole group behind it, and
// nothing goes out further than a window past the oldest change not yet
// answered. The window starts at first and grows by one for each change
// that applied, up to maxPatchesInFlight: started at one, it doubles every
// round trip, as ReplicaSet's slowStartBatch does every batch. When
// stopOnRefusal is set nothing is sent once a refusal is answered, so at
// most a window of changes follows a refused one; what is in flight then
// is awaited. The outcomes are in the order of changes; changes never sent
// are left out.
func patchAll(ctx context.Context, changes []rollout.Change, first int, stopOnRefusal bool, send func(context.Context, rollout.Change) (string, error)) []patched {
	results := make([]patched, len(changes))
	done := make([]bool, len(changes))
	answered := make(chan int)
	window := min(max(first, 1), maxPatchesInFlight)
	// oldest is the first change not yet answered.
	next, oldest, inFlight, stopped := 0, 0, 0, false
	for {
		for ; !stopped && next < oldest+window && next < len(changes); next++ {
			inFlight++
			go func(i int) {
				result, err := send(ctx, changes[i])
				results[i] = patched{change: changes[i], result: result, err: err}
				answered <- i
			}(next)
		}
		if inFlight == 0 {
			return results[:next]
		}
		i := <-answered
		inFlight--
		for done[i] = true; oldest < next && done[oldest]; oldest++ {
		}
		switch results[i].result {
		case resultOK:
			window = min(window+1, maxPatchesInFlight)
		case resultRefused:
			stopped = stopped || stopOnRefusal
		}
	}
}

// firstAssignments is patchAll's first window for the assignments of d.
// Until admission has let the target onto a selected Node (the decision
// counts one updated, in trial or failed on it), one: a target it refuses
// everywhere (an ineligible ConfigMap, say) is then refused on one Node,
// not on several. Afterwards as many as may be in flight: a refusal
// now is one Node's (its kubelet's version or feature gates), and what is
// assigned beside it is within maxUnavailable, reverted with the rest
// when the rollout fails.
func firstAssignments(d rollout.Decision) int {
	if d.Status.Updated+d.Status.InTrial+d.Status.Failed > 0 {
		return maxPatchesInFlight
	}
	return 1
}

// patchSlots is rollout's semaphore of maxPatchesInFlight: the assignments
// of one sync go out while an earlier sync's are still in flight, and
// together they stay within the bound.
func (c *Controller) patchSlots(rollout string) chan struct{} {
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	slots, ok := c.slots[rollout]
	if !ok {
		slots = make(chan struct{}, maxPatchesInFlight)
		c.slots[rollout] = slots
	}
	return slots
}
