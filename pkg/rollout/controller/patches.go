package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// DefaultMaxPatchesInFlight bounds a rollout's assignments and reverts
// sent at once, and apart from them its trial-passed marks. Patches one
// after the other cap a rollout at one Node per round trip to the
// apiserver, which on a large pool is slower than its Nodes finish their
// trials, and a window narrower than maxUnavailable holds every wave of
// trials that end together for round trips: on 5,000 Nodes at 10% a wave
// is 500 Nodes. maxUnavailable already bounds the assignments in flight;
// this bound (ReplicaSet's burst) is for the revert of a failed rollout,
// which moves every Node it moved at once. The apiserver's priority and
// fairness puts the controller's requests in the controller's own
// priority level (a ServiceAccount's, workload-low unless a FlowSchema
// says otherwise), apart from the kubelets' (node-high), all of them one
// flow: it queues what exceeds the flow's seats up to its queues' length
// and answers the rest 429, which client-go sends again after the
// Retry-After. The marks have a window of their own (MarksInFlight): they
// free no slot, and must never hold up the assignment that does.
const DefaultMaxPatchesInFlight = 500

// DefaultEventQPS and DefaultEventBurst pace the controller's Events on a
// client of their own (kubelet's defaults): a wave's Events at once would
// crowd its assignments out of the controller's flow at the apiserver, and
// an Event that waits its turn is not dropped.
const (
	DefaultEventQPS   = 50
	DefaultEventBurst = 100
)

// MarksInFlight bounds a rollout's trial-passed marks in flight (or
// --max-patches-in-flight, when lower). A mark moves no Node and nothing
// waits for it (rolloutState.inFlight); until its mark lands a Node that
// passed stays in its trial (rollout.inTrialOf), so a failure it reports
// meanwhile fails the rollout as it would have a moment earlier. Behind
// waves larger and faster than the window's pace (64 per round trip), the
// marks trail the Nodes passing and catch up as the waves end. More would
// crowd the controller's one flow at the apiserver, whose priority and
// fairness queues the marks and Events of one wave beside the assignments
// of the next, and rejects what its queues cannot hold: assignments move
// the rollout, marks only record it.
const MarksInFlight = 64

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

// patchNodes sends the Node changes of a decision, each recorded as unseen
// first so that the next decision reads it as applied. Reverts are patched
// within the sync: a failed rollout moves no Node forward. Assignments and
// the trial-passed marks after them go out in the background and the sync
// ends without them, so that a Node passing its trial meanwhile frees its
// slot for the next Node at once; their answers wake the rollout.
func (c *Controller) patchNodes(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *rolloutState, d rollout.Decision, seen observed) error {
	st.sending(slices.Concat(d.Revert, d.Assign), d.Record)
	if len(d.Revert) > 0 {
		return c.apply(ctx, r, st, d, seen)
	}
	if len(d.Assign) == 0 && len(d.Record) == 0 {
		return nil
	}
	c.sending.Go(func() {
		if err := c.apply(ctx, r, st, d, seen); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Assigning failed; requeued", "rollout", r.Name)
			c.queue.AddRateLimited(r.Name)
			return
		}
		c.queue.Add(r.Name)
	})
	return nil
}

// apply patches the Nodes of a decision and awaits the answers: reverts
// first, then assignments, then the trial-passed marks, each several in
// flight (patchAll). Every revert is tried; a conflict or a failure
// requeues the rollout, a refusal of an assignment stops the assignments
// and is fed to the next decision, which fails the rollout, unless it
// concerns the Node's own state: that Node is skipped and the others go
// on.
func (c *Controller) apply(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *rolloutState, d rollout.Decision, seen observed) error {
	logger := klog.FromContext(ctx)
	var errs []error
	requeue := false
	send := func(action string) func(context.Context, rollout.Change) (string, error) {
		return func(ctx context.Context, change rollout.Change) (string, error) {
			return c.patch(ctx, r.Name, st, action, change, seen.basis)
		}
	}
	for _, p := range patchAll(ctx, d.Revert, c.maxPatches, c.maxPatches, false, send("revert")) {
		c.metrics.change(r.Name, "revert", p.result)
		switch p.result {
		case resultOK:
			c.event(c.cachedNode(p.change.Node), r, corev1.EventTypeNormal, "Reverted", "Revert",
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
	for _, p := range patchAll(ctx, d.Assign, firstAssignments(d, c.maxPatches), c.maxPatches, true, send("assign")) {
		c.metrics.change(r.Name, "assign", p.result)
		switch p.result {
		case resultOK:
			assigned = append(assigned, p.change.Node)
			c.event(c.cachedNode(p.change.Node), r, corev1.EventTypeNormal, "Assigned", "Assign",
				fmt.Sprintf("rollout %s assigned %s", r.Name, sourceName(p.change.Annotations[contract.ConfigSourceAnnotation])))
			logger.Info("Assigned Node", "node", p.change.Node, "target", target)
		case resultConflict:
			requeue = true
		case resultRefused:
			if target != nil {
				st.refuse(*target, rollout.Refusal{Node: p.change.Node, Message: p.err.Error()})
			}
			c.event(r, c.cachedNode(p.change.Node), corev1.EventTypeWarning, v1alpha1.ReasonAssignmentRefused, "Assign",
				fmt.Sprintf("assigning Node %s was refused: %v", p.change.Node, p.err))
			logger.Info("Assignment refused by admission", "node", p.change.Node, "err", p.err)
			requeue = true
		case resultSkipped:
			// The Node's own state is refused, not the target: the Node is
			// skipped (its Event comes with the decision that shows it).
			if target != nil {
				st.refuse(*target, rollout.Refusal{Node: p.change.Node, Message: p.err.Error(), NodeState: true})
			}
			logger.Info("Assignment refused for the Node's own state; skipping the Node", "node", p.change.Node, "err", p.err)
			requeue = true
		default:
			errs = append(errs, p.err)
		}
	}
	if len(assigned) > 0 {
		st.started(c.clock.Now(), assigned)
	}
	for _, p := range patchAll(ctx, d.Record, c.maxPatches, c.maxPatches, false, send("record")) {
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

// decisionBasis is what a decision was made on, for telling a conflict that
// invalidates it from one that does not.
type decisionBasis struct {
	rollout  string
	selector labels.Selector
	rollouts []*v1alpha1.KubeletConfigRollout
	// observed are the Nodes the decision changes, as it saw them, by name.
	observed map[string]rollout.NodeObservation
}

// decidedOn returns the observations the decision's changes were made on,
// by Node, from the pool as the decision read it.
func decidedOn(pool *rollout.Pool, d rollout.Decision) map[string]rollout.NodeObservation {
	out := make(map[string]rollout.NodeObservation, len(d.Assign)+len(d.Revert)+len(d.Record))
	for _, changes := range [][]rollout.Change{d.Assign, d.Revert, d.Record} {
		for _, change := range changes {
			if obs, ok := pool.Observation(change.Node); ok {
				out[change.Node] = obs
			}
		}
	}
	return out
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
// The change is guarded by what the decision read of its Node (patchFor):
// a write since that moved any of it fails the patch. When the Node as it
// is now still shows everything the decision read (a write that moved
// something else, or a Node whose guard is its resourceVersion and met a
// kubelet's status report), the change is sent again at once over the Node
// as it is now, instead of deciding the whole rollout again after a delay.
func (c *Controller) patch(ctx context.Context, rolloutName string, st *rolloutState, action string, change rollout.Change, basis decisionBasis) (string, error) {
	slots := st.slots
	if action == "record" {
		slots = st.recordSlots
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		st.failed(change.Node)
		return resultError, fmt.Errorf("patching Node %s: %w", change.Node, context.Cause(ctx))
	}
	if action == "assign" {
		if waited, ok := st.reactions.assigning(c.clock.Now()); ok {
			c.metrics.reaction(rolloutName, waited)
		}
	}
	var w write
	base, err := c.guardBase(change, basis)
	if err == nil {
		err = retry.OnError(retry.DefaultRetry, nodeMoved, func() error {
			p, err := patchFor(change, base)
			if err != nil {
				return err
			}
			w.over = append(w.over, p.over)
			patched, err := c.kube.CoreV1().Nodes().Patch(ctx, change.Node, p.typ, p.body, metav1.PatchOptions{FieldManager: FieldManager})
			if err == nil {
				w.produced = patched.ResourceVersion
				return nil
			}
			if !nodeMoved(err) {
				return err
			}
			latest, getErr := c.latestNode(ctx, change.Node, p.over)
			if getErr != nil {
				return getErr
			}
			if !basis.unchanged(latest) {
				return fmt.Errorf("patching Node %s: %w", change.Node, errNodeMoved)
			}
			c.metrics.change(rolloutName, action, resultRetried)
			change.ResourceVersion, base = latest.ResourceVersion, latest
			if p.typ == types.JSONPatchType && latest.ResourceVersion == p.over {
				// The guard failed on the very Node it was made from:
				// it does not match how the apiserver renders this Node
				// (a field this build does not know), and never will.
				base = nil
			}
			return err
		})
	}
	switch {
	case err == nil:
		st.applied(change, w, c.clock.Now())
		return resultOK, nil
	}
	st.failed(change.Node)
	switch {
	case nodeMoved(err), apierrors.IsNotFound(err), errors.Is(err, errNodeMoved):
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

// latestNode returns the Node as it is after a patch over version
// conflicted: the cache's, when it already holds a later version (the write
// that moved the Node is nearly always a kubelet's status report, which the
// watch delivers within the patch's round trip), else the apiserver's.
// Reading the cache spares the reaction a round trip; a version the cache
// holds that is not the latest only conflicts once more, and the next try
// reads the apiserver.
func (c *Controller) latestNode(ctx context.Context, name, version string) (*corev1.Node, error) {
	if cached := c.cachedNode(name); cached != nil {
		if newer, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, version); err == nil && newer > 0 {
			return cached, nil
		}
	}
	return c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
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

// patched is the outcome of one change sent by patchAll.
type patched struct {
	change rollout.Change
	result string
	err    error
}

// patchAll sends changes through a sliding window: a change is sent once
// every change a window or more ahead of it is answered, so a patch
// answered late holds its own slot, not a whole group behind it, and
// nothing goes out further than a window past the oldest change not yet
// answered. The window starts at first and grows by one for each change
// that applied, up to limit: started at one, it doubles every
// round trip, as ReplicaSet's slowStartBatch does every batch. When
// stopOnRefusal is set nothing is sent once a refusal is answered, so at
// most a window of changes follows a refused one; what is in flight then
// is awaited. The outcomes are in the order of changes; changes never sent
// are left out.
func patchAll(ctx context.Context, changes []rollout.Change, first, limit int, stopOnRefusal bool, send func(context.Context, rollout.Change) (string, error)) []patched {
	results := make([]patched, len(changes))
	done := make([]bool, len(changes))
	answered := make(chan int)
	window := min(max(first, 1), limit)
	// oldest is the first change not yet answered.
	next, oldest, inFlight, stopped := 0, 0, 0, false
	for {
		for ; !stopped && next < oldest+window && next < len(changes); next++ {
			inFlight++
			go func(i int) {
				result, err := send(ctx, changes[i])
				results[i] = patched{change: changes[i], result: result, err: err}
				answered <- i
			}(next)
		}
		if inFlight == 0 {
			return results[:next]
		}
		i := <-answered
		inFlight--
		for done[i] = true; oldest < next && done[oldest]; oldest++ {
		}
		switch results[i].result {
		case resultOK:
			window = min(window+1, limit)
		case resultRefused:
			stopped = stopped || stopOnRefusal
		}
	}
}

// firstAssignments is patchAll's first window for the assignments of d.
// Until admission has let the target onto a selected Node (the decision
// counts one updated, in trial or failed on it), one: a target it refuses
// everywhere (an ineligible ConfigMap, say) is then refused on one Node,
// not on several. Afterwards as many as may be in flight: a refusal
// now is one Node's (its kubelet's version or feature gates), and what is
// assigned beside it is within maxUnavailable, reverted with the rest
// when the rollout fails.
func firstAssignments(d rollout.Decision, limit int) int {
	if d.Status.Updated+d.Status.InTrial+d.Status.Failed > 0 {
		return limit
	}
	return 1
}
