package controller

import (
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// rolloutState is everything the controller keeps in memory about one
// rollout between its syncs. None of it is needed after a restart: the
// writes it waits for are then in the caches, the refusals are made again
// by the next assignment, and the Events and metrics start over.
//
// mu guards every field but timeout, slots and recordSlots, which never
// change, and
// pool, poolBasis and fits, which only the rollout's sync touches.
type rolloutState struct {
	// timeout bounds the wait for the caches to show the controller's own
	// writes, the status write and the Node patches alike, so that an
	// event that never comes cannot stall the rollout.
	timeout time.Duration
	// slots is a semaphore of Config.MaxPatchesInFlight: the assignments of one
	// sync go out while an earlier sync's are still in flight, and
	// together they stay within the bound.
	slots chan struct{}
	// recordSlots is the trial-passed marks' own semaphore
	// (MarksInFlight), so that a mark never holds up an assignment.
	recordSlots chan struct{}

	mu sync.Mutex
	// status is the controller's status writes (status.go).
	status statusState
	// unseen are the Node changes sent whose effect the Node cache does not
	// show yet, by Node: in flight, or answered and not yet delivered by
	// the watch. The next decision reads each such Node as the change
	// leaves it (overlay), so that it neither waits for the change's round
	// trip nor moves the Node again, and counts a Node being assigned as
	// unavailable from the moment the patch is sent.
	unseen map[string]*unseenChange
	// answers are unseen's answered changes by when they were answered,
	// for takeTouched's timeout.
	answers answers
	// refusals are the admission refusals of assignments of refusedTarget
	// not yet recorded in the status, fed to the next decision. A refusal
	// is about one version of one ConfigMap and must not fail the next.
	refusedTarget contract.ConfigMapVersion
	refusals      []rollout.Refusal
	// reason is the Progressing reason of the last status written, and
	// nodes the selected Nodes' states at the last decision, for Events and
	// metrics on changes only.
	reason string
	nodes  map[string]rollout.NodeState
	counts map[rollout.NodeState]int
	// batchOf are the assignments not yet through their trials, by Node,
	// and through those through since the last decision, for the batch
	// duration metric.
	batchOf map[string]*batch
	through []finishedBatch

	// pool is the selected Nodes as the last decision read them, with
	// their verdicts (rollout.Pool), read from the Nodes of poolBasis: the
	// rollout's selector and the other rollouts'. touched are the Nodes
	// changed since, whose reading the next decision brings up to date:
	// the Nodes' own events and the changes the controller sent mark them.
	// Only the sync touches pool and poolBasis.
	pool      *rollout.Pool
	poolBasis string
	touched   sets.Set[string]
	// handedOver is when the Node informer first handed over a change of
	// each Node touched since the last decision (a change the controller
	// sent touches its Node too, without a time); handedOverRead is the
	// same for the Nodes the decision in progress reads, which only the
	// sync touches. They time the reactions (reactions.go).
	handedOver, handedOverRead map[string]time.Time
	// fits is the report of unfit Nodes (fit.go), kept the same way.
	fits fits
	// reactions times the controller's answers to passed trials
	// (reactions.go).
	reactions *reactions
}

func newRolloutState(timeout time.Duration, maxPatches int) *rolloutState {
	return &rolloutState{
		timeout:     timeout,
		slots:       make(chan struct{}, maxPatches),
		recordSlots: make(chan struct{}, min(maxPatches, MarksInFlight)),
		unseen:      map[string]*unseenChange{},
		touched:     sets.New[string](),
		handedOver:  map[string]time.Time{},
		nodes:       map[string]rollout.NodeState{},
		counts:      map[rollout.NodeState]int{},
		batchOf:     map[string]*batch{},
		fits:        newFits(),
		reactions:   &reactions{},
	}
}

// touch marks a Node whose reading the next decision must bring up to
// date, on an event the Node informer handed over at now.
func (st *rolloutState) touch(name string, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.touched.Insert(name)
	if _, ok := st.handedOver[name]; !ok {
		st.handedOver[name] = now
	}
}

// takeTouched returns the Nodes touched since it was last called, and
// forgets them; with them, the Nodes whose unseen change timed out, which
// it drops (read again, they are as the cache shows them). A change sent,
// answered or failed touches its Node, and so does the event of the cache
// showing it.
func (st *rolloutState) takeTouched(now time.Time) sets.Set[string] {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.touched
	st.touched = sets.New[string]()
	st.handedOverRead, st.handedOver = st.handedOver, map[string]time.Time{}
	for _, due := range st.answers.due(now.Add(-st.timeout)) {
		if st.unseen[due.node] == due.change {
			delete(st.unseen, due.node)
			out.Insert(due.node)
		}
	}
	return out
}

// state returns the rollout's state, made on first use.
func (c *Controller) state(name string) *rolloutState {
	c.statesMu.Lock()
	defer c.statesMu.Unlock()
	st, ok := c.states[name]
	if !ok {
		st = newRolloutState(c.expectationsTimeout, c.maxPatches)
		c.states[name] = st
	}
	return st
}

// forget drops what the controller keeps about a deleted rollout. Patches
// still in flight report to the state they started with, which nothing
// reads any more.
func (c *Controller) forget(name string) {
	c.statesMu.Lock()
	delete(c.states, name)
	c.statesMu.Unlock()
	c.metrics.forget(name)
}

// write is one successful write of an object.
type write struct {
	// produced is the resourceVersion the write returned.
	produced string
	// over are the resourceVersions it was made over: the decision's, then
	// any read again after a conflict, all older than produced.
	over []string
}

// shownBy reports whether a cache holding version cached shows the write:
// at the version the write produced or a later one. resourceVersions are
// comparable integers since Kubernetes 1.35 (KEP-5504), which is what makes
// "later" sound even when another writer came between. A server whose
// resourceVersions do not compare falls back on equality: the write is
// shown once the cache carries none of the versions it was made over.
func (w write) shownBy(cached string) bool {
	if c, err := resourceversion.CompareResourceVersion(cached, w.produced); err == nil {
		return c >= 0
	}
	return !slices.Contains(w.over, cached)
}

// unseenChange is a Node change sent and not yet shown by the cache.
type unseenChange struct {
	change rollout.Change
	// mark is a trial-passed mark, which moves no Node: nothing waits
	// for it (inFlight).
	mark bool
	// answered is when the apiserver answered; zero while in flight.
	answered time.Time
	w        write
}

// sending records changes about to be sent: moves (assignments and
// reverts) and trial-passed marks.
func (st *rolloutState) sending(moves, marks []rollout.Change) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range moves {
		st.unseen[c.Node] = &unseenChange{change: c}
		st.touched.Insert(c.Node)
	}
	for _, c := range marks {
		st.unseen[c.Node] = &unseenChange{change: c, mark: true}
		st.touched.Insert(c.Node)
	}
}

// applied records the answer to a change sent: w is the write, change as
// it was last sent (its resourceVersion the one it applied over). It is
// known by the resourceVersion it produced and dropped once the cache
// shows that version or a later one, or after the timeout.
func (st *rolloutState) applied(change rollout.Change, w write, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	answer := &unseenChange{change: change, answered: now, w: w}
	st.unseen[change.Node] = answer
	st.answers.add(change.Node, answer)
	st.touched.Insert(change.Node)
}

// failed drops a change that did not apply: the Node is as the cache shows
// it.
func (st *rolloutState) failed(node string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.unseen, node)
	st.touched.Insert(node)
}

// inFlight reports whether any assignment or revert awaits its answer. A
// trial-passed mark does not count: it moves no Node, so neither a status
// nor a revert has an outcome of it to follow, and a change of state
// never waits out a wave's marks.
func (st *rolloutState) inFlight() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.unseen {
		if c.answered.IsZero() && !c.mark {
			return true
		}
	}
	return false
}

// overlay returns the cached node with its unseen change applied, to a
// copy (the cache's objects are never modified); node itself when it has
// none. An answered change also gives the copy the resourceVersion it
// produced, which the next change of that Node is made over. A change the
// cache shows, or answered longer than the timeout ago, is dropped.
func (st *rolloutState) overlay(node *corev1.Node, now time.Time) *corev1.Node {
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.unseen[node.Name]
	if !ok {
		return node
	}
	if !c.answered.IsZero() && (c.w.shownBy(node.ResourceVersion) || now.Sub(c.answered) >= st.timeout) {
		delete(st.unseen, node.Name)
		return node
	}
	// Only the annotations and the resourceVersion differ from the cache's
	// object: the copy shares the rest, which no reader modifies.
	copied := *node
	changed := &copied
	changed.Annotations = maps.Clone(node.Annotations)
	if changed.Annotations == nil {
		changed.Annotations = map[string]string{}
	}
	for key, value := range c.change.Annotations {
		if value == nil {
			delete(changed.Annotations, key)
		} else {
			changed.Annotations[key] = *value
		}
	}
	if !c.answered.IsZero() {
		changed.ResourceVersion = c.w.produced
	}
	return changed
}

// refuse keeps a refusal of an assignment of target; refusals of an
// earlier target go.
func (st *rolloutState) refuse(target contract.ConfigMapVersion, refusal rollout.Refusal) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.refusedTarget != target {
		st.refusedTarget, st.refusals = target, nil
	}
	if !slices.ContainsFunc(st.refusals, func(r rollout.Refusal) bool { return r.Node == refusal.Node }) {
		st.refusals = append(st.refusals, refusal)
	}
}

// refusalsOf returns the refusals of assignments of target, the current
// one; nil target (no ConfigMap) has none.
func (st *rolloutState) refusalsOf(target *contract.ConfigMapVersion) []rollout.Refusal {
	st.mu.Lock()
	defer st.mu.Unlock()
	if target == nil || st.refusedTarget != *target {
		return nil
	}
	return slices.Clone(st.refusals)
}

// recorded drops the refusals of target once a status naming the failure
// of target is written.
func (st *rolloutState) recorded(target contract.ConfigMapVersion) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.refusedTarget == target {
		st.refusedTarget, st.refusals = contract.ConfigMapVersion{}, nil
	}
}

// decided records the Nodes' states a decision changed and the Nodes that
// left the selection, and returns what the metrics record of it: the
// states those Nodes were in at the decision before, how many Nodes are in
// each state now, and the batches through their trials now, which it
// drops. Its work is that of the Nodes changed, not of the pool.
func (st *rolloutState) decided(changed []rollout.NodeResult, left []string) verdictChanges {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := verdictChanges{previous: make(map[string]rollout.NodeState, len(changed)+len(left))}
	move := func(name string, now rollout.NodeState) {
		was, ok := st.nodes[name]
		if ok {
			out.previous[name] = was
			st.counts[was]--
		}
		if now == "" {
			delete(st.nodes, name)
		} else {
			st.nodes[name] = now
			st.counts[now]++
		}
		b := st.batchOf[name]
		if b == nil {
			return
		}
		switch {
		case inBatch(was) && !inBatch(now):
			b.open--
		case !inBatch(was) && inBatch(now):
			b.open++
		}
		if b.open == 0 {
			st.finish(b)
		}
	}
	for _, res := range changed {
		move(res.Name, res.State)
	}
	for _, name := range left {
		move(name, "")
	}
	out.counts = maps.Clone(st.counts)
	out.through, st.through = st.through, nil
	return out
}

// verdictChanges are what decided returns.
type verdictChanges struct {
	previous map[string]rollout.NodeState
	counts   map[rollout.NodeState]int
	through  []finishedBatch
}

// inBatch reports whether a Node in state s keeps its batch open: it is
// in trial, or not yet seen assigned.
func inBatch(s rollout.NodeState) bool {
	return s == rollout.StateInTrial || s == rollout.StatePending
}

// started records a batch of assignments. A Node assigned again leaves the
// batch it was in, which it no longer keeps open.
func (st *rolloutState) started(start time.Time, nodes []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := &batch{start: start, nodes: nodes}
	for _, name := range nodes {
		if old := st.batchOf[name]; old != nil && inBatch(st.nodes[name]) {
			if old.open--; old.open == 0 {
				st.finish(old)
			}
		}
		st.batchOf[name] = b
		if inBatch(st.nodes[name]) {
			b.open++
		}
	}
	if b.open == 0 {
		st.finish(b)
	}
}

// finish moves a batch none of whose Nodes is in trial any more to those
// the next decision reports, with how it ended.
func (st *rolloutState) finish(b *batch) {
	result := "updated"
	for _, name := range b.nodes {
		if st.batchOf[name] == b {
			delete(st.batchOf, name)
		}
		switch st.nodes[name] {
		case rollout.StateUpdated:
		case rollout.StateFailed, rollout.StateReverting:
			result = "failed"
		default:
			if result == "updated" {
				result = "other"
			}
		}
	}
	st.through = append(st.through, finishedBatch{start: b.start, result: result})
}

// progressed records the Progressing reason of a status written, and
// reports whether it differs from the last one recorded.
func (st *rolloutState) progressed(reason string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	changed := st.reason != reason
	st.reason = reason
	return changed
}
