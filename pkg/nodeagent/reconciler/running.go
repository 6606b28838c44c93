package reconciler

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/effective"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// RunningReader reads what the kubelet runs: its /configz, /flagz and the
// files it merges (kubelet.RunningReader).
type RunningReader interface {
	Read(ctx context.Context) (effective.Observed, error)
}

// running is what the agent last learned of the kubelet's running
// configuration, compared with a configuration it applied. Active means
// the kubelet runs it: a trial does not pass until a read since the
// kubelet's restart matched, a difference fails it, and outside trials a
// difference is drift.
type running struct {
	// ref is the configuration compared; nil for none.
	ref *contract.ConfigMapVersion
	// tracker is the trial tracker the reads were made under (nil outside
	// a trial): a new one is a new kubelet start or a new agent, and
	// nothing read before counts for it.
	tracker *trial.Tracker
	// read is true once a read was made for ref; verified when the latest
	// one matched.
	read, verified bool
	differences    []effective.Difference
	err            error
	// next is when (time since boot) the next read outside a trial is
	// due; quietUntil is until when a read that fails is not reported,
	// the kubelet having just been restarted.
	next, quietUntil time.Duration
	// announced is the drift last counted, so that one drift counts once.
	announced string
}

// report is the status's account of the comparison; nil before any read.
func (r *running) report() *contract.RunningConfig {
	switch {
	case r.ref == nil || !r.read:
		return nil
	case r.err != nil:
		return &contract.RunningConfig{State: contract.RunningUnknown, Error: r.err.Error()}
	case len(r.differences) > 0:
		out := &contract.RunningConfig{State: contract.RunningDiffers}
		for _, d := range r.differences {
			out.Differences = append(out.Differences, contract.FieldDifference{Field: d.Field, Asked: d.Asked, Running: d.Running, Source: d.Source})
		}
		return out
	}
	return &contract.RunningConfig{State: contract.RunningMatches}
}

// readRunning reads the kubelet's running configuration and compares ch
// with it: every field ch sets but the node-local ones.
func (c *Reconciler) readRunning(ctx context.Context, ch choice) {
	r := &c.running
	r.read = true
	obs, err := c.deps.Running.Read(ctx)
	if err == nil {
		// The node-local fields are the node's, never the ConfigMap's:
		// the validator leaves them out for the same reason.
		r.differences, err = effective.Compare([]byte(ch.config), c.deps.Validator.LocalFields, obs)
	}
	r.err = err
	if err != nil {
		r.differences = nil
	}
	r.verified = err == nil && len(r.differences) == 0
}

// judgeRunning adds the running configuration to a trial's verdict: a
// field the kubelet runs with another value fails the trial, naming it;
// the trial does not pass until a read since the kubelet's restart
// matched. The kubelet is read after each healthy probe (probedHealthy):
// a kubelet that does not answer /healthz is the health checks' to judge.
func (c *Reconciler) judgeRunning(ctx context.Context, ch choice, probedHealthy bool, v trial.Verdict, p *pass) trial.Verdict {
	r := &c.running
	if r.tracker != c.tracker || !contract.SameVersion(r.ref, ch.ref) {
		*r = running{ref: ch.ref, tracker: c.tracker, announced: r.announced}
	}
	if v.Outcome != trial.Fail && probedHealthy {
		c.readRunning(ctx, ch)
	}
	p.running = r.report()
	switch {
	case v.Outcome == trial.Fail:
		return v
	case len(r.differences) > 0:
		return trial.Verdict{Outcome: trial.Fail, Message: "the kubelet does not run it: " + effective.Describe(r.differences)}
	case v.Outcome == trial.Pass && !r.verified:
		why := "its running configuration has not been read since its restart"
		if r.err != nil {
			why = fmt.Sprintf("its running configuration cannot be read: %v", r.err)
		}
		p.addProblem(&problem{reason: contract.ReasonConfigUnverified, message: fmt.Sprintf(
			"the trial of %s is over, but the agent cannot tell that the kubelet runs it: %s; it does not pass until the agent can", describe(ch.ref), why)})
		return trial.Verdict{Outcome: trial.Continue, Message: "trial period over, waiting to read the kubelet's running configuration"}
	case v.Outcome == trial.Pass:
		// Verified by this trial: the next read is a resync away.
		r.tracker, r.next = nil, c.deps.Clock.SinceBoot()+c.cfg.RunningCheckPeriod
	}
	return v
}

// checkDrift compares, outside a trial, what the kubelet runs with the
// configuration the agent applied and recorded active, once a
// RunningCheckPeriod (and soon after a restart). A difference is drift:
// reported (ConfigDrifted, an Event, the config_drift metric) and left
// alone when the agent does not own what set it (a flag, another drop-in, a
// kubelet started with other files). The file the agent writes no longer
// holding what it wrote is drift too, whatever the kubelet runs yet: apply
// restores it in the same pass, and the kubelet is read at once to say
// what it ran. A running configuration that cannot be read is
// ConfigUnverified, except just after a restart.
func (c *Reconciler) checkDrift(ctx context.Context, ch choice, p *pass) {
	out := ch.out
	p.running = nil
	r := &c.running
	if ch.onTrial {
		// The trial reads it (judgeRunning).
		return
	}
	a := c.records.active
	if ch.ref == nil || a == nil || !contract.SameVersion(a.Ref, ch.ref) || c.records.drain != nil {
		// The local configuration is the node's own; another choice is
		// applied (and read) after its restart; a drain is under way.
		if ch.ref == nil {
			*r = running{announced: r.announced}
		}
		return
	}
	if !contract.SameVersion(r.ref, ch.ref) || (r.tracker != nil && !r.verified) {
		*r = running{ref: ch.ref, announced: r.announced, quietUntil: r.quietUntil}
	}
	r.tracker = nil
	// The agent wrote this file for this configuration (the active record
	// says so) and it holds something else now: someone changed it.
	matches, err := c.deps.File.Matches(out)
	changed := err == nil && !matches && a.FileSHA256 == out.SHA256()
	now := c.deps.Clock.SinceBoot()
	if now >= r.next || changed {
		r.next = now + c.cfg.RunningCheckPeriod
		c.readRunning(ctx, ch)
		if r.err != nil && now < r.quietUntil {
			// Just restarted: look again soon.
			r.next = now + c.cfg.ProbePeriod
		}
	}
	p.requeueWithin(r.next - now)
	p.running = r.report()
	var message string
	switch {
	case changed:
		message = fmt.Sprintf("the file the agent writes for %s was changed behind its back", describe(ch.ref))
		if len(r.differences) > 0 {
			message += "; the kubelet runs it: " + effective.Describe(r.differences)
		}
		message += "; restoring the agent's file and restarting the kubelet"
	case r.err != nil && now < r.quietUntil:
		// The kubelet was just restarted: read again soon before saying
		// anything.
		p.running = nil
	case r.err != nil:
		p.addProblem(&problem{reason: contract.ReasonConfigUnverified, message: fmt.Sprintf(
			"the agent cannot tell that the kubelet runs %s: %v", describe(ch.ref), r.err)})
	case len(r.differences) > 0:
		message = fmt.Sprintf("the kubelet no longer runs %s as applied: %s; the agent changes nothing it does not own",
			describe(ch.ref), effective.Describe(r.differences))
	default:
		r.announced = ""
	}
	if message == "" {
		return
	}
	p.addProblem(&problem{reason: contract.ReasonConfigDrifted, message: message})
	if message != r.announced {
		r.announced = message
		c.deps.Metrics.DriftDetected()
		klog.FromContext(ctx).Info("The kubelet's configuration drifted", "config", describe(ch.ref), "drift", message)
	}
}

// afterRestart notes a restart of the kubelet by the agent: nothing read
// before counts, and outside a trial the next read comes a probe period
// later, its failures not reported within the trial's grace period.
func (c *Reconciler) afterRestart(ch choice, p *pass) {
	now := c.deps.Clock.SinceBoot()
	c.running = running{ref: ch.ref, next: now + c.cfg.ProbePeriod, quietUntil: now + c.cfg.Trial.Grace, announced: c.running.announced}
	if !ch.onTrial && ch.ref != nil {
		p.requeueWithin(c.cfg.ProbePeriod)
	}
}

// classifyRunning classifies the change to out on what the kubelet runs:
// its running configuration against the same with out merged in as the
// kubelet merges it (effective.Predict), in config and drop-in mode alike.
// ok is false when the kubelet cannot be read (down, refused, not reading
// the agent's file): the caller falls back to the files.
func (c *Reconciler) classifyRunning(ctx context.Context, out kubelet.Rendered) (plan disruption.Plan, ok bool) {
	logger := klog.FromContext(ctx)
	obs, err := c.deps.Running.Read(ctx)
	if err != nil {
		logger.V(2).Info("Classifying the change on the files: the kubelet's running configuration cannot be read", "err", err)
		return disruption.Plan{}, false
	}
	var next []byte
	if !out.Absent {
		next = out.Data
	}
	predicted, err := effective.Predict(obs, next)
	if err == nil {
		plan, err = disruption.ClassifyFiles(obs.Config, predicted)
	}
	if err != nil {
		logger.V(2).Info("Classifying the change on the files", "err", err)
		return disruption.Plan{}, false
	}
	return plan, true
}

// requeueWithin asks for another pass within d (at least minRequeue).
func (p *pass) requeueWithin(d time.Duration) {
	d = max(d, minRequeue)
	if p.requeue == 0 || d < p.requeue {
		p.requeue = d
	}
}
