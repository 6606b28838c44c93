package reconciler

import (
	"context"
	"fmt"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// Phase is where the agent stands with the configuration it chose (its
// choice). It is derived from the state directory's records on every step
// (phaseOf) and never kept beside them: an agent killed at any point, or
// a node that lost power, finds its phase again in what is on disk.
type Phase int

// The phases; doc.go says in which order phaseOf derives them and what
// each one's transition does.
const (
	Idle        Phase = iota // the kubelet runs the choice
	Restarting               // it does not: startChange
	Draining                 // the drain record is for the choice, not done: drainStep
	OnTrial                  // it runs the choice, on trial: judgeTrial
	RollingBack              // the trial record's configuration is no longer chosen: rollBack
)

var phaseNames = [...]string{Idle: "Idle", Restarting: "Restarting", Draining: "Draining", OnTrial: "OnTrial", RollingBack: "RollingBack"}

func (ph Phase) String() string {
	if ph >= 0 && int(ph) < len(phaseNames) {
		return phaseNames[ph]
	}
	return fmt.Sprintf("Phase(%d)", int(ph))
}

// phaseOf derives the phase from the records and the choice made from
// them (choose.go), on boot bootID, fileMatches saying whether the
// kubelet's file holds the choice's rendering.
func phaseOf(r records, ch choice, bootID string, fileMatches bool) Phase {
	runs := fileMatches && r.active != nil && contract.SameVersion(r.active.Ref, ch.ref) && r.active.FileSHA256 == ch.out.SHA256()
	switch {
	case r.trial != nil && !ch.onTrial && !contract.SameVersion(&r.trial.Ref, ch.ref):
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
	return r.drain != nil && contract.SameVersion(r.drain.Ref, ch.ref) && r.drain.FileSHA256 == ch.out.SHA256()
}

// phase is the phase r and the kubelet's file give ch.
func (c *Reconciler) phase(r records, ch choice) (Phase, error) {
	matches, err := c.deps.File.Matches(ch.out)
	return phaseOf(r, ch, c.deps.Clock.BootID(), matches), err
}

// step dispatches on the phase: the one transition it calls changes the
// records, and again asks for the next step in the same pass.
func (c *Reconciler) step(ctx context.Context, ch choice, p *pass) (again bool, err error) {
	if p.phase, err = c.phase(*c.records, ch); err != nil {
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
