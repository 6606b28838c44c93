package authz

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts authorization decisions. A nil *Metrics records nothing.
type Metrics struct {
	decisions *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "nodeguard", Subsystem: "authorization", Name: "decisions_total",
		Help: "SubjectAccessReviews answered, by decision (allow, deny, no-opinion).",
	}, []string{"decision"})}
	if err := reg.Register(m.decisions); err != nil {
		return nil, fmt.Errorf("registering authorization metrics: %w", err)
	}
	return m, nil
}

func (m *Metrics) observe(d Decision) {
	if m != nil {
		m.decisions.WithLabelValues(d.String()).Inc()
	}
}
