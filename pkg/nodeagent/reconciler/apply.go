package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// apply makes the kubelet run the choice. The order (trial record, file,
// restart, active record) means a crash at any point leads the next pass to
// restart again, never to skip a restart. restarted says whether it
// restarted the kubelet, for judgeTrial in the same round.
func (c *Reconciler) apply(ctx context.Context, ch chosen, out kubelet.Rendered, p *pass) (restarted bool, err error) {
	logger := klog.FromContext(ctx)
	store, clock := c.deps.Store, c.deps.Clock
	want := checkpoint.Active{Ref: ch.ref, FileSHA256: out.SHA256()}
	matches, err := c.deps.File.Matches(out)
	if err != nil {
		return false, err
	}
	active := c.state.active
	recorded := active != nil && contract.SameVersion(active.Ref, ch.ref) && active.FileSHA256 == want.FileSHA256
	adopt := active == nil && matches
	var plan changePlan
	if !(recorded && matches) && !adopt {
		// A change: before its trial starts, the drain it may need.
		if plan, err = c.planChange(ctx, ch, out, c.drainMode(p)); err != nil {
			return false, err
		}
		if plan.drain {
			if ready, err := c.drainFor(ctx, ch, out, plan, p); err != nil || !ready {
				return false, err
			}
		}
	}
	if !plan.drain && c.state.drain != nil && (!ch.onTrial || !contract.SameVersion(c.state.drain.Ref, ch.ref)) {
		// A drain held for another change, or for a configuration now
		// running without a trial: nothing needs the cordon any more.
		if err := c.clearDrain(); err != nil {
			return false, err
		}
	}
	if ch.onTrial {
		if t := c.state.trial; t == nil || t.Ref != *ch.ref {
			// Judged by the terms its assignment gives now, for the whole
			// trial: the rollout that assigned it wrote them beside it.
			started := checkpoint.Trial{Ref: *ch.ref, BootID: clock.BootID(), StartedSinceBoot: clock.SinceBoot(), StartedAt: c.deps.Now(),
				Terms: p.terms.trial.DeepCopy()}
			if err := store.SetTrial(started); err != nil {
				return false, fmt.Errorf("recording the trial: %w", err)
			}
			c.state.trial = &started
			c.tracker = nil
			p.pruneAfter = true
		}
	}

	switch {
	case recorded && matches:
	case adopt:
		// A fresh state directory and a kubelet file that already says
		// this: adopt it rather than restart a kubelet that runs it.
		want.AppliedAt = c.deps.Now()
		if err := store.SetActive(want); err != nil {
			return false, fmt.Errorf("recording the active configuration: %w", err)
		}
		c.state.active = &want
		logger.Info("Adopted the kubelet's configuration file without a restart", "config", describe(ch.ref))
	default:
		if err := c.deps.File.Write(out); err != nil {
			return false, err
		}
		// What the Node and its pods look like before the restart is what
		// the trial's signals compare with: only a change after it is the
		// new configuration's doing.
		c.baseline = nil
		if ch.onTrial {
			c.baseline = c.nodeSnapshot(ctx, p.obs, true)
		}
		restart := c.deps.Restarter.Restart
		if plan.drain {
			restart = func(ctx context.Context) error { return c.restartDrained(ctx, plan.stateFiles) }
		}
		if err := restart(ctx); err != nil {
			return false, err
		}
		c.deps.Metrics.KubeletRestarted()
		want.AppliedAt = c.deps.Now()
		if err := store.SetActive(want); err != nil {
			return true, fmt.Errorf("recording the active configuration: %w", err)
		}
		c.state.active = &want
		// The kubelet's grace period starts at its restart.
		c.tracker = nil
		restarted = true
		p.pruneAfter = true
		message := "Restarted the kubelet with " + describe(ch.ref)
		if plan.drain {
			message += removing(plan.stateFiles) + " after draining the Node"
		}
		if ch.onTrial {
			message += fmt.Sprintf(", on trial for %v", c.trialPeriod())
		}
		p.event(corev1.EventTypeNormal, contract.EventConfigApplied, "%s", message)
		logger.Info("Applied a kubelet configuration", "config", describe(ch.ref), "onTrial", ch.onTrial, "drained", plan.drain)
		if plan.drain && !ch.onTrial {
			// Going back is over once the kubelet runs it: the cordon
			// goes now rather than after a trial it does not have.
			if err := c.clearDrain(); err != nil {
				return true, err
			}
		}
	}

	if !ch.onTrial && c.state.trial != nil {
		if err := store.ClearTrial(); err != nil {
			return restarted, fmt.Errorf("ending the trial record: %w", err)
		}
		c.state.trial = nil
		c.tracker = nil
		p.pruneAfter = true
	}
	return restarted, nil
}

// judgeTrial probes the kubelet and decides the trial; again is true when
// the configuration was recorded bad and the caller must roll back.
// justRestarted (apply restarted the kubelet in this round) delays the
// first probe by a period: a restart command may return before the old
// kubelet stops answering, and a healthy answer from it would arm the
// failure count early.
func (c *Reconciler) judgeTrial(ctx context.Context, ch chosen, justRestarted bool, p *pass) (again bool, err error) {
	store, clock := c.deps.Store, c.deps.Clock
	t := c.state.trial
	if t == nil || t.Ref != *ch.ref {
		return false, fmt.Errorf("internal error: no trial record for %s", describe(ch.ref))
	}
	if bootID := clock.BootID(); t.BootID != bootID {
		// Rebooted during the trial: time on another boot cannot be
		// compared with this one, so the trial starts over.
		restarted := *t
		restarted.BootID, restarted.StartedSinceBoot, restarted.StartedAt = bootID, clock.SinceBoot(), c.deps.Now()
		if err := store.SetTrial(restarted); err != nil {
			return false, fmt.Errorf("restarting the trial on a new boot: %w", err)
		}
		c.state.trial, t = &restarted, &restarted
		c.tracker = nil
		klog.FromContext(ctx).Info("New boot during a trial; the trial starts over", "config", describe(ch.ref))
	}
	now := clock.SinceBoot()
	if c.tracker == nil || c.trackedRef != t.Ref || c.trackedBoot != t.BootID {
		c.tracker = trial.NewTracker(c.trialTerms(), now)
		c.trackedRef, c.trackedBoot = t.Ref, t.BootID
		if held := c.afterDrain(t.Ref); held != nil {
			c.tracker.SetAfterDrain(*held)
		}
		if c.baseline != nil && justRestarted {
			c.tracker.SetBaseline(*c.baseline)
		}
		c.baseline = nil
		c.nextProbe = now
		if justRestarted {
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
	verdict := c.judgeRunning(ctx, ch, healthy, c.tracker.Verdict(t.StartedSinceBoot, now), p)

	switch verdict.Outcome {
	case trial.Pass:
		ref := t.Ref
		waived := c.tracker.Waived()
		if err := c.recordWaived(waived); err != nil {
			return false, err
		}
		if err := store.SetLastKnownGood(&ref); err != nil {
			return false, fmt.Errorf("moving last-known-good: %w", err)
		}
		c.state.lastKnownGood = &ref
		if err := store.ClearTrial(); err != nil {
			return false, fmt.Errorf("ending the trial record: %w", err)
		}
		c.state.trial, c.tracker = nil, nil
		p.pruneAfter = true
		if err := c.clearDrain(); err != nil {
			return false, err
		}
		p.event(corev1.EventTypeNormal, contract.EventTrialPassed, "%s passed its trial and is now last-known-good%s", describe(&ref), sentence(waived))
		return false, nil

	case trial.Fail:
		entry := checkpoint.BadEntry{Ref: t.Ref, Reason: contract.ReasonRolledBack, Message: verdict.Message, At: c.deps.Now()}
		if err := c.recordBad(entry); err != nil {
			return false, fmt.Errorf("recording %s as bad: %w", describe(&entry.Ref), err)
		}
		c.tracker = nil
		c.deps.Metrics.RolledBack()
		p.event(corev1.EventTypeWarning, contract.ReasonRolledBack, "%s failed its trial: %s; rolling back to %s",
			describe(&entry.Ref), verdict.Message, describe(c.state.lastKnownGood))
		return true, nil

	default:
		p.onTrial = true
		p.trialLeft = verdict.Remaining
		p.waived = c.tracker.Waived()
		p.requeue = max(c.nextProbe-now, time.Millisecond)
		if verdict.Remaining > 0 && verdict.Remaining < p.requeue {
			p.requeue = verdict.Remaining
		}
		return false, nil
	}
}

// recordWaived keeps, with the active configuration, what a check its
// trial waived found, so that the status says it for as long as that
// configuration runs; "" records nothing.
func (c *Reconciler) recordWaived(waived string) error {
	a := c.state.active
	if waived == "" || a == nil || a.Waived == waived {
		return nil
	}
	next := *a
	next.Waived = waived
	if err := c.deps.Store.SetActive(next); err != nil {
		return fmt.Errorf("recording the waived check: %w", err)
	}
	c.state.active = &next
	return nil
}

// sentence adds s to a message as a clause of its own; "" adds nothing.
func sentence(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}
