// Package status is how the agent reports on its own Node (docs/reference.md):
// the nodeguard.dev/config-status annotation, holding a contract.ConfigStatus
// as JSON, and the KubeletConfigReady condition, plus an Event for every
// transition.
//
// # The condition
//
// The condition's reasons and the Events' reasons are part of the contract:
// they are constants in pkg/contract (contract.Reason*, contract.Event*),
// listed here as docs/reference.md lists them. KubeletConfigReady is True
// when the assigned configuration is the active one and has nothing left to
// prove:
//
//	True   ConfigActive           the assigned ConfigMap is active and passed its trial, and
//	                              the kubelet runs it (its /configz shows every field it sets)
//	True   LocalConfig            nothing is assigned; the node's local configuration is active
//
// and False otherwise, with one of these reasons:
//
//	Draining            a change that needs a drain is under way: the Node is cordoned and
//	                    its pods evicted (status.pendingPods names those waited on)
//	Restarting          drained; the kubelet is being restarted with the change (its
//	                    invalidated state files removed)
//	TrialInProgress     the assigned configuration is active and on trial
//	Downloading         the assigned ConfigMap has not been read yet (not an error)
//	DownloadFailed      the assigned ConfigMap cannot be read (missing, forbidden, deleted)
//	ValidationFailed    it does not decode, validate, pass the feature-gate check for this
//	                    kubelet's version or the webhook's rules the agent applies, render
//	                    with the node-local fields, or is not labelled eligible; never applied
//	RolledBack          it failed its trial (the message names the signal) and was rolled
//	                    back; not retried until the ConfigMap changes
//	CheckpointCorrupt   a checkpoint failed its checksum and was moved aside; downloaded
//	                    again when possible
//	ApplyFailed         writing the kubelet's config file or the state directory, or the
//	                    kubelet's restart, failed; retried with backoff
//	AssignmentInvalid   the nodeguard.dev/config-source annotation does not parse; the
//	                    current configuration is kept
//	DrainTimedOut       the drain did not finish within --drain-timeout; the Node was
//	                    uncordoned and the change not applied (status.pendingPods names the
//	                    pods that blocked it); not retried until the ConfigMap changes
//	ConfigDrifted       outside a trial, the kubelet no longer runs what the agent applied
//	                    (status.running names each field, both values and the source), or
//	                    the agent's file was changed behind its back (restored at once)
//	ConfigUnverified    the kubelet's running configuration (its /configz) cannot be read
//
// The condition's message, and the status annotation's "error", say why in
// words. A trial counts as not yet ready (False) rather than Unknown: the
// contract has the condition True only when the assigned configuration is
// active, and a rollout that waits for True should wait for the trial too.
//
// # Writing
//
// A report is one strategic merge patch of nodes/status carrying the
// annotation and the condition (conditions merge by type), each only when
// it differs from what the Node already carries, retried with backoff on
// conflicts and transient errors: one write and one watch event per
// report, so that a reader never sees one report's annotation beside the
// previous report's condition. nodes/status keeps the Node's metadata (its
// strategy resets only the spec); were the annotation not kept, it is
// written again with a JSON merge patch on the Node. Reporting runs
// apart from the state machine, so an unreachable apiserver delays the
// status but never the trial.
//
// # Events
//
// The Events on the Node are Draining, Restarting, Uncordoned
// (contract.EventUncordoned), KubeletConfigApplied (contract.EventConfigApplied,
// each restart), KubeletConfigTrialPassed (contract.EventTrialPassed), and a
// Warning with the condition's reason for each new problem.
package status
