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

// patchAll sends changes in groups of growing size, as ReplicaSet's
// slowStartBatch does: one, then two, four and so on up to
// maxPatchesInFlight, each group sent at once and awaited before the next.
// When stopOnRefusal is set it sends no group after one in which a change
// was refused, so that a target admission refuses for every Node (an
// ineligible ConfigMap, say) is refused on one Node, not on a batch. The
// outcomes are in the order of changes; changes never sent are left out.
func patchAll(ctx context.Context, changes []rollout.Change, stopOnRefusal bool, send func(context.Context, rollout.Change) (string, error)) []patched {
	out := make([]patched, 0, len(changes))
	for size := 1; len(out) < len(changes); size = min(2*size, maxPatchesInFlight) {
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

func anyRefused(results []patched) bool {
	for _, r := range results {
		if r.result == resultRefused {
			return true
		}
	}
	return false
}
