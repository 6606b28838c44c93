package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// collectSkipped gathers the Nodes admission refused the target for their
// own state: those the status lists for this very target and generation,
// and the refusals fed back since. A new target or an edit of the spec
// tries them again, since their state may have changed meanwhile.
func (d *decider) collectSkipped() {
	d.skipped = map[string]string{}
	r := d.in.Rollout
	if old := r.Status; old.Target != nil && *old.Target == d.target && old.ObservedGeneration == r.Generation {
		for _, n := range old.SkippedNodes {
			d.skipped[n.Name] = n.Message
		}
	}
	for _, refusal := range d.in.Refusals {
		if refusal.NodeState {
			d.skipped[refusal.Node] = refusal.Message
		}
	}
}

// recordPassed marks the Nodes this rollout moved that now report the
// target updated, so that a failure they report later is theirs alone.
func (d *decider) recordPassed() {
	d.pool.ascend(d.pool.toRecord, func(m *member) bool {
		d.records = append(d.records, passed(&m.obs, d.target))
		return true
	})
}

// lastProgress is the status' lastProgressTime: now when the rollout
// starts on a target or a spec, assigns a Node, or sees more Nodes
// updated than it last wrote; otherwise as it was.
func (d *decider) lastProgress() metav1.Time {
	r := d.in.Rollout
	old := r.Status
	if old.LastProgressTime == nil || old.Target == nil || *old.Target != d.target ||
		old.ObservedGeneration != r.Generation || len(d.assignments) > 0 || d.counts.updated > int(old.Updated) {
		return d.in.Now
	}
	return *old.LastProgressTime
}

// moving reports whether the rollout has Nodes to move and may move them:
// the only state the progress deadline applies to. A Degraded Node took the
// target (or was given it by someone else): nothing is left to move on it.
func (d *decider) moving() bool {
	c := d.counts
	return d.failure == nil && !d.targetMissing && !d.spec.paused && c.selected > 0 &&
		c.updated < c.selected && c.updated+c.skipped+c.degraded < c.managed
}

// deadlineExceeded reports whether the rollout has gone without progress
// for longer than spec.progressDeadlineSeconds.
func (d *decider) deadlineExceeded() bool {
	return d.moving() && d.in.Now.Sub(d.progressTime.Time) >= d.spec.deadline
}

// recheckAfter is how long until the progress deadline falls due, or a
// Node whose agent reported the target passed too early may be counted
// updated, whichever comes first; zero when neither applies. Nothing on
// the Nodes changes at either moment, so only a recheck notices.
func (d *decider) recheckAfter() time.Duration {
	var after time.Duration
	sooner := func(wait time.Duration) {
		if wait > 0 && (after == 0 || wait < after) {
			after = wait
		}
	}
	if d.moving() {
		sooner(d.progressTime.Add(d.spec.deadline).Sub(d.in.Now.Time))
	}
	// The earliest end of the Nodes still in trial in this decision (a
	// failed rollout reverts some of them).
	d.pool.early.Ascend(func(e due) bool {
		if d.stateOf(d.pool.members[e.name]) != StateInTrial {
			return true
		}
		sooner(e.ends.Sub(d.in.Now.Time))
		return false
	})
	return after
}
