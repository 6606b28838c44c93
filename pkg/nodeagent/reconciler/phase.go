package reconciler

import (
	"context"
	"fmt"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// Phase is where the agent stands with the configuration it chose (the
// target). It is derived from the state directory's records on every step
// (phaseOf) and never kept beside them: an agent killed at any point, or
// a node that lost power, finds its phase again in what is on disk.
type Phase int

const (
	// Idle: the kubelet runs the target and nothing is under way.
	Idle Phase = iota
	// Restarting: the kubelet does not run the target (the active record
	// or its file says otherwise). startChange plans the change, then
	// startDrain, or restartKubelet at once.
	Restarting
	// Draining: the drain record names the target and is not done on
	// this boot. drainStep cordons and evicts, then restartKubelet.
	Draining
	// OnTrial: the kubelet runs the target, which is on trial, or the
	// trial record names it. judgeTrial, then passTrial or failTrial.
	OnTrial
	// RollingBack: the trial record names a configuration that is no
	// longer the target (it failed its trial, or was withdrawn), and the
	// target has no trial of its own. rollBack.
	RollingBack
)

func (ph Phase) String() string {
	switch ph {
	case Idle:
		return "Idle"
	case Restarting:
		return "Restarting"
	case Draining:
		return "Draining"
	case OnTrial:
		return "OnTrial"
	case RollingBack:
		return "RollingBack"
	}
	return fmt.Sprintf("Phase(%d)", int(ph))
}

// phaseOf derives the phase from the records and the target chosen from
// them (choose.go), on boot bootID, fileMatches saying whether the
// kubelet's file holds the target's rendering.
func phaseOf(r records, t target, bootID string, fileMatches bool) Phase {
	runs := fileMatches && r.active != nil && sameRef(r.active.Ref, t.ref) && r.active.FileSHA256 == t.out.SHA256()
	switch {
	case r.trial != nil && !t.onTrial && !sameRef(&r.trial.Ref, t.ref):
		return RollingBack
	case runs && (t.onTrial || r.trial != nil):
		return OnTrial
	case runs:
		return Idle
	case r.drainFor(t) && (!r.drain.Drained || r.drain.BootID != bootID):
		return Draining
	}
	return Restarting
}

// drainFor reports whether the drain record is for the change to t.
func (r records) drainFor(t target) bool {
	return r.drain != nil && sameRef(r.drain.Ref, t.ref) && r.drain.FileSHA256 == t.out.SHA256()
}

// phase is the phase now.
func (c *Reconciler) phase(t target) (Phase, error) {
	matches, err := c.deps.File.Matches(t.out)
	if err != nil {
		return Idle, err
	}
	return phaseOf(*c.records, t, c.deps.Clock.BootID(), matches), nil
}

// step dispatches on the phase: the one transition it calls changes the
// records, and again asks for the next step in the same pass.
func (c *Reconciler) step(ctx context.Context, t target, p *pass) (again bool, err error) {
	if p.phase, err = c.phase(t); err != nil {
		return false, err
	}
	switch p.phase {
	case Restarting:
		return c.startChange(ctx, t, p)
	case Draining:
		return c.drainStep(ctx, t, p)
	case OnTrial:
		return c.judgeTrial(ctx, t, p)
	case RollingBack:
		return c.rollBack(ctx, t, p)
	}
	// Idle: no drain holds the cordon any more.
	return false, c.clearDrain()
}

// setTrial records the trial; the tracker of the one before goes with it.
func (c *Reconciler) setTrial(t checkpoint.Trial) error {
	if err := c.deps.Store.SetTrial(t); err != nil {
		return fmt.Errorf("recording the trial: %w", err)
	}
	c.records.trial, c.tracker = &t, nil
	return nil
}

// clearTrial ends the trial record.
func (c *Reconciler) clearTrial() error {
	if c.records.trial == nil {
		return nil
	}
	if err := c.deps.Store.ClearTrial(); err != nil {
		return fmt.Errorf("ending the trial record: %w", err)
	}
	c.records.trial, c.tracker = nil, nil
	return nil
}
