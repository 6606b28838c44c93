package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// startTrial records the trial of ch unless it is recorded already. It is
// judged by the terms its assignment gives now, for the whole trial: the
// rollout that assigned it wrote them beside it.
func (c *Reconciler) startTrial(ch choice, p *pass) error {
	if tr := c.records.trial; tr != nil && tr.Ref == *ch.ref {
		return nil
	}
	clock := c.deps.Clock
	return c.setTrial(checkpoint.Trial{Ref: *ch.ref, BootID: clock.BootID(), StartedSinceBoot: clock.SinceBoot(), StartedAt: c.deps.Now(),
		Terms: p.terms.trial.DeepCopy()})
}

// judgeTrial probes the kubelet and judges the trial of ch (OnTrial). After
// a restart in this pass the first probe waits a period: a restart
// command may return before the old kubelet stops answering, and a
// healthy answer from it would arm the failure count early.
func (c *Reconciler) judgeTrial(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	if !ch.onTrial {
		// It passed and became last-known-good before the agent could
		// end its trial record.
		return c.passTrial(ch, p)
	}
	if d := c.records.drain; d != nil && !contract.SameVersion(d.Ref, ch.ref) {
		// A drain held for another change: nothing needs the cordon.
		if err := c.clearDrain(); err != nil {
			return false, err
		}
	}
	if err := c.startTrial(ch, p); err != nil {
		return false, err
	}
	clock := c.deps.Clock
	tr := c.records.trial
	if bootID := clock.BootID(); tr.BootID != bootID {
		// Rebooted during the trial: time on another boot cannot be
		// compared with this one, so the trial starts over.
		restarted := *tr
		restarted.BootID, restarted.StartedSinceBoot, restarted.StartedAt = bootID, clock.SinceBoot(), c.deps.Now()
		if err := c.setTrial(restarted); err != nil {
			return false, fmt.Errorf("restarting the trial on a new boot: %w", err)
		}
		tr = c.records.trial
		klog.FromContext(ctx).Info("New boot during a trial; the trial starts over", "config", describe(ch.ref))
	}
	now := clock.SinceBoot()
	if c.tracker == nil {
		c.tracker = trial.NewTracker(c.trialTerms(), now)
		if held := c.afterDrain(tr.Ref); held != nil {
			c.tracker.SetAfterDrain(*held)
		}
		if p.baseline != nil {
			c.tracker.SetBaseline(*p.baseline)
		}
		c.nextProbe = now
		if p.restarted {
			c.nextProbe = now + c.cfg.ProbePeriod
		}
	}
	probing, healthy := now >= c.nextProbe, false
	if probing {
		probeErr := c.deps.Prober.Probe(ctx)
		c.tracker.Observe(probeErr)
		c.nextProbe = now + c.cfg.ProbePeriod
		healthy = probeErr == nil
	}
	// Every pass looks at the Node as last seen (it is in memory); the
	// pods are listed anew once a probe period, with the probe, so that a
	// trial costs the apiserver one small list per period and the rest of
	// the time none. Offline, only the kubelet's health judges.
	if s := c.nodeSnapshot(ctx, p.obs, probing); s != nil {
		c.tracker.ObserveNode(now, *s)
	}
	verdict := c.judgeRunning(ctx, ch, healthy, c.tracker.Verdict(tr.StartedSinceBoot, now), p)
	switch verdict.Outcome {
	case trial.Pass:
		return c.passTrial(ch, p)
	case trial.Fail:
		return c.failTrial(tr.Ref, verdict.Message, p)
	}
	p.waived = c.tracker.Waived()
	p.requeue = max(c.nextProbe-now, time.Millisecond)
	if verdict.Remaining > 0 && verdict.Remaining < p.requeue {
		p.requeue = verdict.Remaining
	}
	return false, nil
}

// passTrial makes the configuration on trial last-known-good, ends its
// trial record and its drain (Idle).
func (c *Reconciler) passTrial(ch choice, p *pass) (again bool, err error) {
	ref := *ch.ref
	waived := ""
	if c.tracker != nil {
		waived = c.tracker.Waived()
	}
	if err := c.recordWaived(waived); err != nil {
		return false, err
	}
	if !contract.SameVersion(c.records.lastKnownGood, &ref) {
		if err := c.deps.Store.SetLastKnownGood(&ref); err != nil {
			return false, fmt.Errorf("moving last-known-good: %w", err)
		}
		c.records.lastKnownGood = &ref
	}
	if err := c.clearTrial(); err != nil {
		return false, err
	}
	if err := c.clearDrain(); err != nil {
		return false, err
	}
	p.phase = Idle
	p.event(corev1.EventTypeNormal, contract.EventTrialPassed, "%s passed its trial and is now last-known-good%s", describe(&ref), sentence(waived))
	return false, nil
}

// failTrial records the configuration on trial bad (by UID and
// resourceVersion), so that the next step chooses last-known-good and
// rolls back to it.
func (c *Reconciler) failTrial(ref contract.ConfigMapVersion, why string, p *pass) (again bool, err error) {
	entry := checkpoint.BadEntry{Ref: ref, Reason: contract.ReasonRolledBack, Message: why, At: c.deps.Now()}
	if err := c.recordBad(entry); err != nil {
		return false, fmt.Errorf("recording %s as bad: %w", describe(&ref), err)
	}
	c.tracker = nil
	c.deps.Metrics.RolledBack()
	p.event(corev1.EventTypeWarning, contract.ReasonRolledBack, "%s failed its trial: %s; rolling back to %s",
		describe(&ref), why, describe(c.records.lastKnownGood))
	return true, nil
}

// rollBack takes the kubelet back to ch, last-known-good or the local
// configuration, from a configuration whose trial failed or was withdrawn
// (RollingBack): through a drain when the way back needs one, never held
// up by it (the configuration it leaves failed), and once the kubelet runs
// ch the trial record goes, and the drain with it.
func (c *Reconciler) rollBack(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	back := *c.records
	back.trial = nil
	phase, err := c.phase(back, ch)
	if err != nil {
		return false, err
	}
	switch phase {
	case Draining:
		return c.drainStep(ctx, ch, p)
	case Restarting:
		return c.startChange(ctx, ch, p)
	}
	if err := c.clearTrial(); err != nil {
		return false, err
	}
	return false, c.clearDrain()
}

// recordWaived keeps, with the active configuration, what a check its
// trial waived found, so that the status says it for as long as that
// configuration runs; "" records nothing.
func (c *Reconciler) recordWaived(waived string) error {
	a := c.records.active
	if waived == "" || a == nil || a.Waived == waived {
		return nil
	}
	next := *a
	next.Waived = waived
	if err := c.deps.Store.SetActive(next); err != nil {
		return fmt.Errorf("recording the waived check: %w", err)
	}
	c.records.active = &next
	return nil
}

// sentence adds s to a message as a clause of its own; "" adds nothing.
func sentence(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}
