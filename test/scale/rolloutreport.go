package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// RolloutJSONPrefix starts the machine-readable line WriteRolloutReport
// prints.
const RolloutJSONPrefix = "rollout-results: "

// WriteRolloutReport prints the rollout's figures, how each is computed,
// then one line of JSON after RolloutJSONPrefix.
func WriteRolloutReport(w io.Writer, o RolloutOptions, r RolloutResult) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	class := "no drain (spec.drain unset)"
	if o.Drain {
		class = fmt.Sprintf("drain-class (spec.drain: Always; each agent drains for %s before its trial)", o.DrainTime)
	}
	p("rollout over %d Nodes: canary %d, maxUnavailable %d%% = %d Nodes, trial %s, %s; complete: %t (%d updated)",
		r.Nodes, o.Canary, o.MaxUnavailablePercent, r.Batch, o.Trial, class, r.Complete, r.Updated)
	binary := "this tree's cmd/rollout-controller"
	if o.ControllerBinary != "" {
		binary = o.ControllerBinary + " (--controller-binary)"
	}
	p("controller: %s", binary)
	priority := "none of nodeguard's (its ServiceAccount's requests fall to the apiserver's suggested FlowSchemas)"
	if o.APIPriority {
		priority = "manifests/components/api-priority (--api-priority)"
	}
	p("priority and fairness for the controller: %s", priority)
	cpu := "the same as the control plane's and the simulated fleet's (nice 0): time it waits for a CPU behind them counts in its own share"
	if o.ControllerNice != 0 {
		cpu = fmt.Sprintf("nice %d for the controller and the counting proxy (--controller-nice), so that they do not wait behind the control plane and the simulated fleet for a CPU, as a controller with a CPU of its own would not", o.ControllerNice)
	}
	p("the controller's CPU: %s", cpu)
	p("simulated kubelets: %s", o.describeNodes())
	p("total time (rollout created to Complete seen in the harness's watch): %.1fs", r.TotalSeconds)
	p("total over the trials: %.2fx; beyond them: %.1fs = total - %d waves on the critical path (canary + ceil((%d-%d)/%d)) x %s (%s)",
		r.OverTrials, r.BeyondTrialsSeconds, r.TrialsOnPath, r.Nodes, o.Canary, r.Batch, o.Wave(), o.waveWords())
	p("the apiserver's floor: %.1fs = %d waves x (%s + the write-to-watch p99 below: a wave ends with its slowest Node, whose path holds two such writes, the assignment reaching its agent and its report reaching the controller); total over it: %.2fx; 1.10x of the trials is %s by it",
		r.ApiserverFloorSeconds, r.TrialsOnPath, o.Wave(), r.OverFloor, allowedWord(r.ApiserverFloorSeconds <= 1.10*float64(r.TrialsOnPath)*o.Wave().Seconds()))
	p("reaction (a Node's update seen -> the next assignment seen, both in the harness's Node watch, FIFO-paired; %d pairs): p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms",
		r.Reactions.OK, r.Reactions.P50Ms, r.Reactions.P90Ms, r.Reactions.P99Ms, r.Reactions.MaxMs)
	sp := r.ReactionSplit
	p("reaction split at the controller's patch (%d pairs timed by the proxy; p50 / p99 ms): update seen -> patch sent %.0f / %.0f, patch round trip %.0f / %.0f, answered -> assignment seen %.0f / %.0f; slowest 1%%, mean ms: %.0f, %.0f, %.0f",
		sp.ToSend.OK, sp.ToSend.P50Ms, sp.ToSend.P99Ms, sp.Write.P50Ms, sp.Write.P99Ms, sp.ToWatch.P50Ms, sp.ToWatch.P99Ms, sp.SlowestMs[0], sp.SlowestMs[1], sp.SlowestMs[2])
	own, m := sp.ControllerOwn, sp.OwnMatches
	p("controller's own share (its watch delivered the update -> its patch on the wire, both on the proxy's clock; %d pairs: %d at the update's resourceVersion, %d at the first later one it was given, %d not given, left out): p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms",
		own.OK, m.Exact, m.Later, m.Unmatched, own.P50Ms, own.P90Ms, own.P99Ms, own.MaxMs)
	first := sp.ControllerToFirst
	p("the same to its first patch of the Node (before a write that moved the Node had it patched again, when one did): p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms",
		first.P50Ms, first.P90Ms, first.P99Ms, first.MaxMs)
	if tr := r.TimedReactions; tr.Count > 0 {
		p("the same as the controller times it (nodeguard_rollout_reaction_seconds: its Node informer handing over the pass -> its sending the next assignment, first in first out; neither watch delivery nor the harness's proxy in it; %.0f reactions): mean %.1f ms, p99 at most %.0f ms (its bucket), %.0f over 200 ms",
			tr.Count, tr.MeanMs, tr.P99AtMostMs, tr.Over200ms)
	}
	p("its watch delivery vs the harness's (the proxy passed the controller the update - the harness's watch showed it; negative: the controller's came first): p50 %.0f ms, p99 %.0f ms",
		sp.DeliveryVsHarness.P50Ms, sp.DeliveryVsHarness.P99Ms)
	p("the apiserver's share, same run (an agent sends the write that makes its Node Updated -> the harness's Node watch shows it; %d Nodes): p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms",
		r.WriteToWatch.OK, r.WriteToWatch.P50Ms, r.WriteToWatch.P90Ms, r.WriteToWatch.P99Ms, r.WriteToWatch.MaxMs)
	p("the agents' reads of the target retried (refused before nodeguard's graph saw the assignment; client-go's reflector backoff, 0.8s doubling): %d", r.ReadRetries)
	p("validating webhook calls during the rollout: %d, mean %.1f ms as the apiserver timed them; nodeguard's /validate: %d reviews, mean %.1f ms as it timed them",
		r.Admission.Calls, r.Admission.ApiserverMeanMs, r.Admission.WebhookReviews, r.Admission.WebhookMeanMs)
	p("most Nodes unavailable at once (harness's view): %d (maxUnavailable %d)", r.MaxUnavailable, r.Batch)
	var times []string
	for _, n := range slices.Sorted(maps.Keys(r.Assigned)) {
		times = append(times, fmt.Sprintf("%d Nodes %d time(s)", r.Assigned[n], n))
	}
	p("assigned the target: %s", strings.Join(times, ", "))
	if d := r.Drain; d != nil {
		p("drain, as the harness's Node watch saw it: %d Nodes cordoned by their agent, %d reported Draining, %d cordons released, %d Nodes still cordoned at the end; views of a cordoned Node judged available: %d (each counts against maxUnavailable while cordoned)",
			d.Cordoned, d.Draining, d.Released, d.StillCordoned, d.CordonedAvailable)
	}
	p("controller (/proc): CPU %.1f%% of a core over the rollout (%.1f CPU-seconds, %.2f per 1,000 Nodes moved), RSS %.0f MiB at the end, %.0f MiB at most",
		r.Controller.CPUPercent, r.CPUSeconds, r.CPUPerThousand, r.Controller.RSSMiB, r.PeakRSSMiB)
	var reqs []string
	for _, k := range slices.Sorted(maps.Keys(r.Requests)) {
		reqs = append(reqs, fmt.Sprintf("%s %d", k, r.Requests[k]))
	}
	p("controller's requests during the rollout (counted by a proxy in front of it): %s", strings.Join(reqs, ", "))
	rejected := []string{"none"}
	if len(r.Rejected) > 0 {
		rejected = rejected[:0]
		for _, k := range slices.Sorted(maps.Keys(r.Rejected)) {
			rejected = append(rejected, fmt.Sprintf("%s %d", k, r.Rejected[k]))
		}
	}
	p("of them rejected by the apiserver with 429 (priority and fairness: the controller's queues full; client-go sends each again after the Retry-After): %s", strings.Join(rejected, ", "))
	var levels []string
	for _, k := range slices.Sorted(maps.Keys(r.PriorityLevels)) {
		levels = append(levels, fmt.Sprintf("%s %d", k, r.PriorityLevels[k]))
	}
	p("the same by the priority level that served them (the apiserver's X-Kubernetes-PF-PriorityLevel-UID): %s", strings.Join(levels, ", "))
	p("controller's requests per Node moved, leases left out: %.2f", r.RequestsPerNode())
	var changes []string
	for _, k := range slices.Sorted(maps.Keys(r.NodeChanges)) {
		changes = append(changes, fmt.Sprintf("%s %.0f", k, r.NodeChanges[k]))
	}
	p("controller's Node patches by its own count (nodeguard_rollout_node_changes_total): %s", strings.Join(changes, ", "))
	var syncs []string
	for _, k := range slices.Sorted(maps.Keys(r.Syncs)) {
		syncs = append(syncs, fmt.Sprintf("%s %.0f", k, r.Syncs[k]))
	}
	p("controller's syncs (nodeguard_rollout_syncs_total; waiting: a change of state held for its assignments in flight): %s; mean wait in its workqueue %.0f ms, mean sync %.0f ms",
		strings.Join(syncs, ", "), r.QueueWaitMs, r.SyncMs)
	if t := r.Throttle; t.Requests > 0 {
		p("controller's client rate limiter (rest_client_rate_limiter_duration_seconds, over the run, Events' creates left out): %.0f requests, mean wait %.1f ms, %.0f waited over 25 ms, %.0f over 100 ms",
			t.Requests, t.MeanMs, t.Over25ms, t.Over100ms)
	}
	if t := r.EventThrottle; t.Requests > 0 {
		p("its Events' limiter (--event-qps, --event-burst; an Event waits its turn there on purpose): %.0f Events, mean wait %.1f ms, %.0f waited over 100 ms",
			t.Requests, t.MeanMs, t.Over100ms)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the rollout results: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s%s\n", RolloutJSONPrefix, data)
	return err
}

func allowedWord(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "not allowed"
}
