package compare

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nodeguard/nodeguard/test/loadtest"
)

// Targets are the ratios the issue asks for.
const (
	targetDecisionSpeedup   = 3.0
	targetPopulationSpeedup = 3.0
	targetHeapFraction      = 0.5
	// targetLinearSlack bounds how much the per-pod cost at a larger
	// cluster may exceed the per-pod cost at the smallest one.
	targetLinearSlack    = 1.3
	targetWriteP99Factor = 0.1
)

// Row is one line of the summary table.
type Row struct {
	Measurement string
	Cluster     string
	Ours        string
	InTree      string
	Ratio       string
	Target      string
	Pass        bool
}

// Rows turns the report into summary rows, each against its target.
func (r *Report) Rows() []Row {
	var rows []Row
	for _, d := range r.Decisions {
		speedup := d.InTree.NsPerOp / d.Ours.NsPerOp
		rows = append(rows, Row{
			Measurement: "decision: " + d.Kind,
			Cluster:     d.Shape.String(),
			Ours:        micro(d.Ours),
			InTree:      micro(d.InTree),
			Ratio:       fmt.Sprintf("%.1fx faster", speedup),
			Target:      fmt.Sprintf(">= %.0fx faster", targetDecisionSpeedup),
			Pass:        speedup >= targetDecisionSpeedup,
		})
	}
	for _, d := range r.Decisions {
		rows = append(rows, Row{
			Measurement: "allocations in Authorize: " + d.Kind,
			Cluster:     d.Shape.String(),
			Ours:        allocs(d.Ours),
			InTree:      allocs(d.InTree),
			Ratio:       "-",
			Target:      "0 allocs/op",
			Pass:        noAllocs(d.Ours),
		})
	}
	for _, l := range r.Lookups {
		rows = append(rows, Row{
			Measurement: "graph lookup alone (CanReadConfigMap): " + l.Kind,
			Cluster:     l.Shape.String(),
			Ours:        micro(l.Ours),
			InTree:      "n/a (not callable alone)",
			Ratio:       "-",
			Target:      "0 allocs/op",
			Pass:        noAllocs(l.Ours),
		})
	}
	for _, p := range r.Populations {
		speedup := p.InTree.Duration.Seconds() / p.Ours.Duration.Seconds()
		rows = append(rows, Row{
			Measurement: "population time",
			Cluster:     p.Shape.String(),
			Ours:        p.Ours.Duration.Round(time.Millisecond).String(),
			InTree:      p.InTree.Duration.Round(time.Millisecond).String(),
			Ratio:       fmt.Sprintf("%.1fx faster", speedup),
			Target:      fmt.Sprintf(">= %.0fx faster", targetPopulationSpeedup),
			Pass:        speedup >= targetPopulationSpeedup,
		})
		fraction := float64(p.Ours.HeapBytes) / float64(p.InTree.HeapBytes)
		rows = append(rows, Row{
			Measurement: "population retained heap",
			Cluster:     p.Shape.String(),
			Ours:        mib(p.Ours.HeapBytes),
			InTree:      mib(p.InTree.HeapBytes),
			Ratio:       fmt.Sprintf("%.2f of in-tree", fraction),
			Target:      fmt.Sprintf("<= %.1f", targetHeapFraction),
			Pass:        fraction <= targetHeapFraction,
		})
	}
	if len(r.Scaling) > 1 {
		base := r.Scaling[0]
		for _, p := range r.Scaling[1:] {
			label := fmt.Sprintf("%dk vs %dk pods", p.Shape.Pods()/1000, base.Shape.Pods()/1000)
			timeGrowth := p.NsPerPod() / base.NsPerPod()
			heapGrowth := p.BytesPerPod() / base.BytesPerPod()
			rows = append(rows,
				Row{
					Measurement: "linear population: time per pod (nodeguard)",
					Cluster:     label,
					Ours:        fmt.Sprintf("%.0f ns/pod vs %.0f", p.NsPerPod(), base.NsPerPod()),
					InTree:      "-",
					Ratio:       fmt.Sprintf("%.2fx", timeGrowth),
					Target:      fmt.Sprintf("<= %.1fx", targetLinearSlack),
					Pass:        timeGrowth <= targetLinearSlack,
				},
				Row{
					Measurement: "linear population: heap per pod (nodeguard)",
					Cluster:     label,
					Ours:        fmt.Sprintf("%.0f B/pod vs %.0f", p.BytesPerPod(), base.BytesPerPod()),
					InTree:      "-",
					Ratio:       fmt.Sprintf("%.2fx", heapGrowth),
					Target:      fmt.Sprintf("<= %.1fx", targetLinearSlack),
					Pass:        heapGrowth <= targetLinearSlack,
				})
		}
	}
	for _, c := range r.Contention {
		fraction := c.Ours.P99.Seconds() / c.InTree.P99.Seconds()
		rows = append(rows, Row{
			Measurement: fmt.Sprintf("pod add/delete p99, %d readers", c.Readers),
			Cluster:     c.Shape.String(),
			Ours:        c.Ours.P99.String(),
			InTree:      c.InTree.P99.String(),
			Ratio:       fmt.Sprintf("%.4f of in-tree", fraction),
			Target:      fmt.Sprintf("<= %.1f", targetWriteP99Factor),
			Pass:        fraction <= targetWriteP99Factor,
		})
	}
	return rows
}

// AllPass reports whether every target was met.
func (r *Report) AllPass() bool {
	for _, row := range r.Rows() {
		if !row.Pass {
			return false
		}
	}
	return true
}

// WriteMarkdown renders the summary and the details behind it.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	c := r.Config
	fmt.Fprintf(&b, "Machine: %d CPUs, GOMAXPROCS %d, %s %s. Scale %g; %d rounds per measurement, %s per single-goroutine round; "+
		"writer for %s per reader count, readers yielding every %d decisions. Run took %s.\n\n",
		m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.Platform, c.Scale, c.Rounds, c.MicroDuration, c.ContentionDuration,
		c.ReaderYieldEvery, r.Duration.Round(time.Second))

	fmt.Fprintf(&b, "Machine noise: load average %s before, %s after; stalls seen by a spinning goroutine in %s: %s before, %s after.\n\n",
		r.LoadBefore, r.LoadAfter, stallProbe, stallSummary(r.StallsBefore), stallSummary(r.StallsAfter))
	b.WriteString("| measurement | cluster | nodeguard | in-tree | ratio | target | result |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows() {
		result := "PASS"
		if !row.Pass {
			result = "**MISS**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			row.Measurement, row.Cluster, row.Ours, row.InTree, row.Ratio, row.Target, result)
	}

	b.WriteString("\nDecision latency, one goroutine (fastest round):\n\n")
	b.WriteString("| cluster | request | nodeguard | nodeguard, no minimum kubelet version | in-tree |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, d := range r.Decisions {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", d.Shape, d.Kind, microBytes(d.Ours), microBytes(d.OursNoMinimum), microBytes(d.InTree))
	}

	b.WriteString("\nPod add/delete latency while readers call Authorize in a loop (writer every 10 ms; the round with the median p99):\n\n")
	b.WriteString("| cluster | readers | contender | writes | p50 | p99 | max | reads/s meanwhile |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.Contention {
		for _, side := range []struct {
			name string
			l    WriteLatency
		}{{"nodeguard", c.Ours}, {"in-tree", c.InTree}} {
			fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %s | %s | %.0f |\n", c.Shape, c.Readers, side.name,
				side.l.Writes, side.l.P50, side.l.P99, side.l.Max, side.l.ReadsPerSecond)
		}
	}

	fmt.Fprintf(&b, "\nnodeguard population by cluster size (fastest of %d rounds, median heap; measured first, in a fresh process):\n\n",
		max(r.Config.Rounds, scalingRounds))
	b.WriteString("| cluster | pods | time | ns/pod | retained heap | bytes/pod |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, p := range r.Scaling {
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %s | %.0f |\n", p.Shape, p.Shape.Pods(),
			p.Ours.Duration.Round(time.Millisecond), p.NsPerPod(), mib(p.Ours.HeapBytes), p.BytesPerPod())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// noAllocs is stricter than testing.B, which rounds allocations per
// operation down: one allocation per hundred operations already fails.
func noAllocs(m Micro) bool { return m.AllocsPerOp < 0.01 }

func allocs(m Micro) string { return fmt.Sprintf("%.2f allocs/op", m.AllocsPerOp) }

func stallSummary(s loadtest.Stalls) string {
	return fmt.Sprintf("%d over %s totalling %s (longest %s)", s.Count, loadtest.StallThreshold,
		s.Total.Round(time.Millisecond), s.Max.Round(time.Millisecond))
}

func micro(m Micro) string {
	return fmt.Sprintf("%s, %.0f allocs", nanos(m.NsPerOp), m.AllocsPerOp)
}

func microBytes(m Micro) string {
	return fmt.Sprintf("%s, %.2f allocs, %.0f B", nanos(m.NsPerOp), m.AllocsPerOp, m.BytesPerOp)
}

func nanos(ns float64) string {
	if ns >= 1000 {
		return fmt.Sprintf("%.2f µs", ns/1000)
	}
	return fmt.Sprintf("%.1f ns", ns)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
