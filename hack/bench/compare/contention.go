package compare

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	intree "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// writeInterval is how often the writer adds or deletes its pod, as in the
// in-tree BenchmarkAuthorization's contention variant.
const writeInterval = 10 * time.Millisecond

// WriteLatency summarises the writer's calls while readers were busy.
type WriteLatency struct {
	Writes   int
	P50, P99 time.Duration
	Max      time.Duration
	// ReadsPerSecond is what all readers together decided meanwhile.
	ReadsPerSecond float64
}

// ContentionResult compares write latency under the same readers.
type ContentionResult struct {
	Shape   cluster.Shape
	Readers int
	Ours    WriteLatency
	InTree  WriteLatency
}

// readFunc decides requests until stop is set, starting at offset in the
// pool, and returns how many it decided.
type readFunc func(stop *atomic.Bool, offset int) uint64

// contend runs readers goroutines of read while one writer calls write
// every writeInterval for duration, timing each call.
func contend(readers int, duration time.Duration, read readFunc, write func(add bool)) WriteLatency {
	runtime.GC()
	var (
		stop  atomic.Bool
		reads atomic.Uint64
		wg    sync.WaitGroup
	)
	// On two cores most readers wait for the CPU at any moment. The writer
	// does not wait for every one of them to have run once: with readers
	// that never yield, 10,000 of them and 10 ms slices, that alone would
	// take most of a minute.
	readStart := time.Now()
	for r := range readers {
		wg.Go(func() { reads.Add(read(&stop, r*7)) })
	}

	var latencies []time.Duration
	ticker := time.NewTicker(writeInterval)
	start := time.Now()
	add := true
	for end := start.Add(duration); time.Now().Before(end); add = !add {
		<-ticker.C
		t0 := time.Now()
		write(add)
		latencies = append(latencies, time.Since(t0))
	}
	ticker.Stop()
	stop.Store(true)
	readTime := time.Since(readStart)
	wg.Wait()
	if !add {
		// The last write added the pod: take it back, untimed, so that the
		// next measurement starts from the same graph.
		write(false)
	}

	slices.Sort(latencies)
	return WriteLatency{
		Writes:         len(latencies),
		P50:            percentile(latencies, 0.50),
		P99:            percentile(latencies, 0.99),
		Max:            percentile(latencies, 1),
		ReadsPerSecond: float64(reads.Load()) / readTime.Seconds(),
	}
}

// percentile of sorted samples, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// Readers yield every yieldEvery decisions (never when it is 0), the way
// request handlers give up the CPU between requests. Readers that never
// yield turn the test into one of the Go scheduler: a goroutine preempted
// at the end of a 10 ms time slice, which a writer woken by its ticker
// inherits, joins the global run queue behind every reader and waits
// readers x the time slice / GOMAXPROCS, whatever graph it is writing to.

func ourReaders(a *authz.Authorizer, specs []*authorizationv1.SubjectAccessReviewSpec, yieldEvery int) readFunc {
	return func(stop *atomic.Bool, offset int) uint64 {
		var n uint64
		for k := offset; !stop.Load(); k++ {
			a.Authorize(specs[k&(poolSize-1)])
			n++
			if yieldEvery > 0 && n%uint64(yieldEvery) == 0 {
				runtime.Gosched()
			}
		}
		return n
	}
}

func inTreeReaders(a *intree.NodeAuthorizer, attrs []authorizer.Attributes, yieldEvery int) readFunc {
	ctx := context.Background()
	return func(stop *atomic.Bool, offset int) uint64 {
		var n uint64
		for k := offset; !stop.Load(); k++ {
			_, _, _ = a.Authorize(ctx, attrs[k&(poolSize-1)])
			n++
			if yieldEvery > 0 && n%uint64(yieldEvery) == 0 {
				runtime.Gosched()
			}
		}
		return n
	}
}

// measureContention runs each reader count against both graphs in
// alternating rounds.
func measureContention(s cluster.Shape, g *graph.Graph, ours *authz.Authorizer, tg *intree.Graph, theirs *intree.NodeAuthorizer,
	readerCounts []int, duration time.Duration, yieldEvery, rounds int) []ContentionResult {
	mix := s.Mixed(decisionKinds, poolSize, 3)
	specs, _ := ourRequests(mix)
	attrs, _ := inTreeRequests(mix)
	pod := writePod(s)
	writeOurs := func(add bool) {
		if add {
			g.UpsertPod(pod)
		} else {
			g.DeletePod(pod.Namespace, pod.Name)
		}
	}
	writeInTree := func(add bool) {
		if add {
			tg.AddPod(pod)
		} else {
			tg.DeletePod(pod.Name, pod.Namespace)
		}
	}
	var results []ContentionResult
	for _, readers := range readerCounts {
		var ourRounds, theirRounds []WriteLatency
		for range rounds {
			ourRounds = append(ourRounds, contend(readers, duration, ourReaders(ours, specs, yieldEvery), writeOurs))
			theirRounds = append(theirRounds, contend(readers, duration, inTreeReaders(theirs, attrs, yieldEvery), writeInTree))
		}
		results = append(results, ContentionResult{
			Shape:   s,
			Readers: readers,
			Ours:    medianRound(ourRounds),
			InTree:  medianRound(theirRounds),
		})
	}
	return results
}

// medianRound is the round whose p99 is the median: one round disturbed by
// the machine's neighbours should not decide the comparison.
func medianRound(rounds []WriteLatency) WriteLatency {
	slices.SortFunc(rounds, func(a, b WriteLatency) int { return cmp.Compare(a.P99, b.P99) })
	return rounds[len(rounds)/2]
}
