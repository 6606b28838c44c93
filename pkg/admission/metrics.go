package admission

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// Metrics counts and times admission decisions. A nil *Metrics records
// nothing.
type Metrics struct {
	decisions *prometheus.CounterVec
	duration  *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "admission", Name: "decisions_total",
			Help: "AdmissionReviews answered, by resource, outcome (allowed, refused) and the rule that refused.",
		}, []string{"resource", "outcome", "rule"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "admission", Name: "decision_duration_seconds",
			Help:    "Time to decide one AdmissionReview, after decoding the review, by resource.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
		}, []string{"resource"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering admission metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observe(req *admissionv1.AdmissionRequest, r Result, took time.Duration) {
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
	m.decisions.WithLabelValues(resource, outcome, string(r.Rule)).Inc()
	m.duration.WithLabelValues(resource).Observe(took.Seconds())
}
