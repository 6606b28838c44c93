package reconciler

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
)

// choice is the configuration the kubelet should run, chosen from the
// records, and its rendering.
type choice struct {
	// ref is nil for the local configuration.
	ref     *contract.ConfigMapVersion
	config  string
	onTrial bool
	out     kubelet.Rendered
}

// choice chooses and renders the configuration the kubelet should run;
// nil when nothing renders.
func (c *Reconciler) choice(p *pass) *choice {
	return c.render(c.choose(p), p)
}

// choose picks the assigned configuration when it can be used, else falls
// back.
func (c *Reconciler) choose(p *pass) choice {
	if p.fallback != nil {
		return c.fallBack(p, p.fallback)
	}
	assigned := c.records.assigned
	if assigned == nil {
		return choice{}
	}
	if bad := c.badEntry(*assigned); bad != nil && !c.unblocked(bad, p) {
		what, until := "failed its trial", "the ConfigMap changes"
		switch bad.Reason {
		case contract.ReasonDrainTimedOut:
			what = "was not applied"
		case contract.ReasonDrainBlocked:
			what, until = "was not applied", fmt.Sprintf("the ConfigMap changes, or the Node's %s or %s allow what blocked it",
				contract.DrainForceAnnotation, contract.DrainDeleteEmptyDirDataAnnotation)
		}
		return c.fallBack(p, &problem{reason: bad.Reason, pendingPods: bad.PendingPods, message: fmt.Sprintf(
			"%s %s at %s: %s; it is not retried until %s",
			describe(assigned), what, bad.At.UTC().Format(time.RFC3339), bad.Message, until)})
	}
	cp, err := c.deps.Store.LoadCheckpoint(*assigned)
	if err != nil {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			p.event(corev1.EventTypeWarning, contract.ReasonCheckpointCorrupt, "%v", err)
		}
		return c.fallBack(p, &problem{reason: contract.ReasonCheckpointCorrupt, message: fmt.Sprintf(
			"the checkpoint of %s is unusable (%v); it is downloaded again when the apiserver can be reached", describe(assigned), err)})
	}
	if contract.SameVersion(assigned, c.records.lastKnownGood) {
		return choice{ref: assigned, config: cp.Config}
	}
	if !cp.HasKey {
		return c.fallBack(p, &problem{reason: contract.ReasonValidationFailed, message: fmt.Sprintf(
			"ConfigMap %s/%s has no data key %q", assigned.Namespace, assigned.Name, cp.Key)})
	}
	// A configuration already running was validated before it was applied;
	// judging it again would only matter if the kubelet changed version
	// underneath it, and its trial covers that.
	running := c.records.active != nil && contract.SameVersion(c.records.active.Ref, assigned)
	if !running {
		if err := c.validate(*assigned, cp.Config); err != nil {
			return c.fallBack(p, &problem{reason: contract.ReasonValidationFailed, message: fmt.Sprintf(
				"%s is invalid and was not applied: %v", describe(assigned), err)})
		}
	}
	return choice{ref: assigned, config: cp.Config, onTrial: true}
}

// fallBack records why the assigned configuration is not used and returns
// last-known-good, or the local configuration.
func (c *Reconciler) fallBack(p *pass, why *problem) choice {
	p.addProblem(why)
	lkg := c.records.lastKnownGood
	if lkg == nil {
		return choice{}
	}
	cp, err := c.deps.Store.LoadCheckpoint(*lkg)
	if err != nil {
		p.addProblem(&problem{reason: contract.ReasonCheckpointCorrupt, message: fmt.Sprintf(
			"the last-known-good checkpoint of %s is unusable (%v); using the local configuration", describe(lkg), err)})
		if setErr := c.deps.Store.SetLastKnownGood(nil); setErr == nil {
			c.records.lastKnownGood = nil
		}
		return choice{}
	}
	return choice{ref: lkg, config: cp.Config}
}

// unblocked reports whether a drain that pods blocked may be tried again:
// the Node's drain switches differ from those it was blocked under, the
// operator's word on what the drain may delete. Offline nothing is known
// of them, and the entry stands.
func (c *Reconciler) unblocked(bad *checkpoint.BadEntry, p *pass) bool {
	if bad.Reason != contract.ReasonDrainBlocked || bad.DrainOptions == nil || !p.obs.Online || p.obs.Node == nil {
		return false
	}
	return *bad.DrainOptions != p.terms.drain
}

func (c *Reconciler) badEntry(ref contract.ConfigMapVersion) *checkpoint.BadEntry {
	for i := range c.records.bad {
		if c.records.bad[i].Ref == ref {
			return &c.records.bad[i]
		}
	}
	return nil
}

// validate judges a configuration, caching the verdict per kubelet version.
func (c *Reconciler) validate(ref contract.ConfigMapVersion, config string) error {
	v := c.kubeletVersion
	if c.cfg.KubeletVersion != nil {
		v = c.cfg.KubeletVersion
	}
	key := validationKey{ref: ref}
	if v != nil {
		key.version = v.String()
		if err, ok := c.validated[key]; ok {
			return err
		}
	}
	err := c.deps.Validator.Validate([]byte(config), v)
	if v != nil {
		// A node sees a handful of configurations in its life; the cache
		// is dropped whenever it grows anyway.
		if len(c.validated) > 64 {
			clear(c.validated)
		}
		c.validated[key] = err
	}
	return err
}

// render produces the kubelet file for a choice, falling back when the
// choice does not render into a valid file with this node's local fields.
func (c *Reconciler) render(ch choice, p *pass) *choice {
	for {
		var err error
		if ch.ref == nil {
			ch.out, err = c.deps.Renderer.Local()
		} else {
			ch.out, err = c.deps.Renderer.Assigned([]byte(ch.config))
			if err == nil {
				err = c.deps.Validator.ValidateRendered(ch.out.Data)
			}
		}
		switch {
		case err == nil:
			return &ch
		case ch.ref == nil:
			p.addProblem(&problem{reason: contract.ReasonApplyFailed, message: fmt.Sprintf("cannot render the local configuration: %v", err)})
			return nil
		case ch.onTrial:
			ch = c.fallBack(p, &problem{reason: contract.ReasonValidationFailed, message: fmt.Sprintf(
				"%s is invalid on this node and was not applied: %v", describe(ch.ref), err)})
		default:
			// Last-known-good rendered before; the local file must have
			// changed since.
			p.addProblem(&problem{reason: contract.ReasonApplyFailed, message: fmt.Sprintf(
				"last-known-good %s no longer renders on this node (%v); using the local configuration", describe(ch.ref), err)})
			ch = choice{}
		}
	}
}
