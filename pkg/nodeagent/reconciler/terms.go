package reconciler

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// terms are the Node's own terms for its assignment (contract.TrialAnnotation,
// DrainForceAnnotation, DrainDeleteEmptyDirDataAnnotation), as this pass
// reads them: what a drain may delete, and how a trial that starts now is
// judged. Offline, or without them, the agent's flags rule.
type terms struct {
	drain contract.DrainOptions
	trial *contract.TrialTerms
}

// assignmentTerms reads the terms on the Node. A value that does not parse
// is warned about once (AssignmentInvalid), and the agent's own terms are
// used instead: a drain deletes nothing it was not plainly allowed to, and
// a trial judges by every signal the agent's flags turn on.
func (c *Reconciler) assignmentTerms(p *pass) terms {
	var t terms
	if !p.obs.Online || p.obs.Node == nil {
		return t
	}
	annotations := p.obs.Node.Annotations
	var bad []string
	var err error
	if t.drain, err = contract.DrainOptionsOf(annotations); err != nil {
		bad = append(bad, err.Error())
	}
	if t.trial, err = contract.TrialTermsOf(annotations); err != nil {
		bad = append(bad, err.Error()+"; the agent's own trial terms apply")
		t.trial = nil
	}
	slices.Sort(bad)
	if key := strings.Join(bad, "\n"); key != c.warned.terms {
		c.warned.terms = key
		for _, why := range bad {
			p.event(corev1.EventTypeWarning, contract.ReasonAssignmentInvalid, "%s", why)
		}
	}
	return t
}

// trialTerms are the terms the trial in progress is judged by: the
// agent's, with those its assignment gave when it started.
func (c *Reconciler) trialTerms() trial.Terms {
	var own *contract.TrialTerms
	if t := c.records.trial; t != nil {
		own = t.Terms
	}
	return trial.Resolve(c.cfg.Trial, c.cfg.TrialTuning, own)
}

// trialPeriod is the period of the trial in progress, else the agent's.
func (c *Reconciler) trialPeriod() time.Duration { return c.trialTerms().Period }

// afterDrain is what the trial of ref judges besides, when a drain
// emptied the Node for it: the pods it held then (nil when no drain
// preceded the trial, or one recorded before the pods were kept).
func (c *Reconciler) afterDrain(ref contract.ConfigMapVersion) *trial.AfterDrain {
	d := c.records.drain
	if d == nil || d.Ref == nil || *d.Ref != ref || !d.Drained || d.Held == nil {
		return nil
	}
	a := &trial.AfterDrain{Requests: d.Held.Requests()}
	if t := c.records.trial; t != nil && t.Terms != nil {
		a.AllowShrink = t.Terms.AllowShrink
	}
	return a
}

// recordBad records a configuration as not to be applied, in place of any
// entry it had: an entry that no longer stands (DrainBlocked under other
// switches) must not hide the newer one.
func (c *Reconciler) recordBad(entry checkpoint.BadEntry) error {
	bad := slices.DeleteFunc(slices.Clone(c.records.bad), func(e checkpoint.BadEntry) bool { return e.Ref == entry.Ref })
	bad = append(bad, entry)
	if len(bad) > checkpoint.MaxBadEntries {
		bad = bad[len(bad)-checkpoint.MaxBadEntries:]
	}
	if err := c.deps.Store.SetBad(bad); err != nil {
		return err
	}
	c.records.bad = bad
	return nil
}
