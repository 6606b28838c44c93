package graph

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the graph's Prometheus metrics. A nil *Metrics records
// nothing, which is what benchmarks and most tests want.
type Metrics struct {
	synced        prometheus.Gauge
	stale         prometheus.Gauge
	connected     *prometheus.GaugeVec
	tombstones    *prometheus.CounterVec
	nodes         prometheus.Gauge
	pods          prometheus.Gauge
	eligible      prometheus.Gauge
	writeDuration *prometheus.HistogramVec
}

// NewMetrics creates the graph metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		synced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "synced",
			Help: "1 once the graph holds the initial lists of Nodes, Pods and eligible ConfigMaps; until then nothing is allowed.",
		}),
		stale: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "stale",
			Help: "1 while an informer feeding the graph has had no working list or watch for longer than --graph-stale-after; node ConfigMap reads then get no opinion instead of an allow.",
		}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "informer_connected",
			Help: "1 while the informer's last list or watch works, 0 while it is cut from the apiserver, by informer (nodes, pods, configmaps).",
		}, []string{"informer"}),
		tombstones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "tombstones_total",
			Help: "Deletes the graph learnt only from a relist (DeletedFinalStateUnknown), by informer: the watch missed them, typically during a cut or an apiserver restart.",
		}, []string{"informer"}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "nodes",
			Help: "Node names the graph holds: registered Nodes and names that bound pods refer to.",
		}),
		pods: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "pods",
			Help: "Bound pods that reference at least one ConfigMap.",
		}),
		eligible: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "eligible_configmaps",
			Help: "ConfigMaps carrying the eligibility label.",
		}),
		writeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "graph", Name: "write_duration_seconds",
			Help:    "Time to apply one informer event to the graph, by action, including waiting for other writers.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
		}, []string{"action"}),
	}
	for _, c := range []prometheus.Collector{m.synced, m.stale, m.connected, m.tombstones, m.nodes, m.pods, m.eligible, m.writeDuration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering graph metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) setSynced(synced bool) {
	if m == nil {
		return
	}
	m.synced.Set(boolValue(synced))
}

func (m *Metrics) setStale(stale bool) {
	if m != nil {
		m.stale.Set(boolValue(stale))
	}
}

func (m *Metrics) setConnected(informer string, connected bool) {
	if m != nil {
		m.connected.WithLabelValues(informer).Set(boolValue(connected))
	}
}

func (m *Metrics) countTombstone(informer string) {
	if m != nil {
		m.tombstones.WithLabelValues(informer).Inc()
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) addNodes(delta int) {
	if m != nil {
		m.nodes.Add(float64(delta))
	}
}

func (m *Metrics) setPods(n int) {
	if m != nil {
		m.pods.Set(float64(n))
	}
}

func (m *Metrics) setEligible(n int) {
	if m != nil {
		m.eligible.Set(float64(n))
	}
}

func (m *Metrics) observeWrite(action string, start time.Time) {
	if m != nil {
		m.writeDuration.WithLabelValues(action).Observe(time.Since(start).Seconds())
	}
}
