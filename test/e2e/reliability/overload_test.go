package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestOverloadedBinarySheds runs the real binary with one /authorize slot
// and no queue, and bursts SubjectAccessReviews at it over many
// connections until some are shed: every answer must be a well-formed
// SubjectAccessReview, the shed ones no opinion naming the overload, and
// the binary's shed counter must match what the clients saw. Then, one at
// a time, every review is decided again.
func TestOverloadedBinarySheds(t *testing.T) {
	ctx := t.Context()
	r, err := env.StartReplica(ctx, "overload", "--max-authorize-in-flight=1", "--max-queued-reviews=0", "--max-queue-wait=0s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	})
	sar := reviewBody(t, &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:node:" + trafficNode, Groups: []string{"system:nodes"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Version: "v1", Namespace: "default", Name: "absent"}},
	})
	// HTTP/1.1, a connection per client: the requests arrive in parallel.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: backendTLS(t), MaxIdleConnsPerHost: 100}}
	defer client.CloseIdleConnections()
	var decided, shed atomic.Int64
	var firstErr atomic.Value
	burst := func(requests int) {
		var wg sync.WaitGroup
		for range requests {
			wg.Go(func() {
				body, err := post(ctx, client, r.URL+"/authorize?timeout=3s", sar)
				var got authorizationv1.SubjectAccessReview
				if err == nil {
					err = json.Unmarshal(body, &got)
				}
				switch {
				case err != nil:
				case got.Kind != "SubjectAccessReview" || got.Status.Allowed || got.Status.Denied:
					err = fmt.Errorf("not a no-opinion SubjectAccessReview: %s", body)
				case strings.Contains(got.Status.EvaluationError, "overloaded"):
					shed.Add(1)
					return
				case got.Status.EvaluationError == "" && got.Status.Reason != "":
					decided.Add(1)
					return
				default:
					err = fmt.Errorf("unexpected answer: %s", body)
				}
				firstErr.CompareAndSwap(nil, err.Error())
			})
		}
		wg.Wait()
	}
	err = framework.Eventually(ctx, 2*time.Minute, "a burst shed in part", func(context.Context) (bool, string, error) {
		burst(100)
		if e := firstErr.Load(); e != nil {
			return false, "", fmt.Errorf("malformed answer: %v", e)
		}
		return shed.Load() > 0, fmt.Sprintf("%d decided, %d shed", decided.Load(), shed.Load()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	counted, err := shedCounter(r.URL+"/metrics", "/authorize")
	if err != nil {
		t.Fatal(err)
	}
	if counted != shed.Load() {
		t.Fatalf("nodeguard_http_requests_shed_total for /authorize = %d, clients saw %d shed answers", counted, shed.Load())
	}
	t.Logf("bursts of 100 at 1 slot and no queue: %d decided, %d shed, counter %d", decided.Load(), shed.Load(), counted)

	// One at a time, nothing is shed any more.
	shedBefore := shed.Load()
	for range 20 {
		burst(1)
	}
	if e := firstErr.Load(); e != nil || shed.Load() != shedBefore {
		t.Fatalf("after the bursts: %d more shed, error %v", shed.Load()-shedBefore, e)
	}
}

// shedCounter sums nodeguard_http_requests_shed_total for endpoint from a
// /metrics page.
func shedCounter(metricsURL, endpoint string) (int64, error) {
	resp, err := env.ProbeClient.Get(metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total int64
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "nodeguard_http_requests_shed_total{") || !strings.Contains(line, `endpoint="`+endpoint+`"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total += int64(v)
	}
	return total, scanner.Err()
}
