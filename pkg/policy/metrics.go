package policy

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of an evaluation, as the evaluations metric labels them.
const (
	outcomeOK      = "ok"
	outcomeError   = "error"
	outcomeTimeout = "timeout"
)

// Metrics are the policy engine's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	loadErrors      prometheus.Counter
	lastLoadSuccess prometheus.Gauge
	info            *prometheus.GaugeVec
	evaluations     *prometheus.CounterVec
	duration        *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		loadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "policy", Name: "load_errors_total",
			Help: "Policy sets that failed to read, parse, compile or pass nodeguard's checks; the last good set kept serving.",
		}),
		lastLoadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "policy", Name: "last_load_success",
			Help: "1 when the latest policy load succeeded, 0 when it failed (see the logs for file, line and message).",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "policy", Name: "info",
			Help: "1 for the policy set in service, labelled with its source and content hash.",
		}, []string{"source", "hash"}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "policy", Name: "evaluations_total",
			Help: "Policy evaluations by package (nodeguard.admission, nodeguard.authz) and outcome (ok, error, timeout).",
		}, []string{"package", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "policy", Name: "evaluation_duration_seconds",
			Help:    "Time to evaluate one review's policies, by package.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 4, 10),
		}, []string{"package"}),
	}
	for _, c := range []prometheus.Collector{m.loadErrors, m.lastLoadSuccess, m.info, m.evaluations, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering policy metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) loadFailed() {
	if m == nil {
		return
	}
	m.loadErrors.Inc()
	m.lastLoadSuccess.Set(0)
}

func (m *Metrics) loaded(source, hash string) {
	if m == nil {
		return
	}
	m.lastLoadSuccess.Set(1)
	// One series at a time: the set in service.
	m.info.Reset()
	m.info.WithLabelValues(source, hash).Set(1)
}

func (m *Metrics) evaluated(pkg string, start time.Time, outcome string) {
	if m == nil {
		return
	}
	m.evaluations.WithLabelValues(pkg, outcome).Inc()
	m.duration.WithLabelValues(pkg).Observe(time.Since(start).Seconds())
}
