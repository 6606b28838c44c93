package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/loadtest"
)

// soakShape is how long a soak runs and how it is measured.
type soakShape struct {
	// total is the run of traffic and churn; warm is its start, left out
	// of every measure; window is the length of the baseline (right after
	// warm) and final (the end) measuring windows.
	total, warm, window time.Duration
	sample              time.Duration
}

// soakShapeFromEnv is the short soak by default, the 10-minute one with
// NODEGUARD_SOAK=1 (make soak).
func soakShapeFromEnv() soakShape {
	if os.Getenv("NODEGUARD_SOAK") == "1" {
		return soakShape{total: 10 * time.Minute, warm: time.Minute, window: time.Minute, sample: 2 * time.Second}
	}
	return soakShape{total: 45 * time.Second, warm: 10 * time.Second, window: 10 * time.Second, sample: time.Second}
}

// The bounds the soak asserts. The heap is measured as the lowest
// go_memstats_heap_alloc_bytes seen in a window: between collections the
// gauge climbs with garbage, and its floor tracks the live heap. Goroutines
// likewise by their floor, so that requests in flight do not count.
const (
	heapGrowthFactor   = 1.25
	heapGrowthSlack    = 4 << 20
	goroutineGrowthMax = 10

	authorizeRate = 150 // reviews per second
	validateRate  = 30
	// churnLive is how many churned ConfigMaps, Nodes and Pods exist at a
	// time; each churn step creates one of each and deletes the oldest.
	churnLive     = 10
	churnInterval = 200 * time.Millisecond
)

// TestSoak runs mixed /authorize and /validate traffic against the webhook
// while Nodes, Pods and ConfigMaps are created, reassigned and deleted
// without pause, samples the webhook's heap and goroutines from its
// /metrics, and asserts that neither grows past the bounds above, that
// no review fails or answers wrongly, and that the graph returns to its
// size before the churn once the churn stops.
func TestSoak(t *testing.T) {
	shape := soakShapeFromEnv()
	ctx := t.Context()
	ns := newNamespace(t)
	stableNode := ns + "-stable"
	if err := eligibleConfigMap(ctx, ns, "stable"); err != nil {
		t.Fatal(err)
	}
	if err := registerNode(ctx, stableNode, ns, "stable"); err != nil {
		t.Fatal(err)
	}
	deleteNodeOnCleanup(t, stableNode)
	if _, err := waitWebhookAllows(ctx, sarBody(stableNode, ns, "stable")); err != nil {
		t.Fatal(err)
	}
	before, err := graphSize(ctx)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var wg sync.WaitGroup
	churn := &churner{ns: ns}
	wg.Go(func() {
		if err := churn.run(runCtx, shape.total); err != nil {
			stopRun(fmt.Errorf("churn: %w", err))
		}
	})
	client := soakClient()
	loads := []struct {
		name string
		load loadtest.Load
	}{
		{"/authorize", loadtest.Load{Client: client, URL: env.WebhookURL + "/authorize", Concurrency: 8,
			Rate: authorizeRate, Requests: int(authorizeRate * shape.total.Seconds()),
			Bodies: [][]byte{
				sarBody(stableNode, ns, "stable"),       // always allowed
				sarBody(stableNode, ns, "churn-0"),      // no path, or a path for a moment
				sarBody(ns+"-churn-3", ns, "churn-3"),   // comes and goes with the churn
				sarBody(ns+"-nobody", ns, "stable"),     // never allowed
				sarBody(stableNode, "kube-system", "x"), // never allowed
			},
			Check: checkAuthorize}},
		{"/validate", loadtest.Load{Client: client, URL: env.WebhookURL + "/validate", Concurrency: 4,
			Rate: validateRate, Requests: int(validateRate * shape.total.Seconds()),
			Bodies: [][]byte{nodeStatusReviewBody(stableNode)},
			Check:  checkAdmitted}},
	}
	results := make([]loadtest.Result, len(loads))
	for i, l := range loads {
		wg.Go(func() {
			r, err := l.load.Run(runCtx)
			if err != nil {
				stopRun(fmt.Errorf("%s traffic: %w", l.name, err))
			}
			results[i] = r
		})
	}
	samples := sampleWebhook(runCtx, shape.sample)
	wg.Wait()
	if err := context.Cause(runCtx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	stopRun(nil)
	all := samples()

	if err := churn.cleanUp(ctx); err != nil {
		t.Fatal(err)
	}
	err = framework.Eventually(ctx, time.Minute, "the graph to shrink back to its size before the churn", func(ctx context.Context) (bool, string, error) {
		now, err := graphSize(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return now == before, fmt.Sprintf("now %+v, before %+v", now, before), nil
	})
	if err != nil {
		t.Error(err)
	}

	start := all[0].at
	baseline := window(all, start.Add(shape.warm), start.Add(shape.warm+shape.window))
	final := window(all, start.Add(shape.total-shape.window), start.Add(shape.total))
	if len(baseline) == 0 || len(final) == 0 {
		t.Fatalf("too few samples: %d in the baseline window, %d in the final one", len(baseline), len(final))
	}
	baseHeap, finalHeap := floor(baseline, heapOf), floor(final, heapOf)
	baseGoroutines, finalGoroutines := floor(baseline, goroutinesOf), floor(final, goroutinesOf)
	heapBound := baseHeap*heapGrowthFactor + heapGrowthSlack
	t.Logf("soak %v: %d churn steps (%d objects created and deleted), %s; %s", shape.total, churn.steps, 3*churn.steps,
		describe(loads[0].name, results[0]), describe(loads[1].name, results[1]))
	t.Logf("heap floor: %.1f MiB after warm-up, %.1f MiB at the end (bound %.1f MiB); goroutine floor: %.0f -> %.0f (bound +%d); peak heap %.1f MiB",
		baseHeap/(1<<20), finalHeap/(1<<20), heapBound/(1<<20), baseGoroutines, finalGoroutines, goroutineGrowthMax, peak(all, heapOf)/(1<<20))
	if finalHeap > heapBound {
		t.Errorf("heap floor grew from %.1f MiB to %.1f MiB, past the bound %.1f MiB", baseHeap/(1<<20), finalHeap/(1<<20), heapBound/(1<<20))
	}
	if finalGoroutines > baseGoroutines+goroutineGrowthMax {
		t.Errorf("goroutine floor grew from %.0f to %.0f, more than %d", baseGoroutines, finalGoroutines, goroutineGrowthMax)
	}
	if testing.Verbose() {
		for _, s := range all {
			t.Logf("%6.1fs heap %6.1f MiB goroutines %4.0f", s.at.Sub(start).Seconds(), heapOf(s)/(1<<20), goroutinesOf(s))
		}
	}
}

// soakClient speaks to the webhook as the apiserver does: HTTP/2, with the
// apiserver's client certificate, its connection kept for the whole run.
func soakClient() *http.Client {
	transport := env.ProbeClient.Transport.(*http.Transport).Clone()
	transport.ForceAttemptHTTP2 = true
	transport.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}

func checkAuthorize(i int, resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s: %s", resp.Status, body)
	}
	var sar authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(body, &sar); err != nil || sar.Status.Reason == "" || (sar.Status.Allowed && sar.Status.Denied) {
		return fmt.Errorf("malformed SubjectAccessReview (%v): %s", err, body)
	}
	switch i % 5 {
	case 0:
		if !sar.Status.Allowed {
			return fmt.Errorf("the stable node's read was refused: %s", sar.Status.Reason)
		}
	case 3, 4:
		if sar.Status.Allowed {
			return fmt.Errorf("a read without any path was allowed: %s", sar.Status.Reason)
		}
	}
	return nil
}

func checkAdmitted(_ int, resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s: %s", resp.Status, body)
	}
	if !strings.Contains(string(body), `"allowed":true`) {
		return fmt.Errorf("a node's own status update was not admitted: %s", body)
	}
	return nil
}

func describe(name string, r loadtest.Result) string {
	return fmt.Sprintf("%s: %d reviews, p50 %v, p99 %v", name, r.Requests,
		r.Percentile(0.50).Round(10*time.Microsecond), r.Percentile(0.99).Round(10*time.Microsecond))
}

// waitWebhookAllows waits until the webhook allows the review.
func waitWebhookAllows(ctx context.Context, body []byte) (answer, error) {
	var last answer
	err := framework.Eventually(ctx, time.Minute, "the webhook to allow the stable read", func(ctx context.Context) (bool, string, error) {
		a, err := post(ctx, "/authorize", body)
		last = a
		return err == nil && a.allowed, fmt.Sprintf("%+v %v", a, err), nil
	})
	return last, err
}

// graphSizes are the graph's size gauges.
type graphSizes struct{ nodes, pods, eligible float64 }

func graphSize(ctx context.Context) (graphSizes, error) {
	var s graphSizes
	for series, v := range map[string]*float64{
		"nodeguard_graph_nodes": &s.nodes, "nodeguard_graph_pods": &s.pods, "nodeguard_graph_eligible_configmaps": &s.eligible,
	} {
		got, err := metric(ctx, series)
		if err != nil {
			return s, err
		}
		*v = got
	}
	return s, nil
}

// churner creates and deletes ConfigMaps, Nodes assigned to them and Pods
// bound to those Nodes that mount them, and reassigns one node, for as
// long as it runs.
type churner struct {
	ns    string
	steps int
	live  []int
}

func (c *churner) name(kind string, i int) string {
	if kind == "node" {
		return fmt.Sprintf("%s-churn-%d", c.ns, i)
	}
	return fmt.Sprintf("churn-%d", i)
}

func (c *churner) run(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(churnInterval)
	defer tick.Stop()
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Names repeat every few steps, so that a node name, ConfigMap or
		// pod comes back after its deletion as a new object.
		n := i % (4 * churnLive)
		if len(c.live) >= churnLive {
			if err := c.remove(ctx, c.live[0]); err != nil {
				return err
			}
			c.live = c.live[1:]
		}
		if err := c.add(ctx, n); err != nil {
			return err
		}
		c.live = append(c.live, n)
		c.steps++
	}
	return nil
}

func (c *churner) add(ctx context.Context, i int) error {
	cm, node := c.name("cm", i), c.name("node", i)
	if err := eligibleConfigMap(ctx, c.ns, cm); err != nil {
		return fmt.Errorf("creating ConfigMap %s: %w", cm, err)
	}
	if err := registerNode(ctx, node, c.ns, cm); err != nil {
		return fmt.Errorf("creating Node %s: %w", node, err)
	}
	if err := boundPod(ctx, c.ns, c.name("pod", i), node, cm); err != nil {
		return fmt.Errorf("creating Pod: %w", err)
	}
	// Move an older node's assignment to this ConfigMap: assignments change
	// without their Nodes or ConfigMaps being deleted.
	if len(c.live) > 0 {
		older := c.name("node", c.live[len(c.live)-1])
		n, err := admin.CoreV1().Nodes().Get(ctx, older, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reassigning %s: %w", older, err)
		}
		n.Annotations[contract.ConfigSourceAnnotation] = c.ns + "/" + cm
		if _, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reassigning %s: %w", older, err)
		}
	}
	return nil
}

func (c *churner) remove(ctx context.Context, i int) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, del := range []func() error{
		func() error { return admin.CoreV1().Pods(c.ns).Delete(ctx, c.name("pod", i), now) },
		func() error { return admin.CoreV1().Nodes().Delete(ctx, c.name("node", i), now) },
		func() error { return admin.CoreV1().ConfigMaps(c.ns).Delete(ctx, c.name("cm", i), now) },
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting churn step %d: %w", i, err)
		}
	}
	return nil
}

// cleanUp deletes what the churn left.
func (c *churner) cleanUp(ctx context.Context) error {
	for _, i := range c.live {
		if err := c.remove(ctx, i); err != nil {
			return err
		}
	}
	c.live = nil
	return nil
}

// webhookSample is one reading of the webhook's /metrics.
type webhookSample struct {
	at               time.Time
	heap, goroutines float64
}

func heapOf(s webhookSample) float64       { return s.heap }
func goroutinesOf(s webhookSample) float64 { return s.goroutines }

// sampleWebhook reads the webhook's heap and goroutines every interval
// until ctx ends; the returned function waits for that and returns the
// samples.
func sampleWebhook(ctx context.Context, interval time.Duration) func() []webhookSample {
	var samples []webhookSample
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			heap, herr := metric(ctx, "go_memstats_heap_alloc_bytes")
			goroutines, gerr := metric(ctx, "go_goroutines")
			if herr == nil && gerr == nil {
				samples = append(samples, webhookSample{at: time.Now(), heap: heap, goroutines: goroutines})
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []webhookSample {
		<-done
		return samples
	}
}

func window(samples []webhookSample, from, to time.Time) []webhookSample {
	var in []webhookSample
	for _, s := range samples {
		if !s.at.Before(from) && s.at.Before(to) {
			in = append(in, s)
		}
	}
	return in
}

func floor(samples []webhookSample, of func(webhookSample) float64) float64 {
	values := make([]float64, len(samples))
	for i, s := range samples {
		values[i] = of(s)
	}
	return slices.Min(values)
}

func peak(samples []webhookSample, of func(webhookSample) float64) float64 {
	values := make([]float64, len(samples))
	for i, s := range samples {
		values[i] = of(s)
	}
	return slices.Max(values)
}
