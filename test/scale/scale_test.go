package scale

import (
	"bytes"
	"testing"
	"time"
)

// TestRoutineTrafficShort is the short version of `make scale`: 50
// simulated kubelets against the shipped manifests, a 20 s window with the
// webhook up, then (same cluster and kubelets) a 20 s window with it
// killed. It asserts outcomes only, never times.
//
// With the webhook down, no lease renewal and no status patch may fail:
// leases never reach the admission webhook and the authorization webhook
// fails open (NoOpinion), and the admission webhook's matchConditions must
// keep routine status patches (heartbeats that change nothing nodeguard
// judges) away from it, so that its failurePolicy Fail cannot stop
// kubelets from reporting. What nodeguard judges (an assignment, an edit
// of an eligible ConfigMap) is refused meanwhile, naming nodeguard, and
// goes through once the webhook is back.
func TestRoutineTrafficShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and runs for about a minute")
	}
	const nodes = 50
	var progress bytes.Buffer
	results, err := Run(t.Context(), Options{
		Modes: []Mode{ModeShipped, ModeWebhookDown}, ReuseCluster: true,
		Nodes: nodes, Period: 10 * time.Second, Warmup: 10 * time.Second, Window: 20 * time.Second,
		DownSettle: 5 * time.Second, ConfigFraction: 0.1, WorkDir: t.TempDir(), Progress: &progress,
	})
	var report bytes.Buffer
	if len(results) > 0 {
		if werr := WriteReport(&report, results); werr != nil {
			t.Errorf("report: %v", werr)
		}
	}
	t.Logf("progress:\n%s\nreport:\n%s", progress.String(), report.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(results) != 2 {
		t.Fatalf("got %d results, want 2 (shipped, webhook-down)", len(results))
	}
	if o := results[1].Outage; o == nil {
		t.Error("webhook-down: no outage checks")
	} else {
		for _, p := range o.Problems() {
			t.Errorf("webhook-down: %s", p)
		}
		if o.ReadersWatching != results[1].ConfigReaders {
			t.Errorf("webhook-down: %d of %d config readers still watching at the window's end", o.ReadersWatching, results[1].ConfigReaders)
		}
	}
	for _, r := range results {
		for _, op := range []string{OpLease, OpStatus} {
			s := r.Ops[op]
			// Each node's timer fires twice in the window; once is the
			// least that says the load ran at all.
			if s.OK < nodes {
				t.Errorf("%s: %s: %d succeeded in the window, want at least one per node (%d)", r.Mode, op, s.OK, nodes)
			}
			if s.Errors != 0 {
				t.Errorf("%s: %s: %d of %d failed in the window, want none; first errors: %q", r.Mode, op, s.Errors, s.Errors+s.OK, s.ErrorSamples)
			}
		}
	}
}
