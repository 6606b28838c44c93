package scale

import (
	"context"
	"math"
	"net/http"
	"sort"
	"strconv"
)

// TimedReactions is the controller's own timing of its reactions, from
// its nodeguard_rollout_reaction_seconds: from its Node informer handing
// over a Node's passed trial to its sending the next assignment, paired
// first in, first out, as the controller counts them. The histogram gives
// the p99 to its bucket: P99AtMostMs is the bound of the bucket that holds
// it, and Over200ms counts the reactions above 0.2 s exactly (a bound).
type TimedReactions struct {
	Count       float64 `json:"count"`
	MeanMs      float64 `json:"mean_ms"`
	Over200ms   float64 `json:"over_200ms"`
	P99AtMostMs float64 `json:"p99_at_most_ms"`
}

// timedReactions reads TimedReactions from the histogram's cumulative
// buckets (by upper bound, +Inf included), count and sum.
func timedReactions(buckets map[float64]float64, count, sum float64) TimedReactions {
	t := TimedReactions{Count: count}
	if count == 0 {
		return t
	}
	t.MeanMs = 1000 * sum / count
	t.Over200ms = count - buckets[0.2]
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	for _, le := range bounds {
		if buckets[le] >= 0.99*count {
			t.P99AtMostMs = 1000 * le
			if math.IsInf(le, 1) {
				t.P99AtMostMs = math.Inf(1)
			}
			break
		}
	}
	return t
}

// ClientThrottle is the controller's wait in a client-side rate limiter
// over the run, from its rest_client_rate_limiter_duration_seconds: that of
// its Node patches and status writes (--kube-api-qps, --kube-api-burst),
// or that of its Events (--event-qps, --event-burst): how many requests went
// through it, their mean wait, and how many waited longer than 25 ms and
// 100 ms (the histogram's buckets). A controller that does not export it
// (a tree before it did) leaves it zero.
type ClientThrottle struct {
	Requests  float64 `json:"requests"`
	MeanMs    float64 `json:"mean_ms"`
	Over25ms  float64 `json:"over_25ms"`
	Over100ms float64 `json:"over_100ms"`
}

// readControllerMetrics fills in what the controller's own /metrics say of
// the run: its Node patches and syncs by result, its workqueue's mean wait
// and sync, and its client's rate-limiter wait. A scrape that fails leaves
// them out.
func readControllerMetrics(ctx context.Context, url string, r *RolloutResult) {
	samples, err := scrape(ctx, http.DefaultClient, url, "nodeguard_rollout_node_changes_total", "nodeguard_rollout_syncs_total",
		"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count",
		"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count", "rest_client_rate_limiter_duration_seconds_bucket",
		"nodeguard_rollout_reaction_seconds_bucket", "nodeguard_rollout_reaction_seconds_count", "nodeguard_rollout_reaction_seconds_sum")
	if err != nil {
		return
	}
	r.NodeChanges, r.Syncs = map[string]float64{}, map[string]float64{}
	sums := map[string]float64{}
	// The limiter's samples by verb: POST is the Events' client (their
	// creates, paced by --event-qps on purpose), the rest the client of
	// the Node patches and status writes.
	limiter := map[bool]*limiterSums{false: {}, true: {}}
	reactionBuckets := map[float64]float64{}
	for _, x := range samples {
		switch x.name {
		case "nodeguard_rollout_reaction_seconds_bucket":
			if le, err := strconv.ParseFloat(x.labels["le"], 64); err == nil {
				reactionBuckets[le] += x.value
			}
		case "nodeguard_rollout_node_changes_total":
			r.NodeChanges[x.labels["action"]+" "+x.labels["result"]] += x.value
		case "nodeguard_rollout_syncs_total":
			r.Syncs[x.labels["result"]] += x.value
		case "rest_client_rate_limiter_duration_seconds_bucket":
			l := limiter[x.labels["verb"] == "POST"]
			switch le, _ := strconv.ParseFloat(x.labels["le"], 64); le {
			case 0.025:
				l.under25 += x.value
			case 0.1:
				l.under100 += x.value
			}
		case "rest_client_rate_limiter_duration_seconds_sum":
			limiter[x.labels["verb"] == "POST"].sum += x.value
		case "rest_client_rate_limiter_duration_seconds_count":
			limiter[x.labels["verb"] == "POST"].count += x.value
		default:
			sums[x.name] += x.value
		}
	}
	if n := sums["workqueue_queue_duration_seconds_count"]; n > 0 {
		r.QueueWaitMs = 1000 * sums["workqueue_queue_duration_seconds_sum"] / n
	}
	if n := sums["workqueue_work_duration_seconds_count"]; n > 0 {
		r.SyncMs = 1000 * sums["workqueue_work_duration_seconds_sum"] / n
	}
	r.TimedReactions = timedReactions(reactionBuckets, sums["nodeguard_rollout_reaction_seconds_count"], sums["nodeguard_rollout_reaction_seconds_sum"])
	r.Throttle, r.EventThrottle = limiter[false].throttle(), limiter[true].throttle()
}

// limiterSums add up rest_client_rate_limiter_duration_seconds samples.
type limiterSums struct{ count, sum, under25, under100 float64 }

func (l *limiterSums) throttle() ClientThrottle {
	if l.count == 0 {
		return ClientThrottle{}
	}
	return ClientThrottle{Requests: l.count, MeanMs: 1000 * l.sum / l.count, Over25ms: l.count - l.under25, Over100ms: l.count - l.under100}
}
