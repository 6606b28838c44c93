package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/metrics"
	"github.com/nodeguard/nodeguard/pkg/podfit"
)

// Drainer is what a drain does with the Node's credentials
// (pkg/nodeagent/drain); an Observation carries one while online.
type Drainer interface {
	Cordon(ctx context.Context, node *corev1.Node, why string) (*corev1.Node, error)
	Uncordon(ctx context.Context, node *corev1.Node) (*corev1.Node, error)
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
	Evict(ctx context.Context, pods []*corev1.Pod) drain.Progress
}

// StateFileRemover removes the kubelet's state files (kubelet.StateFiles).
type StateFileRemover interface {
	Remove(names []string) error
}

// changePlan is how apply moves the kubelet to a configuration: with a
// restart alone, or through a drain.
type changePlan struct {
	drain      bool
	stateFiles []string
	reasons    []string
}

// planChange decides how to move the kubelet from what it runs to out: its
// running configuration against the same with out merged in as the kubelet
// merges it (classifyRunning), or, when the kubelet cannot be read, the
// file it was last started with against out. A drain in progress for
// exactly this change keeps its plan: once the file is written, comparing
// it with itself would find nothing to drain for.
func (c *Reconciler) planChange(ctx context.Context, ch choice, mode string) (changePlan, error) {
	if c.records.drainFor(ch) {
		d := c.records.drain
		return changePlan{drain: true, stateFiles: d.StateFiles, reasons: d.Reasons}, nil
	}
	out := ch.out
	if mode == contract.DrainNever {
		return changePlan{}, nil
	}
	plan, ok := c.classifyRunning(ctx, out)
	if !ok {
		current, err := c.runningFile()
		if err != nil {
			return changePlan{}, err
		}
		var next []byte
		if !out.Absent {
			next = out.Data
		}
		if plan, err = disruption.ClassifyFiles(current, next); err != nil {
			// What the kubelet was given does not decode: it cannot be
			// running it, so there is nothing a drain would protect.
			plan = disruption.Plan{}
		}
	}
	out2 := changePlan{drain: plan.Drain, stateFiles: plan.StateFiles, reasons: plan.Reasons}
	if mode == contract.DrainAlways && !out2.drain {
		out2.drain = true
		out2.reasons = append(out2.reasons, contract.DrainAnnotation+" is "+contract.DrainAlways)
	}
	return out2, nil
}

// runningFile is what the kubelet was last started with: the rendering of
// the active configuration the agent recorded, or, before the agent has
// applied anything, the kubelet's file as it is.
func (c *Reconciler) runningFile() ([]byte, error) {
	if a := c.records.active; a != nil {
		var out kubelet.Rendered
		var err error
		if a.Ref == nil {
			out, err = c.deps.Renderer.Local()
		} else {
			var cp checkpoint.Checkpoint
			if cp, err = c.deps.Store.LoadCheckpoint(*a.Ref); err == nil {
				out, err = c.deps.Renderer.Assigned([]byte(cp.Config))
			}
		}
		// A rendering that no longer matches what was recorded (the local
		// file changed since) is still the best account of the fields a
		// ConfigMap sets; one that fails falls back to the file.
		if err == nil {
			if out.Absent {
				return nil, nil
			}
			return out.Data, nil
		}
	}
	return c.deps.File.Current()
}

// drainMode is the mode this pass applies changes with: the Node's
// annotation, else the agent's default.
func (c *Reconciler) drainMode(p *pass) string {
	if p.obs.Online && p.obs.Node != nil {
		if mode, ok := p.obs.Node.Annotations[contract.DrainAnnotation]; ok {
			if contract.ValidDrainMode(mode) && mode != "" {
				c.warned.drainMode = ""
				return mode
			}
			if mode == c.warned.drainMode {
				// Said once, not once a pass.
				return c.cfg.DrainMode
			}
			c.warned.drainMode = mode
			p.event(corev1.EventTypeWarning, contract.ReasonAssignmentInvalid, "%s=%q is not one of %s, %s, %s; using %s",
				contract.DrainAnnotation, mode, contract.DrainAuto, contract.DrainAlways, contract.DrainNever, c.cfg.DrainMode)
		}
	}
	return c.cfg.DrainMode
}

// startDrain records the drain a change to ch needs (the start of
// Draining): before it cordons, so that a killed agent finds the cordon it
// holds. A drain started again for the same change (a new boot) keeps what
// the Node held before it first began: those evicted since are no longer
// there to be seen. The pods are looked at afresh, and the timeout starts
// over.
func (c *Reconciler) startDrain(ctx context.Context, ch choice, plan changePlan, p *pass) error {
	clock := c.deps.Clock
	started := checkpoint.Drain{Ref: ch.ref, FileSHA256: ch.out.SHA256(), StateFiles: plan.stateFiles, Reasons: plan.reasons,
		BootID: clock.BootID(), StartedSinceBoot: clock.SinceBoot(), StartedAt: c.deps.Now()}
	if c.records.drainFor(ch) {
		started.Held = c.records.drain.Held
	}
	if err := c.deps.Store.SetDrain(started); err != nil {
		return fmt.Errorf("recording the drain: %w", err)
	}
	c.records.drain = &started
	p.event(corev1.EventTypeNormal, contract.ReasonDraining, "Draining the Node to apply %s: %s", describe(ch.ref), strings.Join(plan.reasons, "; "))
	klog.FromContext(ctx).Info("A change needs the Node drained", "config", describe(ch.ref), "reasons", plan.reasons, "stateFiles", plan.stateFiles)
	return nil
}

// drainStep takes one step of the drain recorded for ch (Draining): it
// cordons before it evicts, so that evicted pods are not scheduled
// straight back. Once the Node is drained the restart is the next pass's,
// so that the status says Restarting while it happens. A drain that times
// out, or that pods it may not delete block, gives up: ch is recorded as
// not applied and the next step falls back. Going back (ch needs no trial)
// is never held up by its drain: the configuration it leaves failed.
func (c *Reconciler) drainStep(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	rec := c.records.drain
	plan := changePlan{drain: true, stateFiles: rec.StateFiles, reasons: rec.Reasons}
	if rec.BootID != c.deps.Clock.BootID() {
		if err := c.startDrain(ctx, ch, plan, p); err != nil {
			return false, err
		}
		rec = c.records.drain
	}
	goBack := func() (bool, error) { return c.restartKubelet(ctx, ch, plan, p) }
	d, node := p.obs.Drainer, p.obs.Node
	if !p.obs.Online || d == nil || node == nil {
		if !ch.onTrial {
			// Nor by an unreachable apiserver: the Node was drained for
			// the configuration it leaves anyway.
			return goBack()
		}
		p.wait(contract.PhaseDraining, fmt.Sprintf("%s needs the Node drained (%s); waiting for the apiserver", describe(ch.ref), strings.Join(rec.Reasons, "; ")), nil)
		return false, nil
	}
	cordoned, err := d.Cordon(ctx, node, describe(ch.ref))
	if err != nil {
		return false, err
	}
	// The pass goes on with the Node as the cordon left it, so that a
	// drain given up in this very pass lifts the cordon before it ends.
	p.obs.Node = cordoned
	pods, err := d.ListPods(ctx)
	if err != nil {
		return false, err
	}
	evict, blocked := drain.Filter(pods, p.terms.drain)
	if len(blocked) > 0 {
		if ch.onTrial {
			// Pods kubectl drain refuses to delete without being told, which
			// the assignment did not allow: not applied until the ConfigMap
			// or the switches change (choose).
			evicted := "nothing was evicted, "
			if rec.Held != nil {
				// Pods listed before had been asked to leave: a protected
				// pod came after the drain began.
				evicted = ""
			}
			opts := p.terms.drain
			return true, c.giveUpDrain(checkpoint.BadEntry{Ref: *ch.ref, Reason: contract.ReasonDrainBlocked, Message: fmt.Sprintf(
				"the drain it needs would delete pods that nothing brings back: %s; %sthe Node was uncordoned and the change not applied",
				drain.DescribeBlocked(blocked), evicted), PendingPods: drain.BlockedNames(blocked), DrainOptions: &opts}, p)
		}
		// The pods kubectl's rules protect stay all the same.
		if key := strings.Join(drain.BlockedNames(blocked), ","); key != c.warned.blocked {
			c.warned.blocked = key
			p.event(corev1.EventTypeWarning, contract.ReasonDrainBlocked, "Going back to %s through a drain that leaves %s on the Node: no switch of its assignment allows deleting them",
				describe(ch.ref), drain.DescribeBlocked(blocked))
		}
	}
	if rec.Held == nil && ch.onTrial {
		// Before the first eviction: what the trial will hold the change
		// to.
		if rec, err = c.recordHeld(rec, pods); err != nil {
			return false, err
		}
	}
	progress := d.Evict(ctx, evict)
	if progress.Done() {
		done := *rec
		done.Drained = true
		if err := c.deps.Store.SetDrain(done); err != nil {
			return false, fmt.Errorf("recording the drain: %w", err)
		}
		c.records.drain = &done
		c.deps.Metrics.DrainEnded(metrics.DrainDrained)
		p.event(corev1.EventTypeNormal, contract.ReasonRestarting, "Drained the Node; restarting the kubelet with %s%s", describe(ch.ref), removing(rec.StateFiles))
		p.wait(contract.PhaseRestarting, fmt.Sprintf("the Node is drained; restarting the kubelet with %s%s", describe(ch.ref), removing(rec.StateFiles)), nil)
		p.requeue = minRequeue
		return false, nil
	}
	if elapsed := c.deps.Clock.SinceBoot() - rec.StartedSinceBoot; elapsed >= c.cfg.DrainTimeout {
		if !ch.onTrial {
			p.event(corev1.EventTypeWarning, contract.ReasonDrainTimedOut, "The drain for going back to %s timed out after %v waiting on %s; going back anyway",
				describe(ch.ref), c.cfg.DrainTimeout, progress.Summary())
			return goBack()
		}
		return true, c.giveUpDrain(checkpoint.BadEntry{Ref: *ch.ref, Reason: contract.ReasonDrainTimedOut, Message: fmt.Sprintf(
			"the drain it needs did not finish within %v; the Node was uncordoned and the change not applied; blocked by %s",
			c.cfg.DrainTimeout, progress.Summary()), PendingPods: progress.Names()}, p)
	}
	p.wait(contract.PhaseDraining, fmt.Sprintf("draining the Node to apply %s (%s): waiting on %s", describe(ch.ref), strings.Join(rec.Reasons, "; "), progress.Summary()), progress.Names())
	p.requeue = c.cfg.DrainPollPeriod
	return false, nil
}

// giveUpDrain records a configuration as not applied, entry saying why
// and naming the pods that blocked its drain, and forgets the drain, which
// lifts the cordon at the end of the pass; the next step falls back.
func (c *Reconciler) giveUpDrain(entry checkpoint.BadEntry, p *pass) error {
	entry.At = c.deps.Now()
	if err := c.recordBad(entry); err != nil {
		return fmt.Errorf("recording %s as not applied: %w", describe(&entry.Ref), err)
	}
	if err := c.clearDrain(); err != nil {
		return err
	}
	result := metrics.DrainTimedOut
	if entry.Reason == contract.ReasonDrainBlocked {
		result = metrics.DrainBlocked
	}
	c.deps.Metrics.DrainEnded(result)
	p.event(corev1.EventTypeWarning, entry.Reason, "%s: %s", describe(&entry.Ref), entry.Message)
	return nil
}

// recordHeld keeps, with the drain, the pods the Node runs before anything
// is evicted: what the trial after the restart holds the change to.
func (c *Reconciler) recordHeld(rec *checkpoint.Drain, pods []*corev1.Pod) (*checkpoint.Drain, error) {
	held := &checkpoint.Held{At: c.deps.Now()}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
			// Over, or leaving whatever the change: not the Node's to
			// take back.
			continue
		}
		held.Pods = append(held.Pods, checkpoint.HeldPod{Namespace: pod.Namespace, Name: pod.Name, Requests: podfit.Requests(pod)})
	}
	next := *rec
	next.Held = held
	if err := c.deps.Store.SetDrain(next); err != nil {
		return rec, fmt.Errorf("recording the pods the Node holds: %w", err)
	}
	c.records.drain = &next
	return &next, nil
}

// restartDrained restarts the kubelet for a drained change: stopped, its
// invalidated state files removed, started. Without a way to stop it (a
// restart command alone), the files are removed just before the restart;
// a drained kubelet rarely writes its state in that moment, and the trial
// catches it if it does.
func (c *Reconciler) restartDrained(ctx context.Context, stateFiles []string) error {
	if len(stateFiles) == 0 {
		return c.deps.Restarter.Restart(ctx)
	}
	if c.deps.StateFiles == nil {
		return errors.New("the change invalidates the kubelet's state files, and no kubelet root directory is configured")
	}
	if ss, ok := c.deps.Restarter.(kubelet.StopStarter); ok {
		err := ss.Stop(ctx)
		switch {
		case err == nil:
			if err := c.deps.StateFiles.Remove(stateFiles); err != nil {
				// Start it again on what it had: better than a stopped
				// kubelet; the next pass retries the whole step.
				return errors.Join(err, ss.Start(ctx))
			}
			return ss.Start(ctx)
		case !errors.Is(err, kubelet.ErrNoStopCommand):
			return err
		}
	}
	if err := c.deps.StateFiles.Remove(stateFiles); err != nil {
		return err
	}
	return c.deps.Restarter.Restart(ctx)
}

// clearDrain forgets the drain; the cordon is lifted at the end of the
// pass (releaseCordon).
func (c *Reconciler) clearDrain() error {
	if c.records.drain == nil {
		return nil
	}
	if err := c.deps.Store.ClearDrain(); err != nil {
		return fmt.Errorf("ending the drain record: %w", err)
	}
	c.records.drain = nil
	return nil
}

// releaseCordon lifts the agent's cordon once no drain holds it: after a
// passed trial, a rollback, a drain that timed out, or an agent restarted
// after any of them. Level-triggered, so a killed agent never leaves the
// Node cordoned: the next pass that sees the mark without a drain record
// removes it.
func (c *Reconciler) releaseCordon(ctx context.Context, p *pass) error {
	d, node := p.obs.Drainer, p.obs.Node
	if c.records.drain != nil || !p.obs.Online || d == nil || node == nil || !drain.CordonedByAgent(node) {
		return nil
	}
	if _, err := d.Uncordon(ctx, node); err != nil {
		return err
	}
	p.event(corev1.EventTypeNormal, contract.EventUncordoned, "Removed the cordon the agent set for a change")
	klog.FromContext(ctx).Info("Uncordoned the Node")
	return nil
}

func removing(files []string) string {
	if len(files) == 0 {
		return ""
	}
	return ", removing " + strings.Join(files, ", ")
}
