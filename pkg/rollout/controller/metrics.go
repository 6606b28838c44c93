package controller

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// allStates are every state a Node can be in, so that each rollout's gauge
// has a sample for each (zero included) and a state a Node left drops to 0.
var allStates = []rollout.NodeState{
	rollout.StateUpdated, rollout.StateInTrial, rollout.StateFailed, rollout.StatePending,
	rollout.StateUnavailable, rollout.StateReverting, rollout.StateUntouched, rollout.StateConflicted,
	rollout.StateDegraded, rollout.StateSkipped,
}

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	nodes       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	changes     *prometheus.CounterVec
	batch       *prometheus.HistogramVec
	reactions   *prometheus.HistogramVec
	syncs       *prometheus.CounterVec
	stalled     *prometheus.GaugeVec
	failed      *prometheus.GaugeVec
	// queue is the workqueue's metrics.
	queue *queueMetrics
}

// batch is the Nodes one sync assigned, and when; open is how many of
// them keep it open (inBatch) at the last decision.
type batch struct {
	start time.Time
	nodes []string
	open  int
}

// finishedBatch is a batch through its trials, and how it ended: updated
// (all of its Nodes), failed (one failed or was reverted), or other (they
// left the selection or the rollout).
type finishedBatch struct {
	start  time.Time
	result string
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "nodes",
			Help: "Selected Nodes of each KubeletConfigRollout by state (Updated, InTrial, Failed, Pending, Unavailable, Reverting, Untouched, Conflicted), as of its last sync.",
		}, []string{"rollout", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "node_transitions_total",
			Help: "Changes of a selected Node's state in a rollout between two syncs, by the state it left and the one it entered.",
		}, []string{"rollout", "from", "to"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "node_changes_total",
			Help: "Node patches the controller made, by action (assign, revert, record: the trial-passed mark) and result (ok; conflict: the Node changed in what the decision read, which is made again; retried: a conflict over a write the decision did not read, patched again at once; refused: admission refused it, failing the rollout; skipped: admission refused it for the Node's own state, skipping the Node; error).",
		}, []string{"rollout", "action", "result"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "batch_duration_seconds",
			Help: "Time from assigning a batch of Nodes (the Nodes one sync assigned) until none of them is in trial any more, by outcome (updated: all updated; failed: at least one failed or was reverted; other: they left the selection or the rollout).",
			// Trials last minutes on real nodes (the agent's default is 5m).
			Buckets: prometheus.ExponentialBuckets(5, 2, 10),
		}, []string{"result"}),
		reactions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "reaction_seconds",
			Help:    "Time from the controller's Node informer handing over the update that shows a Node passed its trial until the controller sent the assignment of the next Node, passes and assignments paired first in, first out: its queue, its sync and its patch window, not the watch's delivery before nor the patch's round trip after.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"rollout"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "syncs_total",
			Help: "Syncs of a rollout, by result (ok; waiting, on the controller's last status write or on its assignments in flight; error).",
		}, []string{"result"}),
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "progress_deadline_exceeded",
			Help: "1 while a KubeletConfigRollout has gone without progress for longer than its spec.progressDeadlineSeconds (Progressing=False, reason ProgressDeadlineExceeded), 0 otherwise, as of its last sync.",
		}, []string{"rollout"}),
		failed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodeguard", Subsystem: "rollout", Name: "failed",
			Help: "1 while a KubeletConfigRollout's Failed condition is True (it stopped on a failed Node, and with onFailure Revert reverted the Nodes it moved), 0 otherwise, as of its last sync.",
		}, []string{"rollout"}),
	}
	for _, c := range []prometheus.Collector{m.nodes, m.transitions, m.changes, m.batch, m.reactions, m.syncs, m.stalled, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering rollout metrics: %w", err)
		}
	}
	queue, err := newQueueMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.queue = queue
	return m, nil
}

// The methods below do nothing on a nil *Metrics. They keep nothing
// about a rollout: what they compare with is in its rolloutState.

// observe records a decision's verdicts: the gauge, the transitions of
// the Nodes whose state changed, and the batches through their trials.
func (m *Metrics) observe(name string, changed []rollout.NodeResult, v verdictChanges, now time.Time) {
	if m == nil {
		return
	}
	for _, r := range changed {
		if was, seen := v.previous[r.Name]; seen && was != r.State {
			m.transitions.WithLabelValues(name, string(was), string(r.State)).Inc()
		}
	}
	for _, s := range allStates {
		m.nodes.WithLabelValues(name, string(s)).Set(float64(v.counts[s]))
	}
	for _, b := range v.through {
		m.batch.WithLabelValues(b.result).Observe(now.Sub(b.start).Seconds())
	}
}

func (m *Metrics) change(name, action, result string) {
	if m == nil {
		return
	}
	m.changes.WithLabelValues(name, action, result).Inc()
}

// queueProvider is the workqueue's metrics provider, nil for none.
func (m *Metrics) queueProvider() workqueue.MetricsProvider {
	if m == nil {
		return nil
	}
	return m.queue
}

// progressing records whether the rollout's progress deadline is exceeded.
func (m *Metrics) progressing(name string, exceeded bool) {
	if m != nil {
		setFlag(m.stalled, name, exceeded)
	}
}

// failure records whether the rollout's Failed condition is True.
func (m *Metrics) failure(name string, failed bool) {
	if m != nil {
		setFlag(m.failed, name, failed)
	}
}

// setFlag sets a rollout's 0-or-1 gauge.
func setFlag(vec *prometheus.GaugeVec, name string, on bool) {
	value := 0.0
	if on {
		value = 1
	}
	vec.WithLabelValues(name).Set(value)
}

// reaction observes how long a passed trial waited for the assignment
// that answered it (reactions.go).
func (m *Metrics) reaction(name string, waited time.Duration) {
	if m != nil {
		m.reactions.WithLabelValues(name).Observe(waited.Seconds())
	}
}

func (m *Metrics) sync(result string) {
	if m != nil {
		m.syncs.WithLabelValues(result).Inc()
	}
}

// forget drops a deleted rollout's series.
func (m *Metrics) forget(name string) {
	if m == nil {
		return
	}
	m.nodes.DeletePartialMatch(prometheus.Labels{"rollout": name})
	m.stalled.DeletePartialMatch(prometheus.Labels{"rollout": name})
	m.failed.DeletePartialMatch(prometheus.Labels{"rollout": name})
	m.transitions.DeletePartialMatch(prometheus.Labels{"rollout": name})
	m.changes.DeletePartialMatch(prometheus.Labels{"rollout": name})
	m.reactions.DeletePartialMatch(prometheus.Labels{"rollout": name})
}
