package program

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// RegisterClientMetrics exports the apiserver client's own metrics on reg,
// under the names kube-controller-manager and the kubelet export them:
// rest_client_request_duration_seconds and
// rest_client_rate_limiter_duration_seconds by verb and host, and
// rest_client_requests_total by code, method and host. The rate limiter's
// is the one that tells a client held back by its own --kube-api-qps from
// a slow apiserver.
//
// client-go keeps one set of these for the whole process and takes the
// first set registered, so a program calls this once, before it builds its
// first client.
func RegisterClientMetrics(reg prometheus.Registerer) error {
	buckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	request := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Seconds a request to the apiserver took, from sending it to its answer (after any wait in the client's rate limiter), by verb and host.",
		Buckets: buckets,
	}, []string{"verb", "host"})
	limiter := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Seconds a request waited in the client-side rate limiter (--kube-api-qps, --kube-api-burst) before it was sent, by verb and host.",
		Buckets: append([]float64{0.001}, buckets...),
	}, []string{"verb", "host"})
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Requests to the apiserver by HTTP status code (or <error> when none came back), method and host.",
	}, []string{"code", "method", "host"})
	for _, c := range []prometheus.Collector{request, limiter, results} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering the apiserver client's metrics: %w", err)
		}
	}
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency:     latencyMetric{request},
		RateLimiterLatency: latencyMetric{limiter},
		RequestResult:      resultMetric{results},
	})
	return nil
}

type latencyMetric struct{ h *prometheus.HistogramVec }

func (m latencyMetric) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	m.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultMetric struct{ c *prometheus.CounterVec }

func (m resultMetric) Increment(_ context.Context, code, method, host string) {
	m.c.WithLabelValues(code, method, host).Inc()
}
