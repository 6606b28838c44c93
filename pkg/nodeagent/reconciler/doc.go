// Package reconciler is the agent's state machine: given what the apiserver
// says (an Observation) and what the state directory remembers, it
// checkpoints the assigned configuration, validates it, writes the kubelet's
// configuration file, restarts the kubelet, runs the trial and rolls back,
// and returns the status to report.
//
// It does no I/O with the apiserver and owns no goroutine: Sync is called by
// a single worker (pkg/nodeagent) with the latest Observation, and every
// dependency (state directory, clock, renderer, file, restart command,
// probe, validator) is injected, so table tests drive it step by step.
//
// # One pass of Sync
//
//  1. Assignment. When online, a newly seen ConfigMap version is checkpointed
//     (durably) before the assigned pointer moves to it; clearing the
//     assignment moves both assigned and last-known-good back to the local
//     configuration. Offline, the assigned pointer on disk is used as is. A
//     ConfigMap that cannot be read leaves the running configuration alone.
//  2. Choice. The assigned configuration is chosen unless it is recorded bad,
//     its checkpoint is corrupt, or it fails validation (the same checks as
//     admission, feature gates against this kubelet's version: see
//     Validation below); then last-known-good is, or the local configuration
//     when there is none. Anything but last-known-good and local goes on
//     trial.
//  3. Apply. The kubelet's file is rendered (node-local fields from the
//     node), and when it or the recorded active configuration differs, the
//     trial is recorded, the file written, the kubelet restarted and the
//     active record written, in that order: a crash anywhere repeats the
//     restart, it never skips it.
//  4. Trial. The kubelet is probed, at most once a probe period however
//     often Sync runs, and not before a period has passed since a restart
//     (the old kubelet may still answer). The Node and its pods, as the
//     Observation shows them, are judged on every pass against the snapshot
//     taken just before the restart (pkg/nodeagent/trial). A pass moves
//     last-known-good, a failure records the configuration bad (by UID and
//     resourceVersion) and goes back to 2, which now picks last-known-good.
//     After each healthy probe the kubelet's running configuration (its
//     /configz) is read and compared with the configuration (running.go):
//     a field it runs otherwise fails the trial, and the trial does not pass
//     until a read since the restart matched.
//     A trial is judged by the terms its assignment gave when it started
//     (contract.TrialAnnotation, kept in the trial record; the agent's
//     flags otherwise), and, after a drain, by whether the Node can take
//     back the pods it ran before (kept in the drain record).
//  5. Drift. Outside trials the running configuration is compared again
//     once a RunningCheckPeriod: a difference is ConfigDrifted; the file
//     the agent writes no longer holding what it wrote is drift too, and
//     3 restores it in the same pass.
//
// The restart-or-drain classification of 3 compares the running
// configuration with the same, the new file merged in as the kubelet merges
// it (effective.Predict); the files when the kubelet cannot be read.
//
// A drain follows kubectl drain's rules (drain.Filter): pods no controller
// recreates, and pods with emptyDir data, block it unless the Node's
// switches allow deleting them; it then changes nothing and the
// configuration is recorded as not applied (DrainBlocked).
//
// On a fresh state directory whose kubelet file already holds the chosen
// configuration, the agent adopts it without restarting the kubelet.
//
// # Validation
//
// Validator judges a configuration before it is applied, with
// pkg/kubeletconfig: the same strict decoding, validation and feature-gate
// checks as the admission webhook, so a configuration admission would refuse
// is never applied, and the status quotes the same message.
//
// It holds the configuration to the same hardening rules as the webhook
// too, with their one implementation, pkg/kubeletconfig/hardening: the
// NodeguardPolicy's forbiddenDynamicFields (Rules.ForbiddenFields, from the
// agent's --policy-config) and the dangerous fields of the shipped
// dangerous_fields policy, honouring the allowance annotation of the
// ConfigMap the configuration came from (Allowances, fed from every
// ConfigMap the agent reads). A configuration that reached the node without
// passing admission (written before nodeguard was installed or its policy
// changed, by a user the policy exempts, in a namespace the webhook does
// not judge) is refused here, before anything is written, as a validation
// failure.
//
// Two differences from the webhook, both because the agent sees one
// configuration and not an edit of another: it judges every configuration
// as a new one (a path field an edit left unchanged, which the webhook lets
// through, is refused here unless allowed), and it leaves out the node-local
// fields (--local-fields), which it never takes from a ConfigMap, so that a
// value there is never applied and never judged.
//
// The feature gates are checked against the node's own kubelet version,
// which the agent reads from its Node (status.nodeInfo.kubeletVersion) unless
// --kubelet-version overrides it.
package reconciler
