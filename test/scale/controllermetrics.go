package scale

import (
	"context"
	"net/http"
	"strconv"
)

// ClientThrottle is the controller's wait in its own client-side rate
// limiter (--kube-api-qps, --kube-api-burst) over the run, from its
// rest_client_rate_limiter_duration_seconds: how many requests went
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
		"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count", "rest_client_rate_limiter_duration_seconds_bucket")
	if err != nil {
		return
	}
	r.NodeChanges, r.Syncs = map[string]float64{}, map[string]float64{}
	sums := map[string]float64{}
	var under25, under100 float64
	for _, x := range samples {
		switch x.name {
		case "nodeguard_rollout_node_changes_total":
			r.NodeChanges[x.labels["action"]+" "+x.labels["result"]] += x.value
		case "nodeguard_rollout_syncs_total":
			r.Syncs[x.labels["result"]] += x.value
		case "rest_client_rate_limiter_duration_seconds_bucket":
			switch le, _ := strconv.ParseFloat(x.labels["le"], 64); le {
			case 0.025:
				under25 += x.value
			case 0.1:
				under100 += x.value
			}
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
	if n := sums["rest_client_rate_limiter_duration_seconds_count"]; n > 0 {
		r.Throttle = ClientThrottle{
			Requests:  n,
			MeanMs:    1000 * sums["rest_client_rate_limiter_duration_seconds_sum"] / n,
			Over25ms:  n - under25,
			Over100ms: n - under100,
		}
	}
}
