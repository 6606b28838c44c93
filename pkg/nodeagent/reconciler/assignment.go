package reconciler

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
)

// syncAssignment brings the assigned record in line with the apiserver. The
// checkpoint is durable before the record moves; a ConfigMap that cannot be
// read moves nothing.
func (c *Reconciler) syncAssignment(obs Observation, p *pass) error {
	p.shownAssigned = c.records.assigned
	if !obs.Online {
		return nil
	}
	if obs.AssignmentErr != nil {
		p.addProblem(&problem{reason: contract.ReasonAssignmentInvalid, message: fmt.Sprintf(
			"annotation %s: %v; keeping the current configuration", contract.ConfigSourceAnnotation, obs.AssignmentErr)})
		return nil
	}
	if obs.Assignment == nil {
		return c.assignLocal(p)
	}

	wanted := obs.Assignment.ConfigMap
	cm := obs.ConfigMap
	if cm == nil || cm.Namespace != wanted.Namespace || cm.Name != wanted.Name {
		c.awaitConfigMap(wanted, obs.ConfigMapErr, p)
		return nil
	}
	ref := contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	p.shownAssigned = &ref
	if err := checkpoint.ValidateRef(ref); err != nil {
		p.addProblem(&problem{reason: contract.ReasonDownloadFailed, message: err.Error()})
		p.shownAssigned = c.records.assigned
		return nil
	}
	if !contract.IsEligible(cm.Labels) {
		// The authorizer should never have let the node read it; refuse it
		// here too rather than trust that.
		p.fallback = &problem{reason: contract.ReasonValidationFailed, message: fmt.Sprintf(
			"ConfigMap %s/%s is not labelled %s=%s; only eligible ConfigMaps are applied",
			cm.Namespace, cm.Name, contract.EligibleLabel, contract.EligibleLabelValue)}
		return nil
	}
	if err := c.ensureCheckpoint(ref, cm, obs.Assignment.Key, p); err != nil {
		return err
	}
	if !contract.SameVersion(c.records.assigned, &ref) {
		if err := c.deps.Store.SetAssigned(&ref); err != nil {
			return fmt.Errorf("moving the assigned record: %w", err)
		}
		c.records.assigned = &ref
	}
	return nil
}

// assignLocal handles a cleared assignment: the local configuration becomes
// both assigned and last-known-good, as in the kubelet's Dynamic Kubelet
// Config, so that a later assignment that fails rolls back to the node's own
// configuration and not to one the operator has since withdrawn.
func (c *Reconciler) assignLocal(p *pass) error {
	p.shownAssigned = nil
	if c.records.assigned != nil {
		if err := c.deps.Store.SetAssigned(nil); err != nil {
			return fmt.Errorf("moving the assigned record to the local configuration: %w", err)
		}
		c.records.assigned = nil
	}
	if c.records.lastKnownGood != nil {
		if err := c.deps.Store.SetLastKnownGood(nil); err != nil {
			return fmt.Errorf("resetting last-known-good to the local configuration: %w", err)
		}
		c.records.lastKnownGood = nil
	}
	return nil
}

// awaitConfigMap reports an assigned ConfigMap that is not readable (yet).
// What runs keeps running: a missing ConfigMap is no reason to restart the
// kubelet.
func (c *Reconciler) awaitConfigMap(wanted contract.ConfigMapRef, readErr error, p *pass) {
	if a := c.records.assigned; a != nil && a.Namespace == wanted.Namespace && a.Name == wanted.Name {
		p.shownAssigned = a
	} else {
		p.shownAssigned = &contract.ConfigMapVersion{Namespace: wanted.Namespace, Name: wanted.Name}
	}
	if readErr != nil {
		p.addProblem(&problem{reason: contract.ReasonDownloadFailed, message: fmt.Sprintf(
			"reading ConfigMap %s: %v; keeping the current configuration", wanted, readErr)})
		return
	}
	p.addProblem(&problem{reason: contract.ReasonDownloading, message: fmt.Sprintf("waiting for ConfigMap %s", wanted)})
}

// ensureCheckpoint saves the ConfigMap's configuration unless a sound
// checkpoint of this version exists.
func (c *Reconciler) ensureCheckpoint(ref contract.ConfigMapVersion, cm *corev1.ConfigMap, key string, p *pass) error {
	store := c.deps.Store
	if contract.SameVersion(c.records.assigned, &ref) && store.HasCheckpoint(ref) {
		// Checked when chosen; a corrupt one is moved aside there, and
		// rewritten by the next pass.
		return nil
	}
	_, err := store.LoadCheckpoint(ref)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpoint.ErrCorrupt):
		p.event(corev1.EventTypeWarning, contract.ReasonCheckpointCorrupt, "%v; downloading it again", err)
	case !errors.Is(err, checkpoint.ErrNotFound):
		return fmt.Errorf("reading checkpoint: %w", err)
	}
	config, hasKey := cm.Data[key]
	cp := checkpoint.Checkpoint{Ref: ref, Key: key, HasKey: hasKey, Config: config, DownloadedAt: c.deps.Now()}
	if err := store.SaveCheckpoint(cp); err != nil {
		return fmt.Errorf("checkpointing %s: %w", describe(&ref), err)
	}
	return nil
}
