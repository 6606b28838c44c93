package loadtest

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// pooled merges the rounds' latencies and totals, for percentiles over
// every request of every round.
func pooled(rounds []Result) Result {
	var all Result
	for _, r := range rounds {
		all.Requests += r.Requests
		all.Elapsed += r.Elapsed
		all.Latencies = append(all.Latencies, r.Latencies...)
	}
	slices.Sort(all.Latencies)
	return all
}

// medianThroughput of the rounds, and the median of the per-round ratios
// of ours to the floor's: each ratio compares runs moments apart.
// Both are NaN for no rounds, as when -bench selects one side only.
func medianThroughput(rounds []Result) float64 {
	if len(rounds) == 0 {
		return math.NaN()
	}
	t := make([]float64, len(rounds))
	for i, r := range rounds {
		t[i] = r.Throughput()
	}
	slices.Sort(t)
	return t[len(t)/2]
}

func medianRatio(ours, floor []Result) float64 {
	ratios := roundRatios(ours, floor)
	if len(ratios) == 0 {
		return math.NaN()
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

func roundRatios(ours, floor []Result) []float64 {
	var ratios []float64
	for i := range min(len(ours), len(floor)) {
		ratios = append(ratios, ours[i].Throughput()/floor[i].Throughput())
	}
	return ratios
}

// ratioText is the median ratio, followed by each round's so that a noisy
// run shows as one.
func ratioText(ours, floor []Result) string {
	var each []string
	for _, r := range roundRatios(ours, floor) {
		each = append(each, fmt.Sprintf("%.2f", r))
	}
	return fmt.Sprintf("%.2f of floor (rounds %s)", medianRatio(ours, floor), strings.Join(each, ", "))
}

// writeSummary prints the benchmark's figures against the targets.
func writeSummary(w io.Writer, runs map[string][]Result, stalls Stalls, loadBefore string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nHTTPS /authorize on loopback, %d in flight, %d alternating rounds; %d CPUs, GOMAXPROCS %d, %s.\n",
		concurrency, loadRounds, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(&b, "Machine stalls before the load (one goroutine spinning for %s): %d over %s, %s in all, longest %s. "+
		"Load average before: %s, after: %s.\n\n",
		stalls.Probed, stalls.Count, StallThreshold, ms(stalls.Total), ms(stalls.Max), loadBefore, LoadAverage())
	b.WriteString("| protocol | load | measurement | nodeguard | floor | ratio | target | result |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(p Protocol, load, what, ours, floor, ratio, target string, pass bool) {
		result := "PASS"
		if !pass {
			result = "**MISS**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p, load, what, ours, floor, ratio, target, result)
	}
	info := func(p Protocol, load, what, ours, floor string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | - | - | - |\n", p, load, what, ours, floor)
	}
	for _, p := range []Protocol{HTTP2, HTTP1} {
		oursRounds, floorRounds := runs[runName(p, "nodeguard", 0)], runs[runName(p, "floor", 0)]
		if len(oursRounds) > 0 && len(floorRounds) > 0 {
			ours, floor := pooled(oursRounds), pooled(floorRounds)
			fraction := medianRatio(oursRounds, floorRounds)
			closed := fmt.Sprintf("closed loop, %d requests", ours.Requests)
			row(p, closed, "throughput (median round)", fmt.Sprintf("%.0f req/s", medianThroughput(oursRounds)),
				fmt.Sprintf("%.0f req/s", medianThroughput(floorRounds)), ratioText(oursRounds, floorRounds),
				fmt.Sprintf(">= %.2f", targetThroughputFraction), fraction >= targetThroughputFraction)
			info(p, closed, "p50 latency", ms(ours.Percentile(0.5)), ms(floor.Percentile(0.5)))
			row(p, closed, "p99 latency", ms(ours.Percentile(0.99)), ms(floor.Percentile(0.99)), "-",
				"< "+ms(targetP99), ours.Percentile(0.99) < targetP99)
			if withPolicies := runs[runName(p, policiesTarget, 0)]; len(withPolicies) > 0 {
				all := pooled(withPolicies)
				fmt.Fprintf(&b, "| %s | %s | with shipped policies: throughput, p50, p99 | %.0f req/s, %s, %s | %.0f req/s | %s | (information) | - |\n",
					p, closed, medianThroughput(withPolicies), ms(all.Percentile(0.5)), ms(all.Percentile(0.99)),
					medianThroughput(floorRounds), ratioText(withPolicies, floorRounds))
			}
		}
		oursRounds, floorRounds = runs[runName(p, "nodeguard", openLoopRate)], runs[runName(p, "floor", openLoopRate)]
		if len(oursRounds) > 0 && len(floorRounds) > 0 {
			ours, floor := pooled(oursRounds), pooled(floorRounds)
			open := fmt.Sprintf("open loop, %d req/s, %d requests", openLoopRate, ours.Requests)
			info(p, open, "p50 latency", ms(ours.Percentile(0.5)), ms(floor.Percentile(0.5)))
			info(p, open, "p90 latency", ms(ours.Percentile(0.9)), ms(floor.Percentile(0.9)))
			row(p, open, "p99 latency", ms(ours.Percentile(0.99)), ms(floor.Percentile(0.99)), "-",
				"< "+ms(targetP99), ours.Percentile(0.99) < targetP99)
			if withPolicies := runs[runName(p, policiesTarget, openLoopRate)]; len(withPolicies) > 0 {
				all := pooled(withPolicies)
				fmt.Fprintf(&b, "| %s | %s | with shipped policies: p50, p90, p99 | %s, %s, %s | - | - | (information) | - |\n",
					p, open, ms(all.Percentile(0.5)), ms(all.Percentile(0.9)), ms(all.Percentile(0.99)))
			}
		}
	}
	_, _ = io.WriteString(w, b.String())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
