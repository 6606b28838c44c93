package compare

import (
	"context"
	"fmt"
	"runtime"
	"time"

	intree "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// poolSize requests of each kind are cycled through, so that a benchmark
// touches many nodes and objects rather than one hot cache line. It is a
// power of two so that picking the next request is a mask.
const poolSize = 1 << 12

// A loop runs n operations and reports the first wrong answer. The same
// loops back the runner's measurements and the package's Benchmark
// functions, which hand them b.N.
type loop func(n int) error

// ourDecisions runs Authorize over a pool, checking every answer.
func ourDecisions(a *authz.Authorizer, reqs []cluster.Request) loop {
	specs, want := ourRequests(reqs)
	return func(n int) error {
		for i := range n {
			k := i & (poolSize - 1)
			if got := a.Authorize(specs[k]); got.Decision != want[k] {
				return fmt.Errorf("nodeguard answered %s to %+v", got.Decision, reqs[k])
			}
		}
		return nil
	}
}

// inTreeDecisions runs the in-tree Authorize over the same pool.
func inTreeDecisions(a *intree.NodeAuthorizer, reqs []cluster.Request) loop {
	attrs, want := inTreeRequests(reqs)
	ctx := context.Background()
	return func(n int) error {
		for i := range n {
			k := i & (poolSize - 1)
			if got, _, _ := a.Authorize(ctx, attrs[k]); got != want[k] {
				return fmt.Errorf("in-tree answered %v to %+v", got, reqs[k])
			}
		}
		return nil
	}
}

// ourLookups runs CanReadConfigMap alone over a pool.
func ourLookups(g *graph.Graph, reqs []cluster.Request) loop {
	return func(n int) error {
		for i := range n {
			r := &reqs[i&(poolSize-1)]
			if g.CanReadConfigMap(r.Node, r.Namespace, r.Name) != r.Allowed {
				return fmt.Errorf("nodeguard's graph answered %v to %+v", !r.Allowed, *r)
			}
		}
		return nil
	}
}

// Micro is one single-goroutine measurement, in testing.B's units.
type Micro struct {
	NsPerOp     float64
	AllocsPerOp float64
	BytesPerOp  float64
}

// measure does what testing.B does (grow n until a run lasts about target,
// count allocations through the runtime's statistics) except collect
// garbage before every run: testing.B does, and with the in-tree graph
// alive a full collection is slow enough to dominate this phase.
func measure(body loop, target time.Duration) (Micro, error) {
	n := 1
	for {
		start := time.Now()
		if err := body(n); err != nil {
			return Micro{}, err
		}
		elapsed := time.Since(start)
		if elapsed >= target/20 || n >= 1<<30 {
			n = max(n, int(float64(n)*float64(target)/float64(max(elapsed, time.Microsecond))))
			break
		}
		n *= 10
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := body(n)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return Micro{}, err
	}
	return Micro{
		NsPerOp:     float64(elapsed.Nanoseconds()) / float64(n),
		AllocsPerOp: float64(after.Mallocs-before.Mallocs) / float64(n),
		BytesPerOp:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}, nil
}

// fastest measures body rounds times and keeps the fastest: noise on a
// shared machine only ever adds time.
func fastest(best *Micro, body loop, target time.Duration) error {
	m, err := measure(body, target)
	if err != nil {
		return err
	}
	if best.NsPerOp == 0 || m.NsPerOp < best.NsPerOp {
		*best = m
	}
	return nil
}

// DecisionResult compares one request kind on one cluster.
type DecisionResult struct {
	Shape  cluster.Shape
	Kind   string
	Ours   Micro
	InTree Micro
	// OursNoMinimum is nodeguard without a minimum kubelet version, which
	// skips the per-request Node lookup; shown for information.
	OursNoMinimum Micro
}

// LookupResult is nodeguard's graph lookup alone, which has no in-tree
// counterpart that can be called on its own.
type LookupResult struct {
	Shape cluster.Shape
	Kind  string
	Ours  Micro
}

// decisionKinds are the request classes compared, each on its own and
// interleaved.
var decisionKinds = []cluster.Kind{cluster.AllowedRead, cluster.RefusedRead, cluster.NonNode}

// decisionPools builds a pool per kind plus the interleaved mix.
func decisionPools(s cluster.Shape) (names []string, pools [][]cluster.Request) {
	for _, k := range decisionKinds {
		names = append(names, k.String())
		pools = append(pools, s.Requests(k, poolSize, 1))
	}
	names = append(names, "mix of the three")
	pools = append(pools, s.Mixed(decisionKinds, poolSize, 1))
	return names, pools
}

// measureDecisions runs the decision loops in alternating rounds and keeps
// each side's fastest round.
func measureDecisions(s cluster.Shape, ours, oursNoMinimum *authz.Authorizer, theirs *intree.NodeAuthorizer, rounds int, target time.Duration) ([]DecisionResult, error) {
	names, pools := decisionPools(s)
	results := make([]DecisionResult, len(pools))
	for i := range pools {
		r := &results[i]
		*r = DecisionResult{Shape: s, Kind: names[i]}
		ourLoop, theirLoop, noMinLoop := ourDecisions(ours, pools[i]), inTreeDecisions(theirs, pools[i]), ourDecisions(oursNoMinimum, pools[i])
		for range rounds {
			for _, m := range []struct {
				best *Micro
				body loop
			}{{&r.Ours, ourLoop}, {&r.InTree, theirLoop}, {&r.OursNoMinimum, noMinLoop}} {
				if err := fastest(m.best, m.body, target); err != nil {
					return nil, fmt.Errorf("%s, %s: %w", s, names[i], err)
				}
			}
		}
	}
	return results, nil
}

// measureLookups measures the graph lookup alone, for paths that exist and
// paths that do not.
func measureLookups(s cluster.Shape, g *graph.Graph, rounds int, target time.Duration) ([]LookupResult, error) {
	var results []LookupResult
	for _, k := range []cluster.Kind{cluster.AllowedRead, cluster.RefusedRead} {
		r := LookupResult{Shape: s, Kind: k.String()}
		body := ourLookups(g, s.Requests(k, poolSize, 2))
		for range rounds {
			if err := fastest(&r.Ours, body, target); err != nil {
				return nil, fmt.Errorf("%s, lookup %s: %w", s, k, err)
			}
		}
		results = append(results, r)
	}
	return results, nil
}
