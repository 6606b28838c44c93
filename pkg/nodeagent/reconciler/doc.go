// Package reconciler is the agent's state machine: given what the apiserver
// says (an Observation) and what the state directory remembers, it
// downloads and checkpoints the assigned configuration, validates it, writes
// the kubelet's configuration file, restarts the kubelet, runs the trial,
// moves last-known-good or rolls back, and returns the status to report.
//
// It does no I/O with the apiserver and owns no goroutine: Sync is called by
// a single worker (pkg/nodeagent) with the latest Observation, and every
// dependency (state directory, clock, renderer, file, restart command,
// probe, validator) is injected, so table tests drive it step by step.
//
// # One pass of Sync
//
//  1. Assignment (readAssignment). Online, what the Node assigns is read
//     from the Observation (offline the records rule). A ConfigMap that
//     cannot be read (not yet, deleted, forbidden) moves nothing: what runs
//     keeps running, and the status says why.
//  2. Phase (next, phaseOf), derived from the records (assigned,
//     last-known-good, active, trial, drain, bad) and the assignment, never
//     kept. Downloading while the records lack what the Node assigns (no
//     checkpoint of the ConfigMap's version, or the assigned record
//     elsewhere; or a cleared assignment they do not say). Otherwise the
//     choice (choose, render): the assigned configuration unless it is
//     recorded bad, its checkpoint is corrupt, or it fails validation (the
//     same checks as admission, feature gates against this kubelet's
//     version: see Validation below); then last-known-good (fallBack), or
//     the local configuration when there is none. Anything but
//     last-known-good and local is on trial. Then, in this order:
//     - RollingBack: the trial record names a configuration that is no
//     longer the choice, and the choice has no trial;
//     - OnTrial: the kubelet runs the choice (the active record and the
//     kubelet's file say it), which is on trial or named by the trial
//     record;
//     - Idle: the kubelet runs the choice (or nothing renders);
//     - Draining: the drain record is for the choice and not done on this
//     boot;
//     - Restarting: otherwise; the kubelet does not run the choice.
//  3. Transition (step). One switch calls the phase's transition, which
//     writes the records; the pass derives the phase again and goes on
//     while a transition asks for it (after a download, a restart into a
//     trial, a failed trial, a drain started or given up):
//     - Downloading: download checkpoints the ConfigMap (durably) before
//     the assigned record moves to it, so the records only ever point at a
//     checkpoint; a cleared assignment moves both assigned and
//     last-known-good back to the local configuration.
//     - Restarting: startChange plans the change; startDrain records the
//     drain when it needs one (then Draining), else restartKubelet:
//     startTrial records the trial (if the choice has one), the file is
//     written, the kubelet restarted and the active record written, in
//     that order, so a crash anywhere repeats the restart, it never skips
//     it. A fresh state directory whose kubelet file already holds the
//     choice adopts it without a restart.
//     - Draining: drainStep cordons and evicts; once the Node is drained
//     the next pass restarts (Restarting); a drain that times out, or that
//     pods it may not delete block, records the choice not applied, and the
//     next step falls back.
//     - OnTrial: judgeTrial probes the kubelet, at most once a probe period
//     however often Sync runs, and not before a period has passed since a
//     restart (the old kubelet may still answer). The Node and its pods,
//     as the Observation shows them, are judged on every pass against the
//     snapshot taken just before the restart (pkg/nodeagent/trial). After
//     each healthy probe the kubelet's running configuration (its /configz)
//     is read and compared with the choice (running.go): a field it runs
//     otherwise fails the trial, and the trial does not pass until a read
//     since the restart matched. passTrial moves last-known-good and ends
//     the trial and drain records (Idle); failTrial records the
//     configuration bad (by UID and resourceVersion), so that the next
//     step's choice is last-known-good (RollingBack).
//     A trial is judged by the terms its assignment gave when it started
//     (contract.TrialAnnotation, kept in the trial record; the agent's
//     flags otherwise), and, after a drain, by whether the Node can take
//     back the pods it ran before (kept in the drain record).
//     - RollingBack: rollBack restarts the kubelet into the choice through
//     the same steps, a drain included when the way back needs one, but
//     never held up by it (the configuration it leaves failed), then ends
//     the trial record.
//     - Idle: nothing but the end of a drain record no change holds.
//  4. Drift (checkDrift, before each phase but Downloading). Outside trials
//     the running configuration is compared again once a
//     RunningCheckPeriod: a difference is ConfigDrifted; the file the agent
//     writes no longer holding what it wrote is drift too, and makes the
//     phase Restarting, which restores it in the same pass.
//  5. Cordon (releaseCordon). A Node that carries the agent's cordon while
//     no drain record stands is uncordoned.
//
// Since the phase is derived from the durable records alone, an agent
// killed at any point, or a node that lost power, starts again in the
// phase its records say (TestEveryCombinationOfRecordsSettles).
//
// The restart-or-drain classification of startChange compares the running
// configuration with the same, the new file merged in as the kubelet merges
// it (effective.Predict); the files when the kubelet cannot be read.
//
// A drain follows kubectl drain's rules (drain.Filter): pods no controller
// recreates, and pods with emptyDir data, block it unless the Node's
// switches allow deleting them; it then changes nothing and the
// configuration is recorded as not applied (DrainBlocked).
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
// agent's --settings) and the dangerous fields of the shipped
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
