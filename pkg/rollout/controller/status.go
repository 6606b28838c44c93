package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// How the controller writes a rollout's status. A status that changes the
// rollout's state (rollout.Decision.ChangesState) is written by the sync
// that decided it, before any Node moves on it. A status that only counts
// what moved is written in the background, at most once a statusInterval,
// the last decided folding those decided since: on a pool of thousands,
// one write per Node moved would cost the apiserver as much as the
// assignments, and a sync that waited on it would hold every reaction
// behind a round trip. Both kinds go through one lock, so that a routine
// status never lands after a change of state decided later.
//
// Until the rollout cache shows the last status write, a decision reads
// the rollout as that write left it (the apiserver's answer): the status
// it reads (the target, a failure, the skipped Nodes) is then never older
// than what the controller wrote, and it waits on no watch delivery.

// DefaultStatusInterval is how often at most a rollout's status is written
// while only its counts change.
const DefaultStatusInterval = time.Second

// errSpecChanged ends a status write whose decision was made on a spec
// that has changed since: the rollout is decided again instead.
var errSpecChanged = errors.New("the rollout's spec changed since the decision")

// statusState is what a rolloutState keeps of its status writes. writing
// serialises the writes; the other fields are guarded by the
// rolloutState's mu.
type statusState struct {
	writing sync.Mutex

	// written is the rollout as the last status write left it, made at
	// writtenAt by w, until the cache shows it; nil when none.
	written   *v1alpha1.KubeletConfigRollout
	w         write
	writtenAt time.Time

	// routine is the last routine status decided and not yet written, on
	// a rollout of generation routineGen; nil when none. writer is true
	// while a background writer runs, and lastRoutine is when it last
	// wrote.
	routine     *v1alpha1.KubeletConfigRolloutStatus
	routineGen  int64
	writer      bool
	lastRoutine time.Time
}

// newest returns the rollout as the controller's last status write left
// it while the cache, holding cached, does not show that write, cached
// otherwise; past the timeout the cache is trusted again.
func (st *rolloutState) newest(cached *v1alpha1.KubeletConfigRollout, now time.Time) *v1alpha1.KubeletConfigRollout {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.status
	if s.written == nil {
		return cached
	}
	if s.w.shownBy(cached.ResourceVersion) || now.Sub(s.writtenAt) >= st.timeout {
		s.written = nil
		return cached
	}
	return s.written
}

// wrote records a successful status write, made at now, and the rollout
// it left.
func (st *rolloutState) wrote(updated *v1alpha1.KubeletConfigRollout, w write, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.status.written, st.status.w, st.status.writtenAt = updated, w, now
}

// writeStatusNow writes a status that changes the rollout's state, over the
// rollout r it was decided on; a routine status not yet written is older,
// and dropped.
func (c *Controller) writeStatusNow(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *rolloutState, status *v1alpha1.KubeletConfigRolloutStatus) error {
	st.status.writing.Lock()
	defer st.status.writing.Unlock()
	st.mu.Lock()
	st.status.routine = nil
	st.mu.Unlock()
	return c.writeStatus(ctx, r, st, status)
}

// writeStatusLater hands a routine status to the rollout's background
// writer, starting it when none runs.
func (c *Controller) writeStatusLater(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *rolloutState, status v1alpha1.KubeletConfigRolloutStatus) {
	st.mu.Lock()
	s := &st.status
	s.routine, s.routineGen = &status, r.Generation
	start := !s.writer
	s.writer = true
	st.mu.Unlock()
	if start {
		c.sending.Go(func() { c.writeRoutine(ctx, r.Name, st) })
	}
}

// writeRoutine is a rollout's background status writer: it writes the last
// routine status, once the interval since its last write has passed, until
// none is left.
func (c *Controller) writeRoutine(ctx context.Context, name string, st *rolloutState) {
	for {
		st.mu.Lock()
		wait := st.status.lastRoutine.Add(c.statusInterval).Sub(c.clock.Now())
		st.mu.Unlock()
		if wait > 0 {
			select {
			case <-c.clock.After(wait):
			case <-ctx.Done():
				st.mu.Lock()
				st.status.writer = false
				st.mu.Unlock()
				return
			}
		}
		st.status.writing.Lock()
		st.mu.Lock()
		status, generation := st.status.routine, st.status.routineGen
		st.status.routine = nil
		if status == nil {
			st.status.writer = false
			st.mu.Unlock()
			st.status.writing.Unlock()
			return
		}
		st.status.lastRoutine = c.clock.Now()
		st.mu.Unlock()
		err := c.writeRoutineStatus(ctx, name, st, status, generation)
		st.status.writing.Unlock()
		if err != nil {
			// The next decision decides the status again.
			utilruntime.HandleErrorWithContext(ctx, err, "Writing the rollout's status failed; requeued", "rollout", name)
			c.queue.AddRateLimited(name)
		}
	}
}

// writeRoutineStatus writes a routine status decided on generation over the
// newest rollout, unless the spec changed since (the decision that change
// brings writes its own) or the rollout is gone.
func (c *Controller) writeRoutineStatus(ctx context.Context, name string, st *rolloutState, status *v1alpha1.KubeletConfigRolloutStatus, generation int64) error {
	cached, err := c.rolloutLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout %s: reading the cache: %w", name, err)
	}
	r := st.newest(cached, c.clock.Now())
	if r.Generation != generation || equality.Semantic.DeepEqual(r.Status, *status) {
		return nil
	}
	if err := c.writeStatus(ctx, r, st, status); err != nil && !errors.Is(err, errSpecChanged) && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// writeStatus writes status over the rollout r, retrying conflicts on the
// latest rollout as long as its spec is r's, and records what follows: the
// rollout the write left, and the Events of a change of state. The caller
// holds st.status.writing.
func (c *Controller) writeStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, st *rolloutState, status *v1alpha1.KubeletConfigRolloutStatus) error {
	current := r.DeepCopy()
	var w write
	var updated *v1alpha1.KubeletConfigRollout
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current.Status = *status
		w.over = append(w.over, current.ResourceVersion)
		var err error
		updated, err = c.rollouts.UpdateStatus(ctx, current, metav1.UpdateOptions{FieldManager: FieldManager})
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
		klog.FromContext(ctx).V(2).Info("Status not written", "rollout", r.Name, "reason", err)
		return fmt.Errorf("rollout %s: status: %w", r.Name, err)
	case err != nil:
		return fmt.Errorf("rollout %s: writing the status: %w", r.Name, err)
	}
	st.wrote(updated, w, c.clock.Now())
	c.stateEvents(r, st, status)
	return nil
}
