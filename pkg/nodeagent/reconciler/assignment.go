package reconciler

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// wanted is what the Node assigns and the records do not hold yet
// (Downloading): a version of the assigned ConfigMap, at hand in the
// Observation, without a checkpoint or without the assigned record on it;
// or, cm nil, the local configuration an assignment was cleared to.
type wanted struct {
	ref contract.ConfigMapVersion
	cm  *corev1.ConfigMap
	key string
}

// readAssignment reads what the Node assigns, as obs shows it, at the start
// of a pass: what the records lack of it, nil when they hold it or it
// cannot be had. Offline the records rule. A ConfigMap that cannot be read
// (not yet, deleted, forbidden) is said in the status and moves nothing:
// what runs keeps running.
func (c *Reconciler) readAssignment(obs Observation, p *pass) *wanted {
	r := c.records
	p.shownAssigned = r.assigned
	switch {
	case !obs.Online:
		return nil
	case obs.AssignmentErr != nil:
		p.addProblem(&problem{reason: contract.ReasonAssignmentInvalid, message: fmt.Sprintf(
			"annotation %s: %v; keeping the current configuration", contract.ConfigSourceAnnotation, obs.AssignmentErr)})
		return nil
	case obs.Assignment == nil:
		p.shownAssigned = nil
		if r.assigned == nil && r.lastKnownGood == nil {
			return nil
		}
		return &wanted{}
	}
	named := obs.Assignment.ConfigMap
	cm := obs.ConfigMap
	if cm == nil || cm.Namespace != named.Namespace || cm.Name != named.Name {
		c.awaitConfigMap(named, obs.ConfigMapErr, p)
		return nil
	}
	ref := contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	if err := checkpoint.ValidateRef(ref); err != nil {
		p.addProblem(&problem{reason: contract.ReasonDownloadFailed, message: err.Error()})
		return nil
	}
	p.shownAssigned = &ref
	if !contract.IsEligible(cm.Labels) {
		// The authorizer should never have let the node read it; refuse it
		// here too rather than trust that.
		p.fallback = &problem{reason: contract.ReasonValidationFailed, message: fmt.Sprintf(
			"ConfigMap %s/%s is not labelled %s=%s; only eligible ConfigMaps are applied",
			cm.Namespace, cm.Name, contract.EligibleLabel, contract.EligibleLabelValue)}
		return nil
	}
	if contract.SameVersion(r.assigned, &ref) && c.deps.Store.HasCheckpoint(ref) {
		// Its content is checked when chosen; a corrupt one is moved aside
		// there, and downloaded again by the next pass.
		return nil
	}
	return &wanted{ref: ref, cm: cm, key: obs.Assignment.Key}
}

// awaitConfigMap reports an assigned ConfigMap that is not readable (yet).
// What runs keeps running: a missing ConfigMap is no reason to restart the
// kubelet.
func (c *Reconciler) awaitConfigMap(named contract.ConfigMapRef, readErr error, p *pass) {
	if a := c.records.assigned; a == nil || a.Namespace != named.Namespace || a.Name != named.Name {
		p.shownAssigned = &contract.ConfigMapVersion{Namespace: named.Namespace, Name: named.Name}
	}
	if readErr != nil {
		p.addProblem(&problem{reason: contract.ReasonDownloadFailed, message: fmt.Sprintf(
			"reading ConfigMap %s: %v; keeping the current configuration", named, readErr)})
		return
	}
	p.addProblem(&problem{reason: contract.ReasonDownloading, message: fmt.Sprintf("waiting for ConfigMap %s", named)})
}

// download takes what the Node assigns into the records (Downloading): the
// ConfigMap's configuration is checkpointed, durably, unless a sound
// checkpoint of this version exists, before the assigned record moves to
// it, so that the records only ever point at a checkpoint. A cleared
// assignment makes the local configuration both assigned and
// last-known-good, as in the kubelet's Dynamic Kubelet Config, so that a
// later assignment that fails rolls back to the node's own configuration
// and not to one the operator has since withdrawn. The next step chooses
// from the records.
func (c *Reconciler) download(p *pass) (again bool, err error) {
	d, store := p.wanted, c.deps.Store
	p.wanted = nil
	if d.cm == nil {
		if c.records.assigned != nil {
			if err := store.SetAssigned(nil); err != nil {
				return false, fmt.Errorf("moving the assigned record to the local configuration: %w", err)
			}
			c.records.assigned = nil
		}
		if c.records.lastKnownGood != nil {
			if err := store.SetLastKnownGood(nil); err != nil {
				return false, fmt.Errorf("resetting last-known-good to the local configuration: %w", err)
			}
			c.records.lastKnownGood = nil
		}
		return true, nil
	}
	_, err = store.LoadCheckpoint(d.ref)
	switch {
	case errors.Is(err, checkpoint.ErrCorrupt):
		p.event(corev1.EventTypeWarning, contract.ReasonCheckpointCorrupt, "%v; downloading it again", err)
	case err != nil && !errors.Is(err, checkpoint.ErrNotFound):
		return false, fmt.Errorf("reading checkpoint: %w", err)
	}
	if err != nil {
		config, hasKey := d.cm.Data[d.key]
		cp := checkpoint.Checkpoint{Ref: d.ref, Key: d.key, HasKey: hasKey, Config: config, DownloadedAt: c.deps.Now()}
		if err := store.SaveCheckpoint(cp); err != nil {
			return false, fmt.Errorf("checkpointing %s: %w", describe(&d.ref), err)
		}
	}
	if !contract.SameVersion(c.records.assigned, &d.ref) {
		if err := store.SetAssigned(&d.ref); err != nil {
			return false, fmt.Errorf("moving the assigned record: %w", err)
		}
		c.records.assigned = &d.ref
	}
	return true, nil
}
