package program

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A request through a client built after the registration shows in all
// three metrics, under the apiserver's host.
func TestClientMetricsCountTheClientsRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterClientMetrics(reg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"a"}}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 100, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.CoreV1().Namespaces().Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]int{
		"rest_client_request_duration_seconds":      1, // one series: GET to the server's host
		"rest_client_rate_limiter_duration_seconds": 1,
		"rest_client_requests_total":                1,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != want {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil && h.GetSampleCount() != 2 {
				t.Errorf("%s counted %d requests, want 2", mf.GetName(), h.GetSampleCount())
			}
			if c := m.GetCounter(); c != nil && c.GetValue() != 2 {
				t.Errorf("%s counted %v requests, want 2", mf.GetName(), c.GetValue())
			}
		}
	}
}
