package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// errSpecChanged ends a status write whose decision was made on a spec
// that has changed since: the rollout is decided again instead.
var errSpecChanged = errors.New("the rollout's spec changed since the decision")

// sync makes and carries out one decision for the rollout name.
func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("rollout", name)
	ctx = klog.NewContext(ctx, logger)
	obj, exists, err := c.rolloutInformer.GetStore().GetByKey(name)
	if err != nil {
		return fmt.Errorf("rollout %s: reading the cache: %w", name, err)
	}
	if !exists {
		// Deleting a rollout leaves every assignment as it is.
		c.forget(name)
		logger.V(2).Info("Rollout is gone; leaving its Nodes as they are")
		return nil
	}
	r, ok := obj.(*v1alpha1.KubeletConfigRollout)
	if !ok {
		return fmt.Errorf("rollout %s: cached object is a %T", name, obj)
	}
	now := c.clock.Now()
	if ok, wait := c.expectations.satisfied(name, r.ResourceVersion, now); !ok {
		// The write's event wakes the rollout up; the deadline is a
		// backstop.
		logger.V(4).Info("Waiting for the cache to show the controller's last status write", "atMost", wait)
		c.queue.AddAfter(name, wait)
		c.metrics.sync("waiting")
		return nil
	}
	selector, err := rollout.Selector(r)
	if err != nil {
		// The CRD refuses such a spec; nothing to retry until it changes.
		c.event(r, nil, corev1.EventTypeWarning, "InvalidSelector", "Sync", err.Error())
		logger.Error(err, "Rollout selects no Node")
		return nil
	}
	nodes, err := c.selectedNodes(selector)
	if err != nil {
		return err
	}
	nodes = c.unseen.overlay(name, nodes, now)
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, node := range nodes {
		byName[node.Name] = node
	}
	rollouts := c.rolloutsCached()
	observations, err := rollout.ObserveSelected(selector, name, rollouts, nodes)
	if err != nil {
		// Usable all the same; the agents report the same problems.
		logger.V(2).Info("Nodes partly unreadable", "err", err)
	}
	target, ineligible := c.target(ctx, r.Spec.ConfigMapRef)
	decision, err := rollout.Decide(rollout.Input{
		Rollout:          r,
		Target:           target,
		TargetIneligible: ineligible,
		Nodes:            observations,
		Refusals:         c.refusals.of(name, target),
		Now:              metav1.NewTime(now),
	})
	if err != nil {
		c.event(r, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", err.Error())
		logger.Error(err, "Rollout cannot be decided")
		return nil
	}
	c.metrics.observe(name, decision.Nodes, now)
	progressing := meta.FindStatusCondition(decision.Status.Conditions, v1alpha1.ConditionProgressing)
	c.metrics.progressing(name, progressing != nil && progressing.Reason == v1alpha1.ReasonProgressDeadlineExceeded)
	c.nodeEvents(r, decision.Nodes, byName)
	if decision.RecheckAfter > 0 {
		// Nothing may change before the progress deadline falls due.
		c.queue.AddAfter(name, decision.RecheckAfter)
	}

	// The status goes first when the decision reverts or changes the
	// rollout's state (rollout.Decision.StatusFirst): a revert must not run
	// ahead of the Failed condition that explains it, and the write, made
	// over the rollout's resourceVersion, fails once the rollout was
	// paused, edited or deleted since the cache showed it, before any Node
	// is patched on the old spec. Otherwise it goes out beside the
	// assignments, which then wait on no round trip of their own.
	pending := !equality.Semantic.DeepEqual(r.Status, decision.Status)
	statusFirst := pending && decision.StatusFirst(r.Status)
	if (statusFirst || len(decision.Revert) > 0) && c.unseen.inFlight(name) {
		// A change of state or a revert waits for the assignments in
		// flight: the status that fences it must follow their outcome, and
		// a revert must cover them. Their answers wake the rollout.
		logger.V(4).Info("Waiting for the assignments in flight before changing the rollout's state")
		c.metrics.sync("waiting")
		return nil
	}
	if statusFirst {
		if err := c.storeStatus(ctx, r, &decision.Status); err != nil {
			return err
		}
		pending = false
	}
	if failed := meta.FindStatusCondition(decision.Status.Conditions, v1alpha1.ConditionFailed); failed != nil &&
		failed.Status == metav1.ConditionTrue && decision.Status.Target != nil {
		// The failure is in the status now (StatusFirst holds for a failed
		// rollout); the refusals behind it need not be fed back again.
		c.refusals.recorded(name, *decision.Status.Target)
	}
	basis := decisionBasis{rollout: name, selector: selector, rollouts: rollouts, observed: make(map[string]rollout.NodeObservation, len(observations))}
	for _, obs := range observations {
		basis.observed[obs.Name] = obs
	}
	if len(decision.Revert) > 0 {
		// A failed rollout moves no Node forward: its reverts are patched
		// within the sync, and the next decision reads them as applied
		// (unseen) until the cache shows them.
		c.unseen.sending(name, decision.Revert)
		var (
			statusErr error
			writing   sync.WaitGroup
		)
		if pending {
			writing.Go(func() { statusErr = c.storeStatus(ctx, r, &decision.Status) })
		}
		applyErr := c.apply(ctx, r, decision, byName, basis)
		writing.Wait()
		if err := errors.Join(statusErr, applyErr); err != nil {
			return err
		}
		c.metrics.sync("ok")
		return nil
	}
	if len(decision.Assign) > 0 || len(decision.Record) > 0 {
		// The assignments go out in the background and the next decision
		// reads them as applied (unseen), so it need not wait for their
		// round trips: a Node that passes its trial meanwhile frees its
		// slot for the next Node at once. Their answers wake the rollout.
		// The trial-passed marks follow them, off the path to the next
		// Node.
		c.unseen.sending(name, decision.Assign)
		c.unseen.sending(name, decision.Record)
		c.sending.Go(func() {
			if err := c.apply(ctx, r, decision, byName, basis); err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Assigning failed; requeued", "rollout", name)
				c.queue.AddRateLimited(name)
				return
			}
			c.queue.Add(name)
		})
	}
	if pending {
		if err := c.storeStatus(ctx, r, &decision.Status); err != nil {
			return err
		}
	}
	c.metrics.sync("ok")
	return nil
}

func (c *Controller) selectedNodes(selector labels.Selector) ([]*corev1.Node, error) {
	var out []*corev1.Node
	err := cache.ListAll(c.nodeInformer.GetIndexer(), selector, func(obj any) {
		if node, ok := obj.(*corev1.Node); ok {
			out = append(out, node)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing cached Nodes: %w", err)
	}
	return out, nil
}

// target is the eligible ConfigMap ref names, nil when there is none
// (rollout.TargetOf). The informer holds only eligible ConfigMaps; one it
// does not hold is read once more, its metadata alone, to tell a
// ConfigMap that lacks the label (ineligible) from a missing one. A failed
// read reports it missing, the safe answer: nothing is assigned.
func (c *Controller) target(ctx context.Context, ref v1alpha1.ConfigMapReference) (target *contract.ObjectRef, ineligible bool) {
	obj, exists, err := c.cmInformer.GetStore().GetByKey(ref.Namespace + "/" + ref.Name)
	if err == nil && exists {
		if m, ok := obj.(metav1.Object); ok {
			return rollout.TargetOf(m)
		}
	}
	m, err := c.metadata.Resource(configMapsResource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Reading the target's metadata failed", "configMap", ref.Namespace+"/"+ref.Name, "err", err)
		}
		return nil, false
	}
	if contract.IsEligible(m.GetLabels()) {
		// Eligible but not cached yet: its add event brings it.
		return nil, false
	}
	return rollout.TargetOf(m)
}

// storeStatus writes the decided status and records what follows from it:
// the expectation that the cache shows it, and the Events of a change of
// state.
func (c *Controller) storeStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *v1alpha1.KubeletConfigRolloutStatus) error {
	w, err := c.writeStatus(ctx, r, *st)
	if err != nil {
		return err
	}
	c.expectations.expectRollout(r.Name, w, c.clock.Now())
	c.stateEvents(r, st)
	return nil
}

// writeStatus writes status over the rollout r was decided on, retrying
// conflicts on the latest rollout as long as its spec is the one decided
// on. It returns the successful write.
func (c *Controller) writeStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, status v1alpha1.KubeletConfigRolloutStatus) (write, error) {
	current := r.DeepCopy()
	var w write
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current.Status = status
		w.over = append(w.over, current.ResourceVersion)
		updated, err := c.rollouts.UpdateStatus(ctx, current, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			w.produced = updated.ResourceVersion
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		latest, getErr := c.rollouts.Get(ctx, r.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		if latest.Generation != r.Generation {
			return errSpecChanged
		}
		current = latest
		return err
	})
	switch {
	case errors.Is(err, errSpecChanged), apierrors.IsNotFound(err):
		// Decided again on the new spec, or forgotten, by the sync its
		// event brings.
		klog.FromContext(ctx).V(2).Info("Status not written", "reason", err)
		return write{}, fmt.Errorf("rollout %s: status: %w", r.Name, err)
	case err != nil:
		return write{}, fmt.Errorf("rollout %s: writing the status: %w", r.Name, err)
	}
	return w, nil
}

// apply patches the Nodes of a decision whose status is written: reverts
// first, then assignments, then the trial-passed marks, each several in
// flight (patchAll). Every revert is tried; a conflict or a failure
// requeues the rollout, a refusal of an assignment stops the assignments
// and is fed to the next decision, which fails the rollout, unless it
// concerns the Node's own state: that Node is skipped and the others go
// on.
func (c *Controller) apply(ctx context.Context, r *v1alpha1.KubeletConfigRollout, d rollout.Decision, nodes map[string]*corev1.Node, basis decisionBasis) error {
	logger := klog.FromContext(ctx)
	var errs []error
	requeue := false
	send := func(action string) func(context.Context, rollout.Change) (string, error) {
		return func(ctx context.Context, change rollout.Change) (string, error) {
			return c.patch(ctx, r.Name, action, change, basis)
		}
	}
	for _, p := range patchAll(ctx, d.Revert, maxPatchesInFlight, false, send("revert")) {
		c.metrics.change(r.Name, "revert", p.result)
		switch p.result {
		case resultOK:
			c.event(nodes[p.change.Node], r, corev1.EventTypeNormal, "Reverted", "Revert",
				fmt.Sprintf("rollout %s failed; re-pointed to the previous source %s", r.Name, sourceName(p.change.Annotations[contract.ConfigSourceAnnotation])))
			logger.Info("Reverted Node", "node", p.change.Node)
		case resultConflict:
			requeue = true
		default:
			errs = append(errs, p.err)
		}
	}
	var assigned []string
	target := d.Status.Target
	// The rollout fails on a refusal: patchAll sends nothing after it.
	for _, p := range patchAll(ctx, d.Assign, firstAssignments(d), true, send("assign")) {
		c.metrics.change(r.Name, "assign", p.result)
		switch p.result {
		case resultOK:
			assigned = append(assigned, p.change.Node)
			c.event(nodes[p.change.Node], r, corev1.EventTypeNormal, "Assigned", "Assign",
				fmt.Sprintf("rollout %s assigned %s", r.Name, sourceName(p.change.Annotations[contract.ConfigSourceAnnotation])))
			logger.Info("Assigned Node", "node", p.change.Node, "target", target)
		case resultConflict:
			requeue = true
		case resultRefused:
			if target != nil {
				c.refusals.add(r.Name, *target, rollout.Refusal{Node: p.change.Node, Message: p.err.Error()})
			}
			c.event(r, nodes[p.change.Node], corev1.EventTypeWarning, v1alpha1.ReasonAssignmentRefused, "Assign",
				fmt.Sprintf("assigning Node %s was refused: %v", p.change.Node, p.err))
			logger.Info("Assignment refused by admission", "node", p.change.Node, "err", p.err)
			requeue = true
		case resultSkipped:
			// The Node's own state is refused, not the target: the Node is
			// skipped (its Event comes with the decision that shows it).
			if target != nil {
				c.refusals.add(r.Name, *target, rollout.Refusal{Node: p.change.Node, Message: p.err.Error(), NodeState: true})
			}
			logger.Info("Assignment refused for the Node's own state; skipping the Node", "node", p.change.Node, "err", p.err)
			requeue = true
		default:
			errs = append(errs, p.err)
		}
	}
	c.metrics.assigned(r.Name, assigned, c.clock.Now())
	for _, p := range patchAll(ctx, d.Record, maxPatchesInFlight, false, send("record")) {
		c.metrics.change(r.Name, "record", p.result)
		switch p.result {
		case resultOK:
			logger.V(2).Info("Recorded the Node's passed trial", "node", p.change.Node, "target", target)
		case resultConflict:
			requeue = true
		default:
			errs = append(errs, p.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if requeue {
		// A Node that moved since the decision (a kubelet's status write
		// changes its resourceVersion) or a refusal to feed back is no
		// failure of the sync: deciding again soon is all it takes. As an
		// error it would go through the queue's per-item exponential
		// backoff, which grows with every such sync in a row and, on a
		// large pool whose Nodes keep writing, holds the rollout for
		// seconds. The moved Node's own update event usually wakes the
		// rollout first; the delay is a backstop.
		logger.V(2).Info("Some Node patches did not apply; deciding again", "after", requeueAfterConflict)
		c.queue.AddAfter(r.Name, requeueAfterConflict)
	}
	return nil
}

// requeueAfterConflict is how soon a rollout whose Node patches did not all
// apply is decided again, at the latest.
const requeueAfterConflict = 250 * time.Millisecond

// Results of a Node patch, also the metric's label values.
const (
	resultOK       = "ok"
	resultConflict = "conflict"
	resultRetried  = "retried"
	resultRefused  = "refused"
	resultSkipped  = "skipped"
	resultError    = "error"
)

// errNodeMoved ends the retries of a patch whose Node changed, since the
// decision, in something the decision read.
var errNodeMoved = errors.New("the Node changed since the decision")

// decisionBasis is what a decision was made on, for telling a conflict that
// invalidates it from one that does not.
type decisionBasis struct {
	rollout  string
	selector labels.Selector
	rollouts []*v1alpha1.KubeletConfigRollout
	// observed are the selected Nodes as the decision saw them, by name.
	observed map[string]rollout.NodeObservation
}

// unchanged reports whether node, as it is now, is still the Node the
// decision saw: selected, and observed the same but for its
// resourceVersion. The observation is everything Decide reads of a Node.
func (b decisionBasis) unchanged(node *corev1.Node) bool {
	before, ok := b.observed[node.Name]
	set := labels.Set(node.Labels)
	if !ok || !b.selector.Matches(set) {
		return false
	}
	now, _ := rollout.ObserveNode(node, rollout.OtherRollouts(b.rollouts, b.rollout, set))
	return rollout.SameButVersion(now, before)
}

// patch applies one change, and records its expectation when it applied.
// The change carries the resourceVersion it was decided on. A conflict means
// the Node was written since; when that write changed nothing the decision
// read (nearly always a kubelet's status report, which moves the
// resourceVersion and its heartbeat only), the change is patched again at
// once over the Node as it is now, instead of deciding the whole rollout
// again after a delay.
func (c *Controller) patch(ctx context.Context, rolloutName, action string, change rollout.Change, basis decisionBasis) (string, error) {
	slots := c.patchSlots(rolloutName)
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		c.unseen.failed(rolloutName, change.Node)
		return resultError, fmt.Errorf("patching Node %s: %w", change.Node, context.Cause(ctx))
	}
	var w write
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		body, err := change.MergePatch()
		if err != nil {
			return err
		}
		w.over = append(w.over, change.ResourceVersion)
		patched, err := c.kube.CoreV1().Nodes().Patch(ctx, change.Node, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		if err == nil {
			w.produced = patched.ResourceVersion
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		latest, getErr := c.kube.CoreV1().Nodes().Get(ctx, change.Node, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		if !basis.unchanged(latest) {
			return fmt.Errorf("patching Node %s: %w", change.Node, errNodeMoved)
		}
		c.metrics.change(rolloutName, action, resultRetried)
		change.ResourceVersion = latest.ResourceVersion
		return err
	})
	switch {
	case err == nil:
		c.unseen.applied(rolloutName, change, w, c.clock.Now())
		return resultOK, nil
	}
	c.unseen.failed(rolloutName, change.Node)
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err), errors.Is(err, errNodeMoved):
		// The Node moved (or went) since the decision: decide again.
		return resultConflict, err
	case isAdmissionRefusal(err) && contract.IsNodeStateRefusal(err):
		return resultSkipped, err
	case isAdmissionRefusal(err):
		return resultRefused, err
	default:
		return resultError, fmt.Errorf("patching Node %s: %w", change.Node, err)
	}
}

// isAdmissionRefusal tells an admission denial of a write (a validating
// webhook's or admission policy's, or the object found invalid) from the
// controller's own lack of rights, which is Forbidden too but must not
// fail a rollout: the apiserver words every admission denial "denied the
// request", and an authorization failure "cannot".
func isAdmissionRefusal(err error) bool {
	if apierrors.IsInvalid(err) {
		return true
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "denied the request") || strings.Contains(msg, "denied request")
}

// forget drops what the controller keeps about a deleted rollout.
func (c *Controller) forget(name string) {
	c.expectations.forget(name)
	c.unseen.forget(name)
	c.slotsMu.Lock()
	delete(c.slots, name)
	c.slotsMu.Unlock()
	c.refusals.forget(name)
	c.metrics.forget(name)
	c.statesMu.Lock()
	delete(c.states, name)
	c.statesMu.Unlock()
}
