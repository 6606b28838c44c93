package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// startChange begins moving the kubelet to ch (Restarting): startDrain
// when the change needs the Node drained first, restartKubelet otherwise.
func (c *Reconciler) startChange(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	matches, err := c.deps.File.Matches(ch.out)
	if err != nil {
		return false, err
	}
	if c.records.active == nil && matches {
		// A fresh state directory and a kubelet file that already says
		// ch: adopt it rather than restart a kubelet that runs it.
		klog.FromContext(ctx).Info("Adopting the kubelet's configuration file without a restart", "config", describe(ch.ref))
		return ch.onTrial || c.records.trial != nil, c.setActive(ch)
	}
	plan, err := c.planChange(ctx, ch, c.drainMode(p))
	if err != nil {
		return false, err
	}
	if plan.drain && !c.records.drainFor(ch) {
		return true, c.startDrain(ctx, ch, plan, p)
	}
	if d := c.records.drain; !plan.drain && d != nil && (!ch.onTrial || !contract.SameVersion(d.Ref, ch.ref)) {
		// A drain held for another change, or for a configuration that
		// runs without a trial: nothing needs the cordon any more.
		if err := c.clearDrain(); err != nil {
			return false, err
		}
	}
	return c.restartKubelet(ctx, ch, plan, p)
}

// restartKubelet makes the kubelet run ch. The order (trial record, file,
// restart, active record) means a crash at any point leads the next pass
// to restart again, never to skip a restart. again asks for the trial's
// first look in the same pass (or the end of a trial record that stands).
func (c *Reconciler) restartKubelet(ctx context.Context, ch choice, plan changePlan, p *pass) (again bool, err error) {
	if ch.onTrial {
		if err := c.startTrial(ch, p); err != nil {
			return false, err
		}
	}
	if err := c.deps.File.Write(ch.out); err != nil {
		return false, err
	}
	// What the Node and its pods look like before the restart is what the
	// trial's signals compare with: only a change after it is the new
	// configuration's doing.
	if ch.onTrial {
		p.baseline = c.nodeSnapshot(ctx, p.obs, true)
	}
	restart := c.deps.Restarter.Restart
	if plan.drain {
		restart = func(ctx context.Context) error { return c.restartDrained(ctx, plan.stateFiles) }
	}
	if err := restart(ctx); err != nil {
		return false, err
	}
	c.deps.Metrics.KubeletRestarted()
	// The kubelet's grace period starts at its restart.
	c.tracker, p.restarted = nil, true
	c.afterRestart(ch, p)
	if err := c.setActive(ch); err != nil {
		return false, err
	}
	message := "Restarted the kubelet with " + describe(ch.ref)
	if plan.drain {
		message += removing(plan.stateFiles) + " after draining the Node"
	}
	if ch.onTrial {
		message += fmt.Sprintf(", on trial for %v", c.trialPeriod())
	}
	p.event(corev1.EventTypeNormal, contract.EventConfigApplied, "%s", message)
	klog.FromContext(ctx).Info("Applied a kubelet configuration", "config", describe(ch.ref), "onTrial", ch.onTrial, "drained", plan.drain)
	if plan.drain && !ch.onTrial {
		// Going back is over once the kubelet runs it: the cordon goes
		// now rather than after a trial it does not have.
		if err := c.clearDrain(); err != nil {
			return false, err
		}
	}
	return ch.onTrial || c.records.trial != nil, nil
}

// setActive records that the kubelet runs ch.
func (c *Reconciler) setActive(ch choice) error {
	a := checkpoint.Active{Ref: ch.ref, FileSHA256: ch.out.SHA256(), AppliedAt: c.deps.Now()}
	if err := c.deps.Store.SetActive(a); err != nil {
		return fmt.Errorf("recording the active configuration: %w", err)
	}
	c.records.active = &a
	return nil
}
