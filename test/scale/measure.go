package scale

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

const (
	webhookMetric      = "nodeguard_http_requests_total"
	apiserverAuthzCall = "apiserver_authorization_webhook_evaluations_total"
	apiserverAdmitCall = "apiserver_admission_webhook_request_total"
	// grace lets requests started just before the window's end finish and
	// be counted (a request slower than that is missing from the report).
	grace = 2 * time.Second
)

// processNames are the processes whose CPU and memory are reported, by
// their comm; "harness" is this process.
var processNames = []string{"webhook", "kube-apiserver", "etcd"}

// snapshot is everything read at one edge of the window.
type snapshot struct {
	procs     map[string]procSample
	webhook   map[string]float64
	apiserver map[string]float64
}

func take(ctx context.Context, c *cluster, webhookUp bool) (snapshot, error) {
	s := snapshot{procs: map[string]procSample{}}
	for _, name := range processNames {
		if name == "webhook" && !webhookUp {
			continue
		}
		pid, err := findChild(name)
		if err != nil {
			return s, err
		}
		if s.procs[name], err = readProc(pid); err != nil {
			return s, err
		}
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		return s, err
	}
	s.procs["harness"] = self
	if webhookUp {
		samples, err := scrape(ctx, c.env.ProbeClient, c.env.WebhookURL+"/metrics", webhookMetric)
		if err != nil {
			return s, err
		}
		s.webhook = sumBy(samples, webhookMetric, "endpoint", func(l map[string]string) bool {
			return l["endpoint"] == "/authorize" || l["endpoint"] == "/validate"
		})
	}
	samples, err := scrape(ctx, c.adminHTTP, c.cp.URL()+"/metrics", apiserverAuthzCall, apiserverAdmitCall)
	if err != nil {
		return s, err
	}
	s.apiserver = map[string]float64{}
	for k, v := range sumBy(samples, apiserverAuthzCall, "result", func(l map[string]string) bool { return l["name"] == "nodeguard.dev" }) {
		s.apiserver["authorize "+k] += v
	}
	for k, v := range sumBy(samples, apiserverAdmitCall, "code", func(l map[string]string) bool { return strings.HasSuffix(l["name"], ".nodeguard.dev") }) {
		s.apiserver["validate "+k] += v
	}
	return s, nil
}

// measure opens the recorder's window for o.Window and reads the
// processes and metrics at both of its edges.
func measure(ctx context.Context, c *cluster, rec *recorder, o Options, mode Mode, webhookUp bool) (Result, error) {
	r := Result{Mode: mode, Nodes: o.Nodes, Processes: map[string]ProcStats{}}
	before, err := take(ctx, c, webhookUp)
	if err != nil {
		return r, fmt.Errorf("before the window: %w", err)
	}
	r.Start = time.Now().UTC()
	rec.open(time.Now())
	if err := sleep(ctx, o.Window); err != nil {
		return r, err
	}
	rec.close(time.Now())
	after, err := take(ctx, c, webhookUp)
	if err != nil {
		return r, fmt.Errorf("after the window: %w", err)
	}
	if err := sleep(ctx, grace); err != nil {
		return r, err
	}
	seconds := after.procs["harness"].at.Sub(before.procs["harness"].at).Seconds()
	r.WindowSeconds = seconds
	for name, a := range after.procs {
		r.Processes[name] = procStats(before.procs[name], a)
	}
	if webhookUp {
		r.WebhookCallsPerSec = rates(before.webhook, after.webhook, seconds)
	}
	r.APIServerCallsPerSec = rates(before.apiserver, after.apiserver, seconds)
	r.Ops = rec.stats()
	return r, nil
}
