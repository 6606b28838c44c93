package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// sync makes and carries out one decision for the rollout name: observe
// (the rollout once the cache shows the controller's last status write, the
// selected Nodes as the controller's patches leave them, the refusals not
// yet in the status), rollout.Decide, then carry it out (the status, the
// Node patches, the Events).
func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("rollout", name)
	ctx = klog.NewContext(ctx, logger)
	r, err := c.rolloutLister.Get(name)
	if apierrors.IsNotFound(err) {
		// Deleting a rollout leaves every assignment as it is.
		c.forget(name)
		logger.V(2).Info("Rollout is gone; leaving its Nodes as they are")
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout %s: reading the cache: %w", name, err)
	}
	st := c.state(name)
	now := c.clock.Now()

	// Observe. Until the cache shows the controller's last status write,
	// the rollout is read as that write left it (statusState.newest).
	r = st.newest(r, now)
	selector, err := rollout.Selector(r)
	if err != nil {
		// The CRD refuses such a spec; nothing to retry until it changes.
		c.event(r, nil, corev1.EventTypeWarning, "InvalidSelector", "Sync", err.Error())
		logger.Error(err, "Rollout selects no Node")
		return nil
	}
	seen, err := c.observe(ctx, r, selector, st, now)
	if err != nil {
		return err
	}

	// Decide.
	decision, err := st.pool.Decide(seen.input)
	if err != nil {
		c.event(r, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", err.Error())
		logger.Error(err, "Rollout cannot be decided")
		return nil
	}

	// Carry out.
	c.verdicts(r, st, decision, now)
	progressing := meta.FindStatusCondition(decision.Status.Conditions, v1alpha1.ConditionProgressing)
	c.metrics.progressing(name, progressing != nil && progressing.Reason == v1alpha1.ReasonProgressDeadlineExceeded)
	c.metrics.failure(name, meta.IsStatusConditionTrue(decision.Status.Conditions, v1alpha1.ConditionFailed))
	if decision.RecheckAfter > 0 {
		// Nothing may change before the progress deadline falls due.
		c.queue.AddAfter(name, decision.RecheckAfter)
	}
	// The status goes first when the decision reverts or changes the
	// rollout's state (rollout.Decision.ChangesState): a revert must not
	// run ahead of the Failed condition that explains it, and the write,
	// made over the rollout's resourceVersion, fails once the rollout was
	// paused, edited or deleted since, before any Node is patched on the
	// old spec. Otherwise the status only counts what moved: it is written
	// in the background (writeStatusLater), at most once a statusInterval,
	// and the decision waits on no round trip of its own.
	pending := !equality.Semantic.DeepEqual(r.Status, decision.Status)
	statusFirst := pending && decision.ChangesState(r.Status)
	if (statusFirst || len(decision.Revert) > 0) && st.inFlight() {
		// A change of state or a revert waits for the assignments in
		// flight: the status that fences it must follow their outcome, and
		// a revert must cover them. Their answers wake the rollout.
		logger.V(4).Info("Waiting for the assignments in flight before changing the rollout's state")
		c.metrics.sync("waiting")
		return nil
	}
	if statusFirst {
		if err := c.writeStatusNow(ctx, r, st, &decision.Status); err != nil {
			return err
		}
	}
	if failed := meta.FindStatusCondition(decision.Status.Conditions, v1alpha1.ConditionFailed); failed != nil &&
		failed.Status == metav1.ConditionTrue && decision.Status.Target != nil {
		// The failure is in the status now (ChangesState holds for a failed
		// rollout); the refusals behind it need not be fed back again.
		st.recorded(*decision.Status.Target)
	}
	seen.basis.observed = decidedOn(st.pool, decision)
	if err := c.patchNodes(ctx, r, st, decision, seen); err != nil {
		return err
	}
	if pending && !statusFirst {
		c.writeStatusLater(ctx, r, st, decision.Status)
	}
	c.metrics.sync("ok")
	return nil
}

// observed is what a decision is made on.
type observed struct {
	input rollout.Input
	// basis tells a Node patch's conflict that invalidates the decision
	// from one that does not.
	basis decisionBasis
}

// observe brings the rollout's pool (rolloutState.pool) up to date and
// reads what else rollout.Pool.Decide needs: the target, and the refusals
// of the target not yet in the status. Only the Nodes touched since the
// last decision are read again, each as the cache shows it with the
// change the controller sent and the cache does not show yet applied
// (rolloutState.overlay), so that a decision never waits for a patch's
// round trip and no Node is picked twice. The pool is read afresh from
// every cached Node when the rollout's selector or another rollout's
// changed, since which Nodes it selects, and which it shares, may have.
func (c *Controller) observe(ctx context.Context, r *v1alpha1.KubeletConfigRollout, selector labels.Selector, st *rolloutState, now time.Time) (observed, error) {
	rollouts := c.rolloutsCached()
	read, err := c.refreshPool(r.Name, selector, rollouts, st, now)
	if err != nil {
		// Usable all the same; the agents report the same problems.
		klog.FromContext(ctx).V(2).Info("Nodes partly unreadable", "err", err)
	}
	target, ineligible := c.target(ctx, r.Spec.ConfigMapRef)
	return observed{
		input: rollout.Input{
			Rollout:            r,
			Target:             target,
			TargetIneligible:   ineligible,
			Refusals:           st.refusalsOf(target),
			Now:                metav1.NewTime(now),
			DefaultTrialPeriod: c.trialPeriod,
			Unfit:              c.unfit(ctx, st, target, read),
		},
		basis: decisionBasis{rollout: r.Name, selector: selector, rollouts: rollouts},
	}, nil
}

// refreshPool reads the Nodes touched since the last decision into the
// rollout's pool, every cached Node when the selectors it is read with
// changed (poolBasis), and returns what it read.
func (c *Controller) refreshPool(name string, selector labels.Selector, rollouts []*v1alpha1.KubeletConfigRollout, st *rolloutState, now time.Time) (poolRead, error) {
	others := otherSelectors(rollouts, name)
	changed := st.takeTouched(now)
	if basis := poolBasis(selector, others); st.pool == nil || st.poolBasis != basis {
		if st.pool == nil {
			st.pool = rollout.NewPool(name)
		}
		st.poolBasis = basis
		changed.Insert(st.pool.Names()...)
		changed.Insert(c.nodes.ListKeys()...)
	}
	read := poolRead{changed: sets.New[string](), nodes: map[string]*corev1.Node{}}
	var errs []error
	for name := range changed {
		node := c.cachedNode(name)
		if node == nil || !selector.Matches(labels.Set(node.Labels)) {
			st.pool.Delete(name)
			read.changed.Insert(name)
			continue
		}
		node = st.overlay(node, now)
		obs, err := c.observed.of(node)
		if err != nil {
			errs = append(errs, err)
		}
		obs.OtherRollouts = others.matching(labels.Set(node.Labels))
		if st.pool.Set(obs) {
			read.changed.Insert(name)
		}
		read.nodes[name] = node
	}
	return read, errors.Join(errs...)
}

// poolRead is what refreshPool read: the selected Nodes it read, by name,
// and of those and the Nodes that left, the ones whose reading changed
// (not only their resourceVersion).
type poolRead struct {
	nodes   map[string]*corev1.Node
	changed sets.Set[string]
}

// cachedNode returns the Node the cache holds by name, nil when none.
func (c *Controller) cachedNode(name string) *corev1.Node {
	obj, exists, err := c.nodes.GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	node, _ := obj.(*corev1.Node)
	return node
}

// target is the eligible ConfigMap ref names, nil when there is none
// (rollout.TargetOf). The informer holds only eligible ConfigMaps; one it
// does not hold is read once more, its metadata alone, to tell a
// ConfigMap that lacks the label (ineligible) from a missing one. A failed
// read reports it missing, the safe answer: nothing is assigned.
func (c *Controller) target(ctx context.Context, ref contract.ConfigMapRef) (target *contract.ConfigMapVersion, ineligible bool) {
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
