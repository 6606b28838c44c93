package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/test/loadtest"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// Config sizes a comparison run.
type Config struct {
	// Scale multiplies every cluster's node count; 1 is the documented
	// size, smaller values make a quick check.
	Scale float64
	// Rounds is how often each measurement is repeated, alternating the
	// contenders.
	Rounds int
	// MicroDuration is how long each single-goroutine measurement runs.
	MicroDuration time.Duration
	// ContentionDuration is how long the writer writes for each reader
	// count and contender.
	ContentionDuration time.Duration
	// Readers are the reader goroutine counts of the contention test.
	Readers []int
	// ReaderYieldEvery makes each reader yield the CPU after that many
	// decisions; 0 never yields, like the in-tree benchmark's readers.
	ReaderYieldEvery int
	// Progress receives one line per phase; nil discards it.
	Progress io.Writer
}

// DefaultConfig is the documented run: about two and a half minutes on two
// cores.
func DefaultConfig() Config {
	return Config{Scale: 1, Rounds: 3, MicroDuration: 300 * time.Millisecond, ContentionDuration: 2 * time.Second, Readers: []int{2000, 10000}, ReaderYieldEvery: 32}
}

// Validate reports a config that cannot run.
func (c Config) Validate() error {
	if c.Scale <= 0 || c.Scale > 10 || math.IsNaN(c.Scale) {
		return fmt.Errorf("scale %v: want a value in (0, 10]", c.Scale)
	}
	if c.Rounds < 1 {
		return fmt.Errorf("rounds %d: want at least 1", c.Rounds)
	}
	if c.MicroDuration < time.Millisecond {
		return fmt.Errorf("micro duration %v: want at least 1ms", c.MicroDuration)
	}
	if c.ContentionDuration < 10*writeInterval {
		return fmt.Errorf("contention duration %v: want at least %v", c.ContentionDuration, 10*writeInterval)
	}
	if c.ReaderYieldEvery < 0 {
		return fmt.Errorf("reader yield interval %d: want 0 (never) or more", c.ReaderYieldEvery)
	}
	for _, r := range c.Readers {
		if r < 1 {
			return fmt.Errorf("reader count %d: want at least 1", r)
		}
	}
	return nil
}

// Machine describes where a report was measured.
type Machine struct {
	NumCPU     int
	GOMAXPROCS int
	GoVersion  string
	Platform   string
}

// Report is everything one run measured.
type Report struct {
	Machine Machine
	// Noise is how busy the machine was around the run.
	StallsBefore, StallsAfter loadtest.Stalls
	LoadBefore, LoadAfter     string

	Config      Config
	Duration    time.Duration
	Decisions   []DecisionResult
	Lookups     []LookupResult
	Populations []PopulationResult
	Scaling     []ScalingPoint
	Contention  []ContentionResult
}

// scalingRounds is the least number of rounds per scaling point: each is
// cheap, and per-pod costs compared across sizes need the noise floor.
const scalingRounds = 5

// stallProbe is how long the machine's stalls are sampled before and after
// the run.
const stallProbe = time.Second

// Clusters compared head to head: many small nodes, and few dense ones
// (the in-tree benchmarks' 500 x 200).
func comparedShapes() []cluster.Shape {
	return []cluster.Shape{
		{Nodes: 5000, PodsPerNode: 30, Namespaces: 100, EligibleConfigMaps: 10000},
		{Nodes: 500, PodsPerNode: 200, Namespaces: 200, EligibleConfigMaps: 10000},
	}
}

// scalingShapes hold 100k, 150k and 300k pods with the same per-node
// shape, so a per-pod cost that grows can only come from the graph's
// global structures.
func scalingShapes() []cluster.Shape {
	return []cluster.Shape{
		{Nodes: 3334, PodsPerNode: 30, Namespaces: 100, EligibleConfigMaps: 10000},
		{Nodes: 5000, PodsPerNode: 30, Namespaces: 100, EligibleConfigMaps: 10000},
		{Nodes: 10000, PodsPerNode: 30, Namespaces: 100, EligibleConfigMaps: 10000},
	}
}

func (c Config) scaled(s cluster.Shape) cluster.Shape {
	s.Nodes = max(2, int(math.Round(float64(s.Nodes)*c.Scale)))
	return s
}

func (c Config) logf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
}

// Run measures everything, in one process.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid comparison config: %w", err)
	}
	start := time.Now()
	rep := &Report{
		Config: cfg,
		Machine: Machine{
			NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		},
	}
	rep.LoadBefore, rep.StallsBefore = loadtest.LoadAverage(), loadtest.MeasureStalls(stallProbe)
	// Scaling goes first, in a process that has not yet grown and
	// fragmented its heap: the question is how the graph's cost grows with
	// the cluster, not how the process's state after minutes of other
	// phases does.
	for _, shape := range scalingShapes() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("comparison interrupted: %w", err)
		}
		shape = cfg.scaled(shape)
		c, err := cluster.Generate(shape)
		if err != nil {
			return nil, fmt.Errorf("generating cluster: %w", err)
		}
		cfg.logf("scaling: populating nodeguard's graph with %d pods", shape.Pods())
		rep.Scaling = append(rep.Scaling, measureScaling(c, max(cfg.Rounds, scalingRounds)))
	}
	for _, shape := range comparedShapes() {
		if err := compareOn(ctx, cfg, cfg.scaled(shape), rep); err != nil {
			return nil, err
		}
	}
	rep.StallsAfter, rep.LoadAfter = loadtest.MeasureStalls(stallProbe), loadtest.LoadAverage()
	rep.Duration = time.Since(start)
	return rep, nil
}

// compareOn runs every head-to-head measurement on one cluster.
func compareOn(ctx context.Context, cfg Config, shape cluster.Shape, rep *Report) error {
	c, err := cluster.Generate(shape)
	if err != nil {
		return fmt.Errorf("generating cluster: %w", err)
	}
	cfg.logf("%s: population, %d rounds", shape, cfg.Rounds)
	rep.Populations = append(rep.Populations, measurePopulation(c, cfg.Rounds))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("comparison interrupted: %w", err)
	}

	g, tg := buildOurs(c), buildInTree(c)
	ours, oursNoMinimum, theirs := newOurAuthorizer(g), authz.New(g, nil), newInTreeAuthorizer(tg)
	_, pools := decisionPools(shape)
	for _, pool := range pools {
		if err := checkAgreement(ours, theirs, pool); err != nil {
			return fmt.Errorf("%s: the graphs disagree, no figure would mean anything: %w", shape, err)
		}
	}
	cfg.logf("%s: decision latency", shape)
	decisions, err := measureDecisions(shape, ours, oursNoMinimum, theirs, cfg.Rounds, cfg.MicroDuration)
	if err != nil {
		return err
	}
	rep.Decisions = append(rep.Decisions, decisions...)
	lookups, err := measureLookups(shape, g, cfg.Rounds, cfg.MicroDuration)
	if err != nil {
		return err
	}
	rep.Lookups = append(rep.Lookups, lookups...)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("comparison interrupted: %w", err)
	}
	cfg.logf("%s: write latency under readers %v", shape, cfg.Readers)
	rep.Contention = append(rep.Contention, measureContention(shape, g, ours, tg, theirs, cfg.Readers, cfg.ContentionDuration, cfg.ReaderYieldEvery, cfg.Rounds)...)
	return nil
}
