package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/bootclock"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/metrics"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// Renderer turns a configuration into the kubelet's file.
type Renderer interface {
	Local() (kubelet.Rendered, error)
	Assigned(config []byte) (kubelet.Rendered, error)
}

// ConfigFile is the kubelet's configuration file.
type ConfigFile interface {
	Matches(kubelet.Rendered) (bool, error)
	Write(kubelet.Rendered) error
	// Current is the file as it is, nil when it does not exist.
	Current() ([]byte, error)
}

// Restarter restarts the kubelet.
type Restarter interface {
	Restart(ctx context.Context) error
}

// Prober probes the kubelet's health; nil is healthy.
type Prober interface {
	Probe(ctx context.Context) error
}

// Deps are the reconciler's collaborators.
type Deps struct {
	Store     *checkpoint.Store
	Clock     bootclock.Clock
	Renderer  Renderer
	File      ConfigFile
	Restarter Restarter
	Prober    Prober
	// Validator judges configurations; its zero value applies the
	// hardening rules' defaults.
	Validator Validator
	// Running reads what the kubelet runs (its /configz): a trial does not
	// pass until it shows the configuration, and outside trials it is
	// compared again for drift.
	Running RunningReader
	// StateFiles removes the kubelet's state files for a drained change;
	// nil when the agent knows no kubelet root directory (a change that
	// invalidates state files then fails to apply).
	StateFiles StateFileRemover
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Now is the wall clock, for informative timestamps only; nil means
	// time.Now.
	Now func() time.Time
}

// Config tunes the reconciler.
type Config struct {
	// Trial are the terms a configuration on trial is judged by, unless
	// its assignment gives its own (contract.TrialAnnotation).
	Trial trial.Terms
	// TrialTuning are the settings of every signal of the Node and its
	// pods whether Trial turns it on or not, for an assignment's terms
	// that turn one on (trial.Resolve).
	TrialTuning trial.NodeSignals
	// ProbePeriod is how often the kubelet is probed during a trial.
	ProbePeriod time.Duration
	// KubeletVersion, when set, overrides the version read from the Node.
	KubeletVersion *version.Version
	// DrainMode is contract.DrainAuto, DrainAlways or DrainNever, for
	// Nodes without the contract.DrainAnnotation.
	DrainMode string
	// DrainTimeout bounds a drain: past it the change is not applied.
	DrainTimeout time.Duration
	// DrainPollPeriod is how often a drain in progress is looked at.
	DrainPollPeriod time.Duration
	// RunningCheckPeriod is how often, outside trials, the kubelet's
	// running configuration is compared with the one applied; zero means
	// a minute.
	RunningCheckPeriod time.Duration
}

// Observation is what the apiserver says, as last seen.
type Observation struct {
	// Online is true once the agent has its Node from the apiserver. While
	// false, the fields below are ignored and the state directory rules.
	Online bool
	// Assignment is nil when nothing is assigned.
	Assignment *contract.Assignment
	// AssignmentErr is set when the Node's assignment does not parse.
	AssignmentErr error
	// ConfigMap is the assigned ConfigMap, once read.
	ConfigMap *corev1.ConfigMap
	// ConfigMapErr says why the assigned ConfigMap is not there: not found,
	// forbidden, unreachable. Nil with a nil ConfigMap means "not yet".
	ConfigMapErr error
	// KubeletVersion is the Node's status.nodeInfo.kubeletVersion, if it
	// parses.
	KubeletVersion *version.Version
	// Node is the agent's Node as last seen, for the trial's signals.
	Node *corev1.Node
	// Pods lists the pods bound to the Node, for the trial's pod signals;
	// nil when they are not read (offline, or no pod signal is on). It is
	// called just before a restart and once a probe period during a
	// trial, never outside one.
	Pods func(ctx context.Context) ([]*corev1.Pod, error)
	// Drainer cordons, evicts and uncordons with the Node's credentials;
	// nil offline.
	Drainer Drainer
}

// Result is the outcome of one Sync.
type Result struct {
	Report status.Report
	// Events are the transitions of this pass.
	Events []status.Event
	// Phase is where the change stands after the pass.
	Phase Phase
	// RequeueAfter asks for another pass after this long (a trial is being
	// watched); zero means only when something changes.
	RequeueAfter time.Duration
}

// Reconciler is the state machine. It is not safe for concurrent use.
type Reconciler struct {
	cfg  Config
	deps Deps

	// records mirror the state directory; nil until the first Sync reads
	// it. The phase is derived from them, never kept beside them.
	records *records

	// tracker watches the trial the trial record names since the later of
	// this process's start and the kubelet's last restart; every write of
	// the trial record drops it (setTrial, clearTrial).
	tracker *trial.Tracker
	// nextProbe is when (time since boot) the kubelet is probed next.
	// Probes are ProbePeriod apart however often Sync runs (every watch
	// event runs it), so that the failure threshold counts probe periods,
	// not passes.
	nextProbe time.Duration
	// pods are the pods bound to the Node as last listed for a trial;
	// podsKnown is false when they were not (nodeSnapshot).
	pods      []*corev1.Pod
	podsKnown bool

	// kubeletVersion is the Node's version as last seen, or as the state
	// directory recorded it, so that a start while the apiserver is away
	// keeps it.
	kubeletVersion *version.Version
	// validated caches verdicts by reference and kubelet version.
	validated map[validationKey]error
	// running is the last comparison of the kubelet's running
	// configuration with the configuration applied (running.go).
	running running
	// warned dedupes warnings said once, not once a pass.
	warned warned
}

// warned is what was last warned about, by subject.
type warned struct {
	// problem is the status's error, drainMode an invalid
	// nodeguard.dev/drain value, terms the Node's per-assignment terms
	// that do not parse, blocked the pods a rollback's drain leaves.
	problem, drainMode, terms, blocked string
}

type validationKey struct {
	ref     contract.ConfigMapVersion
	version string
}

// records mirrors the state directory's records.
type records struct {
	assigned      *contract.ConfigMapVersion
	lastKnownGood *contract.ConfigMapVersion
	active        *checkpoint.Active
	trial         *checkpoint.Trial
	drain         *checkpoint.Drain
	bad           []checkpoint.BadEntry
}

// New returns a reconciler; the state directory is read on the first Sync.
func New(cfg Config, deps Deps) (*Reconciler, error) {
	var errs []error
	if err := cfg.Trial.Validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.ProbePeriod <= 0 {
		errs = append(errs, fmt.Errorf("probe period %v: must be positive", cfg.ProbePeriod))
	}
	if cfg.DrainMode == "" {
		cfg.DrainMode = contract.DrainAuto
	}
	if !contract.ValidDrainMode(cfg.DrainMode) {
		errs = append(errs, fmt.Errorf("drain mode %q: want %s, %s or %s", cfg.DrainMode, contract.DrainAuto, contract.DrainAlways, contract.DrainNever))
	}
	if cfg.DrainTimeout <= 0 || cfg.DrainPollPeriod <= 0 {
		errs = append(errs, fmt.Errorf("drain timeout %v and poll period %v: must be positive", cfg.DrainTimeout, cfg.DrainPollPeriod))
	}
	if cfg.RunningCheckPeriod == 0 {
		cfg.RunningCheckPeriod = time.Minute
	}
	if cfg.RunningCheckPeriod < 0 {
		errs = append(errs, fmt.Errorf("running configuration check period %v: must be positive", cfg.RunningCheckPeriod))
	}
	if deps.Store == nil || deps.Clock == nil || deps.Renderer == nil || deps.File == nil ||
		deps.Restarter == nil || deps.Prober == nil || deps.Running == nil {
		errs = append(errs, errors.New("reconciler: a dependency is missing"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Reconciler{cfg: cfg, deps: deps, validated: map[validationKey]error{}}, nil
}

// problem is why the assigned configuration is not (yet) the ready one,
// or, as pass.waiting, the step a change waits on.
type problem struct {
	reason  string
	message string
	// pendingPods are the pods a drain waits on, or was blocked by.
	pendingPods []string
}

// pass accumulates what one Sync decides.
type pass struct {
	// obs is what the apiserver said for this pass.
	obs Observation
	// terms are the Node's own terms for its assignment, as this pass
	// reads them.
	terms    terms
	events   []status.Event
	problems []*problem
	// shownAssigned is the assigned reference to report.
	shownAssigned *contract.ConfigMapVersion
	// wanted is what the Node assigns and the records lack, until
	// downloaded.
	wanted *wanted
	// fallback is set when the assigned configuration cannot be used now
	// and the choice must fall back.
	fallback *problem
	// phase is the last phase dispatched.
	phase Phase
	// waiting is set while a change waits on its drain
	// (contract.PhaseDraining) or its restart (PhaseRestarting).
	waiting *problem
	requeue time.Duration
	// restarted is set once this pass restarted the kubelet, baseline to
	// what the Node and its pods looked like just before, for the trial
	// (nil: none taken, the tracker takes its first look instead).
	restarted bool
	baseline  *trial.Snapshot
	// waived is what a check the trial in progress waived found.
	waived string
	// running is how the kubelet's running configuration compares with
	// the one applied, for the status (running.go).
	running *contract.RunningConfig
}

// minRequeue is how soon a pass that ends a step runs the next one.
const minRequeue = time.Millisecond

func (p *pass) wait(phase, message string, pendingPods []string) {
	p.waiting = &problem{reason: phase, message: message, pendingPods: pendingPods}
}

func (p *pass) addProblem(pr *problem) {
	if pr != nil {
		p.problems = append(p.problems, pr)
	}
}

func (p *pass) event(eventType, reason, format string, args ...any) {
	p.events = append(p.events, status.Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// maxSteps bounds the transitions of one pass: the longest way, a download
// whose trial fails at once and whose way back starts a drain, takes six.
const maxSteps = 8

// Sync runs one pass: what the Node assigns, then, from it and the
// records, the phase and its transition, again while a transition asks for
// the next one now. An error asks for a retry with backoff; the Result is meaningful even
// then.
func (c *Reconciler) Sync(ctx context.Context, obs Observation) (Result, error) {
	p := &pass{obs: obs}
	if c.records == nil {
		c.load(p)
	}
	c.noteKubeletVersion(ctx, obs)
	kept := c.records.refs()
	p.wanted = c.readAssignment(obs, p)
	p.terms = c.assignmentTerms(p)
	var err error
	for step, again := 0, true; err == nil && again && step < maxSteps; step++ {
		again, err = c.step(ctx, p)
	}
	if err == nil {
		err = c.releaseCordon(ctx, p)
	}
	if err == nil && !slices.Equal(kept, c.records.refs()) {
		if pruneErr := c.deps.Store.PruneCheckpoints(c.records.refs()); pruneErr != nil {
			klog.FromContext(ctx).Error(pruneErr, "Pruning old checkpoints failed; will retry on the next change")
		}
	}
	if err != nil {
		p.addProblem(&problem{reason: contract.ReasonApplyFailed, message: err.Error()})
	}
	result := c.result(p)
	c.deps.Metrics.ObserveReport(result.Report)
	c.deps.Metrics.SetTrialElapsed(c.trialElapsed())
	c.deps.Metrics.SetTrialPeriod(c.trialPeriod())
	return result, err
}

// noteKubeletVersion records the Node's kubelet version when it changes.
func (c *Reconciler) noteKubeletVersion(ctx context.Context, obs Observation) {
	v := obs.KubeletVersion
	if !obs.Online || v == nil || (c.kubeletVersion != nil && c.kubeletVersion.String() == v.String()) {
		return
	}
	c.kubeletVersion = v
	if err := c.deps.Store.SetKubeletVersion(v.String()); err != nil {
		klog.FromContext(ctx).Error(err, "Recording the kubelet version failed; a start without the apiserver cannot check feature gates")
	}
}

// load reads the state directory's records; one that is corrupt is moved
// aside by the store and read as absent.
func (c *Reconciler) load(p *pass) {
	s := c.deps.Store
	c.records = &records{assigned: read(p, s.Assigned), lastKnownGood: read(p, s.LastKnownGood), active: read(p, s.Active),
		trial: read(p, s.Trial), drain: read(p, s.Drain), bad: read(p, s.Bad)}
	if v, err := version.ParseGeneric(read(p, s.KubeletVersion)); err == nil { // the store refuses what does not parse
		c.kubeletVersion = v
	}
}

// read reads one record, saying when it was corrupt.
func read[T any](p *pass, record func() (T, error)) T {
	v, err := record()
	if err != nil {
		p.event(corev1.EventTypeWarning, contract.ReasonCheckpointCorrupt, "%v", err)
	}
	return v
}

// nodeSnapshot is what the trial's signals see of the Node in obs, nil
// when the agent does not know its Node. With refresh the pods bound to
// the Node are listed anew; otherwise the last list stands. A list that
// fails leaves the pods unknown for that look (only the Node's conditions
// judge), and is tried again at the next refresh.
func (c *Reconciler) nodeSnapshot(ctx context.Context, obs Observation, refresh bool) *trial.Snapshot {
	if !obs.Online || obs.Node == nil {
		return nil
	}
	if refresh {
		c.pods, c.podsKnown = nil, false
		if obs.Pods != nil {
			pods, err := obs.Pods(ctx)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Listing the Node's pods failed; judging this look without them", "err", err)
			} else {
				c.pods, c.podsKnown = pods, true
			}
		}
	}
	s := trial.NewSnapshot(obs.Node, c.pods, c.podsKnown)
	return &s
}

func (c *Reconciler) trialElapsed() time.Duration {
	t := c.records.trial
	if t == nil || t.BootID != c.deps.Clock.BootID() {
		return 0
	}
	return max(c.deps.Clock.SinceBoot()-t.StartedSinceBoot, 0)
}

// refs are the configurations the records point at, whose checkpoints
// are kept.
func (r *records) refs() []contract.ConfigMapVersion {
	var keep []contract.ConfigMapVersion
	for _, ref := range []*contract.ConfigMapVersion{r.assigned, r.lastKnownGood} {
		if ref != nil {
			keep = append(keep, *ref)
		}
	}
	if r.active != nil && r.active.Ref != nil {
		keep = append(keep, *r.active.Ref)
	}
	if r.trial != nil {
		keep = append(keep, r.trial.Ref)
	}
	if r.drain != nil && r.drain.Ref != nil {
		keep = append(keep, *r.drain.Ref)
	}
	return keep
}

func describe(ref *contract.ConfigMapVersion) string {
	if ref == nil {
		return "the local configuration"
	}
	return fmt.Sprintf("ConfigMap %s/%s (uid %s, resourceVersion %s)", ref.Namespace, ref.Name, ref.UID, ref.ResourceVersion)
}
