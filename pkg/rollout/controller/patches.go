package controller

import (
	"context"
	"sync"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// maxPatchesInFlight bounds the Node patches of one sync sent at once.
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

// patchAll sends changes in groups, each sent at once and awaited before
// the next. The first group holds first changes, each next one twice as
// many, up to maxPatchesInFlight: started at one, that is ReplicaSet's
// slowStartBatch. When stopOnRefusal is set it sends no group after one in
// which a change was refused. The outcomes are in the order of changes;
// changes never sent are left out.
func patchAll(ctx context.Context, changes []rollout.Change, first int, stopOnRefusal bool, send func(context.Context, rollout.Change) (string, error)) []patched {
	out := make([]patched, 0, len(changes))
	for size := min(max(first, 1), maxPatchesInFlight); len(out) < len(changes); size = min(2*size, maxPatchesInFlight) {
		group := changes[len(out):min(len(out)+size, len(changes))]
		results := make([]patched, len(group))
		var wg sync.WaitGroup
		for i, change := range group {
			wg.Go(func() {
				result, err := send(ctx, change)
				results[i] = patched{change: change, result: result, err: err}
			})
		}
		wg.Wait()
		out = append(out, results...)
		if stopOnRefusal && anyRefused(results) {
			break
		}
	}
	return out
}

// firstAssignments is how many assignments of d go in patchAll's first
// group. Until admission has let the target onto a selected Node (the
// decision counts one updated, in trial or failed on it), one: a target it
// refuses everywhere (an ineligible ConfigMap, say) is then refused on one
// Node, not on a group. Afterwards as many as may be in flight: a refusal
// now is one Node's (its kubelet's version or feature gates), and what its
// group assigns beside it is within maxUnavailable, reverted with the rest
// when the rollout fails.
func firstAssignments(d rollout.Decision) int {
	if d.Status.Updated+d.Status.InTrial+d.Status.Failed > 0 {
		return maxPatchesInFlight
	}
	return 1
}

func anyRefused(results []patched) bool {
	for _, r := range results {
		if r.result == resultRefused {
			return true
		}
	}
	return false
}
