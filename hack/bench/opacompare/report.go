package opacompare

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/nodeguard/nodeguard/test/loadtest"
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func rounds(ours, opa []loadtest.Result) string {
	parts := make([]string, len(ours))
	for i := range ours {
		parts[i] = fmt.Sprintf("%.1f", ours[i].Throughput()/opa[i].Throughput())
	}
	return strings.Join(parts, ", ")
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }

func cpuRounds(ours, opa []time.Duration) string {
	parts := make([]string, len(ours))
	for i := range ours {
		parts[i] = "-"
		if ours[i] > 0 {
			parts[i] = fmt.Sprintf("%.1f", float64(opa[i])/float64(ours[i]))
		}
	}
	return strings.Join(parts, ", ")
}

// WriteMarkdown prints the machine, the noise and one table row per
// measurement, as the other benchmarks do.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	gc := "Go's defaults"
	if len(cfg.NodeguardGC) > 0 {
		gc = "`" + strings.Join(cfg.NodeguardGC, " ") + "` as manifests/base ships it"
	}
	fmt.Fprintf(&b, "Machine: %d CPUs, GOMAXPROCS %d, %s %s/%s. Stock server: `opa run --server` %s on loopback over TLS, with its own defaults; nodeguard's collector: %s. "+
		"Cluster %s; %d requests in flight, closed loop, %d alternating rounds of about %s each. Run took %s.\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, r.OPAVersion, gc,
		cfg.Shape, cfg.Concurrency, cfg.Rounds, cfg.RoundDuration, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "Machine noise: load average %s before, %s after; stalls seen by a spinning goroutine in %s before the load: %d over %s totalling %s (longest %s).\n\n",
		r.LoadBefore, r.LoadAfter, r.StallBefore.Probed, r.StallBefore.Count, loadtest.StallThreshold,
		r.StallBefore.Total.Round(time.Millisecond), r.StallBefore.Max.Round(time.Millisecond))
	b.WriteString("| endpoint | requests | protocol | nodeguard with policies (whole review) | stock OPA (policies only) | ratio (rounds) | floor: bare handler (ceiling = floor / OPA, in throughput and in CPU) | server CPU per request: nodeguard / OPA (ratio, rounds) | target | result |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		ours, opa := median(row.Ours), median(row.OPA)
		result := "PASS"
		if row.Speedup() < TargetSpeedup {
			result = "**MISS**"
			if c := row.Ceiling(); c > 0 && c < TargetSpeedup {
				result += " (out of reach: even the floor is under the target"
				if cc := row.CPUCeiling(); cc > 0 && cc < TargetSpeedup {
					result += ", per request and per server CPU-second"
				}
				result += ")"
			}
			if row.CPUSpeedup() >= TargetSpeedup {
				result += fmt.Sprintf("; %.1fx per server CPU-second", row.CPUSpeedup())
			}
		}
		cpu := "-"
		if row.CPUSpeedup() > 0 {
			cpu = fmt.Sprintf("%s / %s (%.1fx; %s)", us(cpuPerRequest(row.OursCPU, row.Requests)), us(cpuPerRequest(row.OPACPU, row.Requests)),
				row.CPUSpeedup(), cpuRounds(row.OursCPU, row.OPACPU))
		}
		floor := "-"
		if len(row.Floor) > 0 {
			floor = fmt.Sprintf("%.0f req/s (%.1fx)", median(row.Floor).Throughput(), row.Ceiling())
			if cc := row.CPUCeiling(); cc > 0 {
				floor += fmt.Sprintf("; CPU %s per request (%.1fx)", us(cpuPerRequest(row.FloorCPU, row.Requests)), cc)
			}
		}
		fmt.Fprintf(&b, "| %s | %s, %d per round | %s | %.0f req/s, p50 %s, p99 %s | %.0f req/s, p50 %s, p99 %s | %.1fx (%s) | %s | %s | >= %.0fx | %s |\n",
			row.Endpoint, row.Request, row.Requests, row.Protocol,
			ours.Throughput(), ms(ours.Percentile(0.5)), ms(ours.Percentile(0.99)),
			opa.Throughput(), ms(opa.Percentile(0.5)), ms(opa.Percentile(0.99)),
			row.Speedup(), rounds(row.Ours, row.OPA), floor, cpu, TargetSpeedup, result)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
