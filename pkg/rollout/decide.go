package rollout

import (
	"fmt"
	"slices"
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
	// Nodes are the Nodes the rollout's selector picks, in any order.
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
	// Nodes are the verdicts on the selected Nodes, by name.
	Nodes []NodeResult
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
	// or beside them (StatusFirst).
	Status v1alpha1.KubeletConfigRolloutStatus
}

// Decide makes the rollout's next decision; see the package documentation
// for the rules. It fails only on a spec the CRD's validation refuses.
func Decide(in Input) (Decision, error) {
	r := in.Rollout
	spec, err := effectiveSpec(&r.Spec, len(in.Nodes), in.DefaultTrialPeriod)
	if err != nil {
		return Decision{}, fmt.Errorf("rollout %s: %w", r.Name, err)
	}
	d := &decider{in: in, spec: spec}
	d.chooseTarget()
	d.collectSkipped()
	d.judgeNodes()
	d.counts = d.count()
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

	nodes []judged
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
		meta.IsStatusConditionTrue(old.Conditions, v1alpha1.ConditionFailed) && d.movedAny(*old.Target) {
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

func (d *decider) movedAny(target contract.ConfigMapVersion) bool {
	for i := range d.in.Nodes {
		if obs := &d.in.Nodes[i]; len(obs.OtherRollouts) == 0 && d.moved(obs, target) {
			return true
		}
	}
	return false
}

func (d *decider) judgeNodes() {
	d.nodes = make([]judged, len(d.in.Nodes))
	for i := range d.in.Nodes {
		d.nodes[i] = judge(&d.in.Nodes[i], d.target, d.in.Rollout.Name, d.skipped, d.in.Now.Time)
	}
	slices.SortFunc(d.nodes, func(a, b judged) int { return strings.Compare(a.Name, b.Name) })
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
	for _, n := range d.nodes {
		if n.State == StateFailed {
			failures = append(failures, failed{n.Name, n.failure, n.failureMessage})
		}
	}
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
// onFailure Revert, and marks the rest Untouched.
func (d *decider) revert() {
	for i := range d.nodes {
		n := &d.nodes[i]
		if n.State == StateConflicted {
			continue
		}
		if d.spec.onFailure == v1alpha1.FailureRevert && d.moved(n.obs, d.target) {
			n.State = StateReverting
			d.reverts = append(d.reverts, revert(n.obs))
			continue
		}
		if n.State == StatePending || n.State == StateUnavailable {
			n.State = StateUntouched
		}
	}
}

// assign picks the Pending Nodes to assign now: as many as maxUnavailable
// leaves room for, and during the canary no more than the canary needs.
func (d *decider) assign() {
	c := d.counts
	room := d.spec.maxUnavailable - c.unavailable
	if canary := min(d.spec.canary, c.managed-c.skipped); c.updated < canary {
		room = min(room, canary-c.updated-c.inTrial)
	}
	for i := range d.nodes {
		if room <= 0 {
			return
		}
		n := &d.nodes[i]
		if n.State != StatePending {
			continue
		}
		change, err := assign(d.in.Rollout.Name, n.obs, contract.ConfigMapRef{Namespace: d.target.Namespace, Name: d.target.Name}, d.spec, d.in.Now.Time)
		if err != nil {
			// The terms were validated with the spec; nothing else fails.
			continue
		}
		d.assignments = append(d.assignments, change)
		room--
	}
}

// counts are the Nodes by state; managed leaves out the Conflicted.
// failed counts the Degraded too: every Node that reports the target
// failed.
type counts struct {
	selected, managed, updated, inTrial, failed, unavailable, pending, conflicted, skipped, degraded int
}

func (d *decider) count() counts {
	c := counts{selected: len(d.nodes)}
	for _, n := range d.nodes {
		if n.State == StateConflicted {
			c.conflicted++
			continue
		}
		c.managed++
		if n.Unavailable {
			c.unavailable++
		}
		switch n.State {
		case StateUpdated:
			c.updated++
		case StateInTrial:
			c.inTrial++
		case StateFailed:
			c.failed++
		case StateDegraded:
			c.failed++
			c.degraded++
		case StateSkipped:
			c.skipped++
		case StatePending, StateUnavailable:
			c.pending++
		}
	}
	return c
}

func (d *decider) decision() Decision {
	out := Decision{Assign: d.assignments, Revert: d.reverts, Record: d.records, Status: d.status(), RecheckAfter: d.recheckAfter()}
	for _, n := range d.nodes {
		out.Nodes = append(out.Nodes, n.NodeResult)
	}
	return out
}

// names lists names (of Nodes, of pods) for a message, the first few of
// them.
func names(list []string) string {
	const shown = 5
	if len(list) <= shown {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:shown], ", "), len(list)-shown)
}
