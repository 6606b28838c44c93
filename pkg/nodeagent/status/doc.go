// Package status is how the agent reports on its own Node (docs/reference.md):
// the nodeguard.dev/config-status annotation, holding a contract.ConfigStatus
// as JSON, and the KubeletConfigReady condition, plus an Event for every
// transition.
//
// # The condition
//
// KubeletConfigReady is True when the assigned configuration is the active
// one and has nothing left to prove:
//
//	True   ConfigActive           the assigned ConfigMap is active and passed its trial
//	True   LocalConfig            nothing is assigned; the node's local configuration is active
//
// and False otherwise, with one of these reasons:
//
//	Draining            a change that needs a drain is under way: the Node is cordoned and
//	                    its pods evicted (status.pendingPods names those waited on)
//	Restarting          drained; the kubelet is being restarted with the change
//	TrialInProgress     the assigned configuration is active and on trial
//	Downloading         the assigned ConfigMap has not been read yet
//	DownloadFailed      the assigned ConfigMap cannot be read (missing, forbidden, deleted)
//	ValidationFailed    it does not decode, validate or pass the feature-gate check
//	                    for this kubelet's version, or is not labelled eligible; never applied
//	RolledBack          it made the kubelet fail its health checks during the trial;
//	                    not retried until the ConfigMap changes
//	CheckpointCorrupt   its checkpoint failed its checksum and was moved aside
//	ApplyFailed         writing the kubelet's config file, the state directory, or the
//	                    restart command failed; retried with backoff
//	AssignmentInvalid   the nodeguard.dev/config-source annotation does not parse
//	DrainTimedOut       the drain did not finish within --drain-timeout; the Node was
//	                    uncordoned and the change not applied; not retried until the
//	                    ConfigMap changes
//
// The condition's message, and the status annotation's "error", say why in
// words. A trial counts as not yet ready (False) rather than Unknown: the
// contract has the condition True only when the assigned configuration is
// active, and a rollout that waits for True should wait for the trial too.
//
// # Writing
//
// The annotation is written with a JSON merge patch on the Node, the
// condition with a strategic merge patch on nodes/status (conditions merge
// by type), each only when it differs from what the Node already carries,
// and retried with backoff on conflicts and transient errors. Reporting runs
// apart from the state machine, so an unreachable apiserver delays the
// status but never the trial.
package status
