package rollout

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Input is everything Decide looks at.
type Input struct {
	// Rollout is the rollout, its status as last written included. Decide
	// does not modify it.
	Rollout *v1alpha1.KubeletConfigRollout
	// Target is the ConfigMap spec.configMapRef names, nil when it does not
	// exist or is not eligible.
	Target *contract.ConfigMapVersion
	// TargetIneligible is true when the ConfigMap exists but lacks the
	// eligibility label (Target is nil then): reported apart from a
	// missing one, since the fix differs.
	TargetIneligible bool
	// Nodes are the Nodes the rollout's selector picks, in any order, for
	// Decide; Pool.Decide reads the pool's instead.
	Nodes []NodeObservation
	// Refusals are the assignments of the current target that admission
	// refused since the last status was written.
	Refusals []Refusal
	// Now stamps the conditions that change, and is what assignments'
	// trial periods are counted against.
	Now metav1.Time
	// DefaultTrialPeriod is the period an assignment's trial is counted
	// as lasting when spec.trial gives none: the controller's
	// --trial-period, the agents' default. Zero means DefaultTrialPeriod.
	DefaultTrialPeriod time.Duration
	// Unfit are the selected Nodes the target would leave unable to hold
	// the pods they run, with why (WouldNotFit); only those not yet
	// assigned the target are reported.
	Unfit map[string]string
}

// DefaultTrialPeriod is the agents' default --trial-period.
const DefaultTrialPeriod = 5 * time.Minute

// Refusal is an assignment the apiserver's admission refused.
type Refusal struct {
	Node string
	// Message is the apiserver's, which says which rule and why.
	Message string
	// NodeState is true when the refusal concerns the Node's own reported
	// state (contract.CauseNodeState): the Node is skipped, and the
	// rollout goes on with the others.
	NodeState bool
}

// Decision is what to do next.
type Decision struct {
	// Nodes are the verdicts on the selected Nodes that changed since the
	// pool's previous decision, by name: every verdict from Decide, and
	// from a pool's first decision.
	Nodes []NodeResult
	// Left are the Nodes that left the pool since its previous decision
	// (no longer selected, or gone), by name.
	Left []string
	// Assign are the Nodes to point at the target, with their bookkeeping.
	Assign []Change
	// Revert are the Nodes to point back at their previous sources.
	Revert []Change
	// Record are bookkeeping changes that move no Node: the trial-passed
	// mark on Nodes seen updated. They may go out in any order, after the
	// status or beside it.
	Record []Change
	// RecheckAfter, when positive, is when to decide again if nothing
	// changes before: the progress deadline falls due then.
	RecheckAfter time.Duration
	// Status is the status to write, before applying Assign and Revert
	// or beside them (ChangesState).
	Status v1alpha1.KubeletConfigRolloutStatus
}

// Decide makes the rollout's next decision; see the package documentation
// for the rules. It fails only on a spec the CRD's validation refuses.
func Decide(in Input) (Decision, error) {
	p := NewPool(in.Rollout.Name)
	for _, obs := range in.Nodes {
		p.Set(obs)
	}
	return p.Decide(in)
}

// Decide makes the rollout's next decision over the pool's Nodes, as
// Decide would over the same Nodes; in.Nodes is not read. Its cost is that
// of the Nodes set since the pool's previous decision, and of the few the
// decision moves or names, but for a rollout that has failed, whose
// revert walks the pool.
func (p *Pool) Decide(in Input) (Decision, error) {
	r := in.Rollout
	if r.Name != p.rollout {
		return Decision{}, fmt.Errorf("rollout %s: decided over the pool of rollout %s", r.Name, p.rollout)
	}
	spec, err := effectiveSpec(&r.Spec, p.Len(), in.DefaultTrialPeriod)
	if err != nil {
		return Decision{}, fmt.Errorf("rollout %s: %w", r.Name, err)
	}
	d := &decider{in: in, spec: spec, pool: p}
	d.chooseTarget()
	d.collectSkipped()
	p.judge(d.target, d.skipped, in.Now.Time)
	d.counts = p.counts
	d.checkFailure()
	switch {
	case d.failure != nil:
		d.revert()
	case d.targetMissing, spec.paused:
	default:
		d.assign()
	}
	if d.failure == nil {
		d.recordPassed()
	}
	d.progressTime = d.lastProgress()
	return d.decision(), nil
}

// spec is the rollout's spec with defaults applied and numbers resolved.
type spec struct {
	ref            contract.ConfigMapRef
	canary         int
	maxUnavailable int
	paused         bool
	onFailure      v1alpha1.FailurePolicy
	deadline       time.Duration
	// drain is spec.drain, defaulted: what each assignment writes as
	// nodeguard.dev/drain.
	drain v1alpha1.DrainMode
	// drainOptions and trial are spec.drainOptions and spec.trial, which
	// each assignment writes on the Node; trialPeriod is the period it is
	// counted as lasting (nodeguard.dev/trial-ends).
	drainOptions contract.DrainOptions
	trial        *contract.TrialTerms
	trialPeriod  time.Duration
}

// errInvalidDrain is a spec.drain that is none of the DrainMode values.
var errInvalidDrain = fmt.Errorf("want %s, %s or %s", v1alpha1.DrainAuto, v1alpha1.DrainAlways, v1alpha1.DrainNever)

// effectiveSpec applies the defaults the apiserver would, for rollouts
// built without one, and scales maxUnavailable to the selected Nodes.
func effectiveSpec(s *v1alpha1.KubeletConfigRolloutSpec, selected int, defaultTrialPeriod time.Duration) (spec, error) {
	out := spec{
		ref:            contract.ConfigMapRef{Namespace: s.ConfigMapRef.Namespace, Name: s.ConfigMapRef.Name},
		canary:         v1alpha1.DefaultCanary,
		maxUnavailable: v1alpha1.DefaultMaxUnavailable,
		paused:         s.Paused,
		onFailure:      s.OnFailure,
		deadline:       v1alpha1.DefaultProgressDeadlineSeconds * time.Second,
		drain:          s.Drain,
	}
	if out.drain == "" {
		out.drain = v1alpha1.DefaultDrain
	}
	// The CRD's enum refuses any other mode; a rollout that did not pass
	// through it (a client's own defaulting, a test) is refused here rather
	// than written on Nodes as an annotation the agents would not read.
	if !contract.ValidDrainMode(string(out.drain)) {
		return spec{}, fmt.Errorf("spec.drain %q: %w", out.drain, errInvalidDrain)
	}
	if s.DrainOptions != nil {
		out.drainOptions = *s.DrainOptions
	}
	if err := s.Trial.Validate(); err != nil {
		return spec{}, fmt.Errorf("spec.trial: %w", err)
	}
	out.trial = s.Trial
	out.trialPeriod = defaultTrialPeriod
	if out.trialPeriod <= 0 {
		out.trialPeriod = DefaultTrialPeriod
	}
	if s.Trial != nil && s.Trial.PeriodSeconds != nil {
		out.trialPeriod = time.Duration(*s.Trial.PeriodSeconds) * time.Second
	}
	if s.ProgressDeadlineSeconds != nil {
		out.deadline = time.Duration(max(*s.ProgressDeadlineSeconds, 1)) * time.Second
	}
	if out.onFailure == "" {
		out.onFailure = v1alpha1.DefaultOnFailure
	}
	if s.Canary != nil {
		out.canary = int(*s.Canary)
	}
	if s.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, selected, false)
		if err != nil {
			return spec{}, fmt.Errorf("spec.maxUnavailable: %w", err)
		}
		out.maxUnavailable = n
	}
	// A percentage of few Nodes rounds to zero; one Node at a time is the
	// slowest a rollout can go and still finish.
	out.maxUnavailable = max(out.maxUnavailable, 1)
	out.canary = max(out.canary, 1)
	return out, nil
}

// decider holds one Decide call's working state.
type decider struct {
	in   Input
	spec spec

	// target is the version the status is about; targetMissing is true
	// when the ConfigMap does not exist or is not eligible, and
	// targetIneligible tells the second.
	target                          contract.ConfigMapVersion
	targetMissing, targetIneligible bool

	// pool holds the Nodes and their verdicts; overrides are a failed
	// rollout's verdicts that differ from the pool's (Reverting,
	// Untouched), by Node.
	pool      *Pool
	overrides map[string]NodeState
	// skipped are the Nodes admission refused the target for their own
	// state, with the refusal, from the status and Input.Refusals.
	skipped map[string]string
	// counts are of the Nodes as observed, before any decision.
	counts counts
	// failure is set when the rollout has failed for the target.
	failure *metav1.Condition
	// progressTime is the status' lastProgressTime.
	progressTime metav1.Time

	assignments, reverts, records []Change
}

// chooseTarget settles the version the rollout is about. A failed rollout
// whose revert is unfinished stays on the failed target until every Node
// it moved is back, whatever the spec says now: those Nodes' previous
// sources are only on them, and moving them on to a new target would
// record the failed one as their previous source.
func (d *decider) chooseTarget() {
	old := d.in.Rollout.Status
	if old.Target != nil && d.spec.onFailure == v1alpha1.FailureRevert &&
		meta.IsStatusConditionTrue(old.Conditions, v1alpha1.ConditionFailed) && d.pool.movedAny(*old.Target) {
		d.target = *old.Target
		d.targetMissing = d.in.Target == nil || *d.in.Target != d.target
		return
	}
	if t := d.in.Target; t != nil && t.Namespace == d.spec.ref.Namespace && t.Name == d.spec.ref.Name {
		d.target = *t
		return
	}
	d.target = contract.ConfigMapVersion{Namespace: d.spec.ref.Namespace, Name: d.spec.ref.Name}
	d.targetMissing = true
	d.targetIneligible = d.in.TargetIneligible
}

// moved reports whether this rollout pointed the Node at the target's
// ConfigMap: its bookkeeping names the rollout and its config-source is
// still what the rollout wrote. A Node someone re-pointed since is not
// this rollout's to revert.
func (d *decider) moved(obs *NodeObservation, target contract.ConfigMapVersion) bool {
	return movedBy(obs, target, d.in.Rollout.Name)
}

// movedBy is moved for the rollout named rollout.
func movedBy(obs *NodeObservation, target contract.ConfigMapVersion, rollout string) bool {
	ref := contract.ConfigMapRef{Namespace: target.Namespace, Name: target.Name}
	return obs.Rollout == rollout && obs.ConfigSource != nil && *obs.ConfigSource == ref.String()
}

// checkFailure finds whether the rollout has failed for its target: it
// failed before (the status says so for this very target), or a Node
// reports the target failed, or admission refused an assignment.
func (d *decider) checkFailure() {
	old := d.in.Rollout.Status
	if old.Target != nil && *old.Target == d.target {
		if c := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
			kept := *c
			d.failure = &kept
			return
		}
	}
	type failed struct{ node, reason, message string }
	var failures []failed
	d.pool.ascend(d.pool.byState[StateFailed], func(m *member) bool {
		failures = append(failures, failed{m.obs.Name, m.verdict.failure, m.verdict.failureMessage})
		return true
	})
	for _, r := range d.in.Refusals {
		if !r.NodeState {
			failures = append(failures, failed{r.Node, v1alpha1.ReasonAssignmentRefused, r.Message})
		}
	}
	if len(failures) == 0 {
		return
	}
	first := failures[0]
	message := fmt.Sprintf("Node %s: %s: %s", first.node, first.reason, first.message)
	if len(failures) > 1 {
		var others []string
		for _, f := range failures[1:] {
			others = append(others, f.node)
		}
		message += fmt.Sprintf(" (also failed: %s)", names(others))
	}
	d.failure = &metav1.Condition{Type: v1alpha1.ConditionFailed, Status: metav1.ConditionTrue, Reason: first.reason, Message: message}
}

// revert re-points the Nodes this rollout moved to the target, under
// onFailure Revert, and marks the rest Untouched. It walks the pool: a
// failed rollout is the exception, and its revert moves most of it.
func (d *decider) revert() {
	d.overrides = map[string]NodeState{}
	d.pool.ascend(d.pool.all, func(m *member) bool {
		switch {
		case m.verdict.State == StateConflicted:
		case d.spec.onFailure == v1alpha1.FailureRevert && d.moved(&m.obs, d.target):
			d.overrides[m.obs.Name] = StateReverting
			d.reverts = append(d.reverts, revert(&m.obs))
		case m.verdict.State == StatePending || m.verdict.State == StateUnavailable:
			d.overrides[m.obs.Name] = StateUntouched
		}
		return true
	})
}

// stateOf is the Node's state in this decision.
func (d *decider) stateOf(m *member) NodeState {
	if s, ok := d.overrides[m.obs.Name]; ok {
		return s
	}
	return m.verdict.State
}

// assign picks the Pending Nodes to assign now, first by name: as many as
// maxUnavailable leaves room for, and during the canary no more than the
// canary needs.
func (d *decider) assign() {
	c := d.counts
	room := d.spec.maxUnavailable - c.unavailable
	if canary := min(d.spec.canary, c.managed-c.skipped); c.updated < canary {
		room = min(room, canary-c.updated-c.inTrial)
	}
	if room <= 0 {
		return
	}
	d.pool.ascend(d.pool.byState[StatePending], func(m *member) bool {
		change, err := assign(d.in.Rollout.Name, &m.obs, contract.ConfigMapRef{Namespace: d.target.Namespace, Name: d.target.Name}, d.spec, d.in.Now.Time)
		if err != nil {
			// The terms were validated with the spec; nothing else fails.
			return true
		}
		d.assignments = append(d.assignments, change)
		room--
		return room > 0
	})
}

// counts are the Nodes by state; managed leaves out the Conflicted.
// failed counts the Degraded too: every Node that reports the target
// failed.
type counts struct {
	selected, managed, updated, inTrial, failed, unavailable, pending, conflicted, skipped, degraded int
}

func (d *decider) decision() Decision {
	out := Decision{Assign: d.assignments, Revert: d.reverts, Record: d.records, Status: d.status(), RecheckAfter: d.recheckAfter()}
	out.Nodes, out.Left = d.pool.verdicts(d.overrides != nil, func(m *member) NodeResult {
		v := m.verdict.NodeResult
		v.State = d.stateOf(m)
		return v
	})
	return out
}

// shownNames is how many names a message lists.
const shownNames = 5

// names lists names (of Nodes, of pods) for a message, the first few of
// them.
func names(list []string) string {
	return namesOf(list[:min(len(list), shownNames)], len(list))
}

// namesOf lists the first few names of a list of total.
func namesOf(first []string, total int) string {
	if total <= len(first) {
		return strings.Join(first, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(first, ", "), total-len(first))
}
