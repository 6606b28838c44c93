package compare

import (
	"runtime"
	"slices"
	"time"

	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// Population is the cost of building a graph from a full cluster.
type Population struct {
	Duration time.Duration
	// HeapBytes is what the built graph keeps alive: live heap after a
	// collection with the graph held, minus live heap before building it.
	// The cluster's objects are alive throughout, so strings the graph
	// shares with them are not counted, for either contender.
	HeapBytes uint64
}

// PopulationResult compares building both graphs from one cluster.
type PopulationResult struct {
	Shape  cluster.Shape
	Ours   Population
	InTree Population
}

// ScalingPoint is nodeguard's population cost at one cluster size.
type ScalingPoint struct {
	Shape cluster.Shape
	Ours  Population
}

// NsPerPod and BytesPerPod normalise a population by the pods it holds.
func (p ScalingPoint) NsPerPod() float64 {
	return float64(p.Ours.Duration.Nanoseconds()) / float64(p.Shape.Pods())
}

func (p ScalingPoint) BytesPerPod() float64 {
	return float64(p.Ours.HeapBytes) / float64(p.Shape.Pods())
}

func liveHeap() uint64 {
	// Two cycles: the first may leave objects freed only by finalizers or
	// swept lazily.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// populate builds one graph and measures it. build must return the graph so
// that it stays alive until the heap has been read.
func populate[G any](c *cluster.Cluster, build func(*cluster.Cluster) G) Population {
	before := liveHeap()
	start := time.Now()
	g := build(c)
	elapsed := time.Since(start)
	after := liveHeap()
	runtime.KeepAlive(g)
	var retained uint64
	if after > before {
		retained = after - before
	}
	return Population{Duration: elapsed, HeapBytes: retained}
}

// typical takes the fastest duration (noise on a shared machine, page
// faults on memory the runtime returned to the OS among it, only ever adds
// time) and the median retained heap.
func typical(samples []Population) Population {
	durations := make([]time.Duration, len(samples))
	heaps := make([]uint64, len(samples))
	for i, s := range samples {
		durations[i], heaps[i] = s.Duration, s.HeapBytes
	}
	slices.Sort(durations)
	slices.Sort(heaps)
	return Population{Duration: durations[0], HeapBytes: heaps[len(heaps)/2]}
}

// measurePopulation builds both graphs in alternating rounds.
func measurePopulation(c *cluster.Cluster, rounds int) PopulationResult {
	var ours, theirs []Population
	for range rounds {
		ours = append(ours, populate(c, buildOurs))
		theirs = append(theirs, populate(c, buildInTree))
	}
	return PopulationResult{Shape: c.Shape, Ours: typical(ours), InTree: typical(theirs)}
}

// measureScaling builds nodeguard's graph alone at one size.
func measureScaling(c *cluster.Cluster, rounds int) ScalingPoint {
	var ours []Population
	for range rounds {
		ours = append(ours, populate(c, buildOurs))
	}
	return ScalingPoint{Shape: c.Shape, Ours: typical(ours)}
}
