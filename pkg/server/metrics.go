package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
)

// httpMetrics counts and times requests per endpoint. Endpoints are the
// registered paths, never raw URLs, so label cardinality stays fixed.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	// shed and waiting belong to the in-flight limits (LimitInFlight).
	shed    *prometheus.CounterVec
	waiting *prometheus.GaugeVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests by endpoint and status code.",
		}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time from request to complete response, by endpoint.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"endpoint"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "http", Name: "requests_in_flight",
			Help: "Requests being served.",
		}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "http", Name: "requests_shed_total",
			Help: "Review requests answered without a decision because the endpoint was at its in-flight limit, by endpoint and reason (queue_full, wait_timeout, canceled).",
		}, []string{"endpoint", "reason"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "http", Name: "requests_waiting",
			Help: "Review requests waiting for a free slot under the endpoint's in-flight limit.",
		}, []string{"endpoint"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight, m.shed, m.waiting} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering HTTP metrics: %w", err)
		}
	}
	return m, nil
}

func (m *httpMetrics) instrument(endpoint string, next http.Handler) http.Handler {
	duration := m.duration.WithLabelValues(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
		duration.Observe(time.Since(start).Seconds())
	})
}

// DecisionMetrics counts and times the reviews' decisions. A nil
// *DecisionMetrics records nothing.
type DecisionMetrics struct {
	admissions        *prometheus.CounterVec
	admissionDuration *prometheus.HistogramVec
	authorizations    *prometheus.CounterVec
}

// NewDecisionMetrics creates the metrics and registers them with reg.
func NewDecisionMetrics(reg prometheus.Registerer) (*DecisionMetrics, error) {
	m := &DecisionMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "admission", Name: "decisions_total",
			Help: "AdmissionReviews answered, by resource, outcome (allowed, refused) and the rule that refused.",
		}, []string{"resource", "outcome", "rule"}),
		admissionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "admission", Name: "decision_duration_seconds",
			Help:    "Time to decide one AdmissionReview, after decoding the review, by resource.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
		}, []string{"resource"}),
		authorizations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "authorization", Name: "decisions_total",
			Help: "SubjectAccessReviews answered, by decision (allow, deny, no-opinion).",
		}, []string{"decision"}),
	}
	for _, c := range []prometheus.Collector{m.admissions, m.admissionDuration, m.authorizations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering decision metrics: %w", err)
		}
	}
	return m, nil
}

func (m *DecisionMetrics) observeAdmission(req *admissionv1.AdmissionRequest, r admission.Result, took time.Duration) {
	if m == nil {
		return
	}
	// Constants, never the request's own string: a label value outlives
	// the request, whose body (which that string views) is reused.
	var resource string
	switch req.Resource.Resource {
	case "nodes":
		resource = "nodes"
	case "configmaps":
		resource = "configmaps"
	case "pods":
		resource = "pods"
	default:
		resource = "other"
	}
	outcome := "allowed"
	if !r.Allowed {
		outcome = "refused"
	}
	m.admissions.WithLabelValues(resource, outcome, string(r.Rule)).Inc()
	m.admissionDuration.WithLabelValues(resource).Observe(took.Seconds())
}

func (m *DecisionMetrics) observeAuthorization(d authz.Decision) {
	if m != nil {
		m.authorizations.WithLabelValues(d.String()).Inc()
	}
}
