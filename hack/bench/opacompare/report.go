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

// WriteMarkdown prints the machine, the noise and one table row per
// measurement, as the other benchmarks do.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "Machine: %d CPUs, GOMAXPROCS %d, %s %s/%s. Stock server: `opa run --server` %s on loopback over TLS. "+
		"Cluster %s; %d requests in flight, closed loop, %d alternating rounds of about %s each. Run took %s.\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, r.OPAVersion,
		cfg.Shape, cfg.Concurrency, cfg.Rounds, cfg.RoundDuration, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "Machine noise: load average %s before, %s after; stalls seen by a spinning goroutine in %s before the load: %d over %s totalling %s (longest %s).\n\n",
		r.LoadBefore, r.LoadAfter, r.StallBefore.Probed, r.StallBefore.Count, loadtest.StallThreshold,
		r.StallBefore.Total.Round(time.Millisecond), r.StallBefore.Max.Round(time.Millisecond))
	b.WriteString("| endpoint | requests | protocol | nodeguard with policies (whole review) | stock OPA (policies only) | ratio (rounds) | floor: bare handler (ceiling = floor / OPA) | target | result |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		ours, opa := median(row.Ours), median(row.OPA)
		result := "PASS"
		if row.Speedup() < TargetSpeedup {
			result = "**MISS**"
			if c := row.Ceiling(); c > 0 && c < TargetSpeedup {
				result += " (out of reach: even the floor is under the target)"
			}
		}
		floor := "-"
		if len(row.Floor) > 0 {
			floor = fmt.Sprintf("%.0f req/s (%.1fx)", median(row.Floor).Throughput(), row.Ceiling())
		}
		fmt.Fprintf(&b, "| %s | %s, %d per round | %s | %.0f req/s, p50 %s, p99 %s | %.0f req/s, p50 %s, p99 %s | %.1fx (%s) | %s | >= %.0fx | %s |\n",
			row.Endpoint, row.Request, row.Requests, row.Protocol,
			ours.Throughput(), ms(ours.Percentile(0.5)), ms(ours.Percentile(0.99)),
			opa.Throughput(), ms(opa.Percentile(0.5)), ms(opa.Percentile(0.99)),
			row.Speedup(), rounds(row.Ours, row.OPA), floor, TargetSpeedup, result)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
