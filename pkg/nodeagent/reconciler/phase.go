package reconciler

import (
	"context"
	"fmt"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// Phase is where the agent stands with the configuration it chose (its
// choice). It is derived from the state directory's records on every step
// (phaseOf) and never kept beside them: an agent killed at any point, or
// a node that lost power, finds its phase again in what is on disk.
type Phase int

const (
	// Idle: the kubelet runs the choice and nothing is under way.
	Idle Phase = iota
	// Restarting: the kubelet does not run the choice (the active record
	// or its file says otherwise). startChange plans the change, then
	// startDrain, or restartKubelet at once.
	Restarting
	// Draining: the drain record names the choice and is not done on
	// this boot. drainStep cordons and evicts, then restartKubelet.
	Draining
	// OnTrial: the kubelet runs the choice, which is on trial, or the
	// trial record names it. judgeTrial, then passTrial or failTrial.
	OnTrial
	// RollingBack: the trial record names a configuration that is no
	// longer the choice (it failed its trial, or was withdrawn), and the
	// choice has no trial of its own. rollBack.
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

// phaseOf derives the phase from the records and the choice chosen from
// them (choose.go), on boot bootID, fileMatches saying whether the
// kubelet's file holds the choice's rendering.
func phaseOf(r records, ch choice, bootID string, fileMatches bool) Phase {
	runs := fileMatches && r.active != nil && sameRef(r.active.Ref, ch.ref) && r.active.FileSHA256 == ch.out.SHA256()
	switch {
	case r.trial != nil && !ch.onTrial && !sameRef(&r.trial.Ref, ch.ref):
		return RollingBack
	case runs && (ch.onTrial || r.trial != nil):
		return OnTrial
	case runs:
		return Idle
	case r.drainFor(ch) && (!r.drain.Drained || r.drain.BootID != bootID):
		return Draining
	}
	return Restarting
}

// drainFor reports whether the drain record is for the change to ch.
func (r records) drainFor(ch choice) bool {
	return r.drain != nil && sameRef(r.drain.Ref, ch.ref) && r.drain.FileSHA256 == ch.out.SHA256()
}

// phase is the phase now.
func (c *Reconciler) phase(ch choice) (Phase, error) {
	matches, err := c.deps.File.Matches(ch.out)
	if err != nil {
		return Idle, err
	}
	return phaseOf(*c.records, ch, c.deps.Clock.BootID(), matches), nil
}

// step dispatches on the phase: the one transition it calls changes the
// records, and again asks for the next step in the same pass.
func (c *Reconciler) step(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	if p.phase, err = c.phase(ch); err != nil {
		return false, err
	}
	switch p.phase {
	case Restarting:
		return c.startChange(ctx, ch, p)
	case Draining:
		return c.drainStep(ctx, ch, p)
	case OnTrial:
		return c.judgeTrial(ctx, ch, p)
	case RollingBack:
		return c.rollBack(ctx, ch, p)
	}
	// Idle: no drain holds the cordon any more.
	return false, c.clearDrain()
}

// setTrial records the trial; the tracker of the one before goes with it.
func (c *Reconciler) setTrial(tr checkpoint.Trial) error {
	if err := c.deps.Store.SetTrial(tr); err != nil {
		return fmt.Errorf("recording the trial: %w", err)
	}
	c.records.trial, c.tracker = &tr, nil
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
