package rollout

import (
	"maps"
	"slices"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Pool is the Nodes one rollout selects, each judged again only when it
// changes, with what a decision reads of them kept as they change: the
// counts, the Nodes of each state in name order (the next candidates are
// the first Pending ones), the Nodes that wait for their trial period to
// end. A Node's change then costs a decision the work of that Node, not of
// the pool, which is what keeps a rollout of thousands of Nodes linear.
//
// Pool.Decide makes the decision Decide makes over the same Nodes; Decide is
// a Pool filled from Input.Nodes. A Pool is not safe for concurrent use: the
// controller holds one per rollout and syncs a rollout on one worker at a
// time.
type Pool struct {
	rollout string
	members map[string]*member
	all     *btree.BTreeG[string]
	// movedTo are the Nodes this rollout moved and no other rollout
	// selects, by their config-source: a function of the Node alone.
	movedTo map[string]sets.Set[string]

	// What the verdicts were made against; judged is false before the
	// first judgement, and every Node is judged again when the target
	// changes or the clock goes back.
	judged   bool
	target   contract.ConfigMapVersion
	skipped  map[string]string
	judgedAt time.Time
	// dirty are the Nodes set since they were last judged.
	dirty sets.Set[string]

	// Kept from the verdicts, by judge's rules.
	counts  counts
	byState map[NodeState]*btree.BTreeG[string]
	// waiting are the unavailable Nodes the rollout waits on (neither
	// Conflicted nor Degraded), toRecord the Updated Nodes it moved whose
	// trial-passed mark is not the target's yet, early the Nodes that
	// report the target passed before their trial period ends, by its end.
	waiting, toRecord *btree.BTreeG[string]
	early             *btree.BTreeG[due]

	// reported are the verdicts as the last decision returned them, and
	// left the Nodes that left the pool since; unjudged are Nodes set or
	// judged since that decision, whose verdicts may have changed.
	reported map[string]NodeResult
	left     sets.Set[string]
	changed  sets.Set[string]
	// overridden is true when the last decision changed verdicts of Nodes
	// it did not judge (a failed rollout's Reverting and Untouched): the
	// next decision compares every verdict.
	overridden bool
}

type member struct {
	obs NodeObservation
	// verdict is valid when judged is true; recorded and early say
	// whether it was counted in toRecord and early, and early under which
	// end: the observation may have been set anew since.
	verdict  judged
	judged   bool
	recorded bool
	early    *due
}

// due is a Node that reports the target passed before its trial ends.
type due struct {
	ends time.Time
	name string
}

func lessDue(a, b due) bool {
	if c := a.ends.Compare(b.ends); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

// btreeDegree is the B-trees' degree; any small number serves.
const btreeDegree = 16

func newNames() *btree.BTreeG[string] { return btree.NewOrderedG[string](btreeDegree) }

// NewPool returns an empty pool for the rollout named rollout.
func NewPool(rollout string) *Pool {
	p := &Pool{
		rollout:  rollout,
		members:  map[string]*member{},
		all:      newNames(),
		movedTo:  map[string]sets.Set[string]{},
		dirty:    sets.New[string](),
		byState:  map[NodeState]*btree.BTreeG[string]{},
		waiting:  newNames(),
		toRecord: newNames(),
		early:    btree.NewG(btreeDegree, lessDue),
		reported: map[string]NodeResult{},
		left:     sets.New[string](),
		changed:  sets.New[string](),
	}
	for _, s := range allStates {
		p.byState[s] = newNames()
	}
	return p
}

// allStates are the states judge gives a Node (Decide adds Reverting and
// Untouched to a failed rollout's verdicts without keeping them).
var allStates = []NodeState{StateUpdated, StateInTrial, StateFailed, StatePending, StateUnavailable, StateConflicted, StateDegraded, StateSkipped}

// Len is the number of Nodes in the pool.
func (p *Pool) Len() int { return len(p.members) }

// Observation returns the Node's observation as last set.
func (p *Pool) Observation(name string) (NodeObservation, bool) {
	m, ok := p.members[name]
	if !ok {
		return NodeObservation{}, false
	}
	return m.obs, true
}

// Set adds the Node or replaces it, and reports whether that changed
// anything a decision reads; a Node so changed is judged again at the next
// decision. A Node set again the same but for its resourceVersion (a
// kubelet's heartbeat) only takes the new resourceVersion, which the next
// Change of it carries.
func (p *Pool) Set(obs NodeObservation) bool {
	m, ok := p.members[obs.Name]
	if ok && m.judged && SameButVersion(m.obs, obs) {
		m.obs.ResourceVersion = obs.ResourceVersion
		return false
	}
	if !ok {
		m = &member{}
		p.members[obs.Name] = m
		p.all.ReplaceOrInsert(obs.Name)
		p.left.Delete(obs.Name)
	} else {
		p.unindexMoved(m)
	}
	m.obs = obs
	m.obs.OtherRollouts = slices.Clone(obs.OtherRollouts)
	p.indexMoved(m)
	p.dirty.Insert(obs.Name)
	return true
}

// Delete removes the Node, when it is in the pool.
func (p *Pool) Delete(name string) {
	m, ok := p.members[name]
	if !ok {
		return
	}
	if m.judged {
		p.withdraw(m)
	}
	p.unindexMoved(m)
	delete(p.members, name)
	p.all.Delete(name)
	p.dirty.Delete(name)
	p.changed.Delete(name)
	if _, ok := p.reported[name]; ok {
		p.left.Insert(name)
	}
}

// Names returns the names of the Nodes in the pool, sorted.
func (p *Pool) Names() []string {
	out := make([]string, 0, p.all.Len())
	p.all.Ascend(func(name string) bool {
		out = append(out, name)
		return true
	})
	return out
}

func (p *Pool) indexMoved(m *member) {
	if m.obs.Rollout != p.rollout || m.obs.ConfigSource == nil || len(m.obs.OtherRollouts) > 0 {
		return
	}
	set, ok := p.movedTo[*m.obs.ConfigSource]
	if !ok {
		set = sets.New[string]()
		p.movedTo[*m.obs.ConfigSource] = set
	}
	set.Insert(m.obs.Name)
}

func (p *Pool) unindexMoved(m *member) {
	if m.obs.ConfigSource == nil {
		return
	}
	if set, ok := p.movedTo[*m.obs.ConfigSource]; ok {
		set.Delete(m.obs.Name)
		if set.Len() == 0 {
			delete(p.movedTo, *m.obs.ConfigSource)
		}
	}
}

// movedAny reports whether the rollout moved any Node no other rollout
// selects to the target's ConfigMap.
func (p *Pool) movedAny(target contract.ConfigMapVersion) bool {
	ref := contract.ConfigMapRef{Namespace: target.Namespace, Name: target.Name}
	return p.movedTo[ref.String()].Len() > 0
}

// judge brings every verdict up to date against the target, the skipped
// Nodes and now: the Nodes set since, the Nodes whose skip changed, and
// those whose trial period has ended since; all of them when the target
// changed or now is before the last judgement.
func (p *Pool) judge(target contract.ConfigMapVersion, skipped map[string]string, now time.Time) {
	switch {
	case !p.judged || target != p.target || now.Before(p.judgedAt):
		p.dirty.Insert(slices.Collect(maps.Keys(p.members))...)
	default:
		for name, why := range skipped {
			if old, ok := p.skipped[name]; !ok || old != why {
				p.dirty.Insert(name)
			}
		}
		for name := range p.skipped {
			if _, ok := skipped[name]; !ok {
				p.dirty.Insert(name)
			}
		}
		for {
			first, ok := p.early.Min()
			if !ok || first.ends.After(now) {
				break
			}
			p.early.Delete(first)
			p.dirty.Insert(first.name)
		}
	}
	p.judged, p.target, p.skipped, p.judgedAt = true, target, maps.Clone(skipped), now
	for name := range p.dirty {
		m, ok := p.members[name]
		if !ok {
			continue
		}
		if m.judged {
			p.withdraw(m)
		}
		m.verdict = judge(&m.obs, target, p.rollout, skipped, now)
		p.admit(m)
		p.changed.Insert(name)
	}
	clear(p.dirty)
}

// withdraw takes a Node's verdict out of what is kept of the verdicts.
func (p *Pool) withdraw(m *member) {
	p.count(m, -1)
	if m.recorded {
		p.toRecord.Delete(m.obs.Name)
		m.recorded = false
	}
	if m.early != nil {
		p.early.Delete(*m.early)
		m.early = nil
	}
	m.judged = false
}

// admit puts a Node's new verdict into what is kept of the verdicts.
func (p *Pool) admit(m *member) {
	m.judged = true
	p.count(m, 1)
	switch m.verdict.State {
	case StateUpdated:
		if movedBy(&m.obs, p.target, p.rollout) && m.obs.TrialPassed != TrialPassedValue(p.target) {
			m.recorded = true
			p.toRecord.ReplaceOrInsert(m.obs.Name)
		}
	case StateInTrial:
		if reportsUpdated(m.obs.Status, p.target) {
			m.early = &due{ends: m.obs.TrialEnds, name: m.obs.Name}
			p.early.ReplaceOrInsert(*m.early)
		}
	}
}

// count adds (sign 1) or takes out (sign -1) a Node's verdict to the
// counts and the ordered sets of states and of the Nodes waited on.
func (p *Pool) count(m *member, sign int) {
	v, name := &m.verdict, m.obs.Name
	put := func(t *btree.BTreeG[string]) {
		if sign > 0 {
			t.ReplaceOrInsert(name)
		} else {
			t.Delete(name)
		}
	}
	put(p.byState[v.State])
	c := &p.counts
	c.selected += sign
	if v.State == StateConflicted {
		c.conflicted += sign
		return
	}
	c.managed += sign
	if v.Unavailable {
		c.unavailable += sign
		if v.State != StateDegraded {
			put(p.waiting)
		}
	}
	switch v.State {
	case StateUpdated:
		c.updated += sign
	case StateInTrial:
		c.inTrial += sign
	case StateFailed:
		c.failed += sign
	case StateDegraded:
		c.failed += sign
		c.degraded += sign
	case StateSkipped:
		c.skipped += sign
	case StatePending, StateUnavailable:
		c.pending += sign
	}
}

// ascend calls f on the Nodes of tree in name order until it returns false.
func (p *Pool) ascend(tree *btree.BTreeG[string], f func(*member) bool) {
	tree.Ascend(func(name string) bool { return f(p.members[name]) })
}

// listed is the first few names a message shows (names), of a tree's
// Nodes, each as word makes it.
func (p *Pool) listed(tree *btree.BTreeG[string], word func(*member) string) string {
	var first []string
	p.ascend(tree, func(m *member) bool {
		first = append(first, word(m))
		return len(first) < shownNames
	})
	return namesOf(first, tree.Len())
}

// verdicts returns the verdicts that changed since the last decision (all
// of them when all is true, or at the first decision), in name order, and
// the Nodes that left the pool since; final gives a Node's verdict in this
// decision.
func (p *Pool) verdicts(all bool, final func(*member) NodeResult) (changed []NodeResult, left []string) {
	names := p.changed
	if all || p.overridden {
		names = sets.KeySet(p.members)
	}
	for _, name := range sets.List(names) {
		v := final(p.members[name])
		if old, ok := p.reported[name]; ok && old == v {
			continue
		}
		p.reported[name] = v
		changed = append(changed, v)
	}
	for name := range p.left {
		delete(p.reported, name)
	}
	left = sets.List(p.left)
	clear(p.changed)
	clear(p.left)
	p.overridden = all
	return changed, left
}
