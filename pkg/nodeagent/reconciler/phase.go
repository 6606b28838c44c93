package reconciler

import (
	"context"
	"fmt"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// Phase is where the agent stands with what the Node assigns and the
// configuration it chose (its choice). It is derived from the state
// directory's records, and what the Node assigns, on every step (next) and
// never kept beside them: an agent killed at any point, or a node that
// lost power, finds its phase again in what is on disk.
type Phase int

// The phases; doc.go says in which order they are derived and what each
// one's transition does.
const (
	Idle        Phase = iota // the kubelet runs the choice
	Downloading              // the records lack what the Node assigns: download
	Restarting               // the kubelet does not run the choice: startChange
	Draining                 // the drain record is for the choice, not done: drainStep
	OnTrial                  // it runs the choice, on trial: judgeTrial
	RollingBack              // the trial record's configuration is no longer chosen: rollBack
)

var phaseNames = [...]string{Idle: "Idle", Downloading: "Downloading", Restarting: "Restarting", Draining: "Draining",
	OnTrial: "OnTrial", RollingBack: "RollingBack"}

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

// next derives the phase of a step: Downloading while the records lack
// what the Node assigns (readAssignment), else the phase the records give
// the choice made from them; Idle, and no choice, when nothing renders.
func (c *Reconciler) next(ctx context.Context, p *pass) (Phase, *choice, error) {
	if p.wanted != nil {
		return Downloading, nil, nil
	}
	ch := c.choice(p)
	if ch == nil {
		return Idle, nil, nil
	}
	c.checkDrift(ctx, *ch, p)
	ph, err := c.phase(*c.records, *ch)
	return ph, ch, err
}

// step dispatches on the phase: the one transition it calls changes the
// records, and again asks for the next step in the same pass.
func (c *Reconciler) step(ctx context.Context, p *pass) (again bool, err error) {
	var ch *choice
	if p.phase, ch, err = c.next(ctx, p); err != nil {
		return false, err
	}
	switch p.phase {
	case Downloading:
		return c.download(p)
	case Restarting:
		return c.startChange(ctx, *ch, p)
	case Draining:
		return c.drainStep(ctx, *ch, p)
	case OnTrial:
		return c.judgeTrial(ctx, *ch, p)
	case RollingBack:
		return c.rollBack(ctx, *ch, p)
	}
	// Idle: no drain holds the cordon any more. Nor does one when nothing
	// can be applied: the kubelet keeps what it runs, and the Node its pods.
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
