package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
)

const namespace = "nodeguard_agent"

var refLabels = []string{"source", "namespace", "name", "uid", "resource_version"}

// Metrics are the agent's metrics. A nil *Metrics records nothing.
type Metrics struct {
	assigned, active, lastKnownGood *prometheus.GaugeVec
	configError                     *prometheus.GaugeVec
	rollbacks                       prometheus.Counter
	restarts                        prometheus.Counter
	drains                          *prometheus.CounterVec
	cordoned                        prometheus.Gauge
	trialElapsed                    prometheus.Gauge
	trialPeriod                     prometheus.Gauge
	syncDuration                    prometheus.Histogram
	syncErrors                      prometheus.Counter
	configDrift                     prometheus.Gauge
	driftsDetected                  prometheus.Counter
}

// New registers the metrics on reg.
func New(reg prometheus.Registerer, trialPeriod time.Duration) (*Metrics, error) {
	info := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, refLabels)
	}
	m := &Metrics{
		assigned:      info("assigned_config_info", "The configuration assigned to this node (1)."),
		active:        info("active_config_info", "The configuration the kubelet was last restarted with (1)."),
		lastKnownGood: info("last_known_good_config_info", "The last configuration that survived its trial (1)."),
		configError: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "config_error",
			Help: "1 while the config status carries an error, with the KubeletConfigReady reason; 0 with an empty reason otherwise."}, []string{"reason"}),
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "rollbacks_total",
			Help: "Configurations rolled back after failing their trial."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "kubelet_restarts_total",
			Help: "Kubelet restart commands that succeeded."}),
		drains: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "drains_total",
			Help: "Drains for changes a restart alone cannot carry, by result: drained (the restart followed), timed_out (the change was not applied) or blocked (pods kubectl drain would refuse to delete without being told, which the assignment did not allow; nothing was evicted and the change was not applied)."}, []string{"result"}),
		cordoned: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "cordoned",
			Help: "1 while this Node carries the agent's cordon mark (the nodeguard.dev/cordoned annotation: a drain, its restart and trial), 0 otherwise."}),
		trialElapsed: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "trial_elapsed_seconds",
			Help: "How long the configuration on trial has been on it (time since boot, this boot); 0 without a trial."}),
		trialPeriod: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "trial_period_seconds",
			Help: "The period of the trial in progress (its assignment's, where the nodeguard.dev/trial annotation gives one), else the configured --trial-period."}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "sync_duration_seconds",
			Help: "Duration of one pass of the agent's state machine, restarts included.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "sync_errors_total",
			Help: "Passes of the state machine that ended in an error and were retried."}),
		configDrift: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "config_drift",
			Help: "1 while the kubelet's running configuration (its /configz) no longer matches the configuration the agent applied, else 0."}),
		driftsDetected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "config_drifts_total",
			Help: "Times the kubelet's running configuration was found to no longer match the configuration the agent applied, including drift the agent undid at once by restoring its own file."}),
	}
	for _, c := range []prometheus.Collector{m.assigned, m.active, m.lastKnownGood, m.configError, m.rollbacks, m.restarts, m.drains, m.cordoned, m.trialElapsed, m.trialPeriod, m.syncDuration, m.syncErrors, m.configDrift, m.driftsDetected} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering agent metrics: %w", err)
		}
	}
	m.trialPeriod.Set(trialPeriod.Seconds())
	m.configError.WithLabelValues("").Set(0)
	for _, result := range []string{DrainDrained, DrainTimedOut, DrainBlocked} {
		m.drains.WithLabelValues(result)
	}
	return m, nil
}

func setRef(vec *prometheus.GaugeVec, ref *contract.ConfigMapVersion) {
	vec.Reset()
	if ref == nil {
		vec.WithLabelValues("local", "", "", "", "").Set(1)
		return
	}
	vec.WithLabelValues("configmap", ref.Namespace, ref.Name, ref.UID, ref.ResourceVersion).Set(1)
}

// ObserveReport records what a report says.
func (m *Metrics) ObserveReport(r status.Report) {
	if m == nil {
		return
	}
	setRef(m.assigned, r.Status.Assigned)
	setRef(m.active, r.Status.Active)
	setRef(m.lastKnownGood, r.Status.LastKnownGood)
	m.configError.Reset()
	if r.Status.Error != "" {
		m.configError.WithLabelValues(r.Condition.Reason).Set(1)
	} else {
		m.configError.WithLabelValues("").Set(0)
	}
	drift := 0.0
	if r.Status.Running != nil && r.Status.Running.State == contract.RunningDiffers {
		drift = 1
	}
	m.configDrift.Set(drift)
}

// DriftDetected counts a newly found drift of the running configuration.
func (m *Metrics) DriftDetected() {
	if m != nil {
		m.driftsDetected.Inc()
	}
}

// RolledBack counts a rollback.
func (m *Metrics) RolledBack() {
	if m != nil {
		m.rollbacks.Inc()
	}
}

// The results of a drain, as drains_total counts them.
const (
	DrainDrained  = "drained"
	DrainTimedOut = "timed_out"
	DrainBlocked  = "blocked"
)

// DrainEnded counts a drain by its result.
func (m *Metrics) DrainEnded(result string) {
	if m != nil {
		m.drains.WithLabelValues(result).Inc()
	}
}

// ObserveNode records what the agent's Node says of the agent's own work:
// whether it carries the agent's cordon. A nil node (offline) changes
// nothing: the last value seen stays.
func (m *Metrics) ObserveNode(node *corev1.Node) {
	if m == nil || node == nil {
		return
	}
	value := 0.0
	if _, ok := node.Annotations[contract.CordonedAnnotation]; ok {
		value = 1
	}
	m.cordoned.Set(value)
}

// KubeletRestarted counts a restart.
func (m *Metrics) KubeletRestarted() {
	if m != nil {
		m.restarts.Inc()
	}
}

// SetTrialElapsed records the trial's age; zero when there is none.
func (m *Metrics) SetTrialElapsed(d time.Duration) {
	if m != nil {
		m.trialElapsed.Set(d.Seconds())
	}
}

// SetTrialPeriod records the period of the trial in progress, or the
// configured one without a trial.
func (m *Metrics) SetTrialPeriod(d time.Duration) {
	if m != nil {
		m.trialPeriod.Set(d.Seconds())
	}
}

// ObserveSync records one pass of the state machine.
func (m *Metrics) ObserveSync(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.syncDuration.Observe(d.Seconds())
	if err != nil {
		m.syncErrors.Inc()
	}
}
