package compare

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// benchShape is the in-tree benchmarks' own cluster: 500 nodes x 200 pods.
var benchShape = cluster.Shape{Nodes: 500, PodsPerNode: 200, Namespaces: 200, EligibleConfigMaps: 10000}

func TestRunSmall(t *testing.T) {
	cfg := Config{Scale: 0.01, Rounds: 1, MicroDuration: 5 * time.Millisecond, ContentionDuration: 100 * time.Millisecond,
		Readers: []int{20}, ReaderYieldEvery: 32}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Decisions), 2*(len(decisionKinds)+1); got != want {
		t.Errorf("%d decision results, want %d", got, want)
	}
	if len(rep.Lookups) != 4 || len(rep.Populations) != 2 || len(rep.Scaling) != 3 || len(rep.Contention) != 2 {
		t.Errorf("lookups %d, populations %d, scaling %d, contention %d; want 4, 2, 3, 2",
			len(rep.Lookups), len(rep.Populations), len(rep.Scaling), len(rep.Contention))
	}
	for _, c := range rep.Contention {
		if c.Ours.Writes == 0 || c.InTree.Writes == 0 {
			t.Errorf("%s, %d readers: no writes timed (%d, %d)", c.Shape, c.Readers, c.Ours.Writes, c.InTree.Writes)
		}
	}
	var out strings.Builder
	if err := rep.WriteMarkdown(&out); err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(out.String(), "| PASS |") + strings.Count(out.String(), "| **MISS** |"); rows != len(rep.Rows()) {
		t.Errorf("markdown has %d judged rows, report has %d:\n%s", rows, len(rep.Rows()), out.String())
	}
}

func TestCheckAgreementCatchesWrongExpectations(t *testing.T) {
	shape := cluster.Shape{Nodes: 4, PodsPerNode: 3, Namespaces: 2, EligibleConfigMaps: 4}
	c, err := cluster.Generate(shape)
	if err != nil {
		t.Fatal(err)
	}
	g, tg := buildOurs(c), buildInTree(c)
	ours, theirs := newOurAuthorizer(g), newInTreeAuthorizer(tg)
	for _, kind := range []cluster.Kind{cluster.AllowedRead, cluster.RefusedRead, cluster.NonNode} {
		reqs := shape.Requests(kind, 16, 1)
		if err := checkAgreement(ours, theirs, reqs); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		reqs[5].Allowed = !reqs[5].Allowed
		if err := checkAgreement(ours, theirs, reqs); err == nil {
			t.Errorf("%s: a flipped expectation went unnoticed", kind)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	valid := DefaultConfig()
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"default", func(*Config) {}, true},
		{"zero scale", func(c *Config) { c.Scale = 0 }, false},
		{"no rounds", func(c *Config) { c.Rounds = 0 }, false},
		{"tiny micro duration", func(c *Config) { c.MicroDuration = time.Microsecond }, false},
		{"contention shorter than ten writes", func(c *Config) { c.ContentionDuration = 50 * time.Millisecond }, false},
		{"no readers", func(c *Config) { c.Readers = []int{0} }, false},
		{"negative yield", func(c *Config) { c.ReaderYieldEvery = -1 }, false},
		{"never yield", func(c *Config) { c.ReaderYieldEvery = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.mutate(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// The Benchmark functions below run the runner's loops under testing.B,
// for `go test -bench` on one measurement at a time.

func BenchmarkDecision(b *testing.B) {
	c, err := cluster.Generate(benchShape)
	if err != nil {
		b.Fatal(err)
	}
	g, tg := buildOurs(c), buildInTree(c)
	contenders := []struct {
		name string
		loop func([]cluster.Request) loop
	}{
		{"nodeguard", func(r []cluster.Request) loop { return ourDecisions(newOurAuthorizer(g), r) }},
		{"nodeguard-no-minimum", func(r []cluster.Request) loop { return ourDecisions(authz.New(g, nil), r) }},
		{"in-tree", func(r []cluster.Request) loop { return inTreeDecisions(newInTreeAuthorizer(tg), r) }},
	}
	names, pools := decisionPools(benchShape)
	for i, pool := range pools {
		for _, ct := range contenders {
			body := ct.loop(pool)
			b.Run(strings.ReplaceAll(names[i], " ", "-")+"/"+ct.name, func(b *testing.B) {
				b.ReportAllocs()
				if err := body(b.N); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func BenchmarkCanReadConfigMap(b *testing.B) {
	c, err := cluster.Generate(benchShape)
	if err != nil {
		b.Fatal(err)
	}
	g := buildOurs(c)
	for _, kind := range []cluster.Kind{cluster.AllowedRead, cluster.RefusedRead} {
		body := ourLookups(g, benchShape.Requests(kind, poolSize, 2))
		b.Run(strings.ReplaceAll(kind.String(), " ", "-"), func(b *testing.B) {
			b.ReportAllocs()
			if err := body(b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}
