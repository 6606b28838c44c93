// Package rollout holds the decisions of the KubeletConfigRollout
// controller (docs/reference.md, "Pool rollouts") as a pure function: Decide
// takes a rollout, the identity of its target ConfigMap and what the
// selected Nodes show, and returns how each Node stands, which Nodes to
// assign the target next, which to revert, and the status to write. It
// does no I/O, reads no clock, and keeps no state between calls.
//
// Everything Decide needs is on the Nodes (the assignment, the agent's
// nodeguard.dev/config-status and KubeletConfigReady condition, the
// rollout's own bookkeeping annotations) and in the rollout's status, so a
// restarted or failed-over controller makes the same decisions as the one
// before it, and a Node that already carries the target is never assigned
// it again. ObserveNode reads a Node into what Decide needs; Selector and
// OtherRollouts tell which Nodes a rollout picks and which other rollouts
// pick the same Node.
//
// A Pool is the same decision kept up to date one Node at a time, for a
// controller whose pool holds thousands of Nodes: each Node set into it is
// judged again at the next decision, and what a decision reads of the
// Nodes (the counts, the Nodes of each state in name order, the Nodes
// whose trial period ends next) is updated from that Node's change, so a
// decision costs what changed rather than the pool. Pool.Decide decides
// exactly as Decide over the same Nodes (Decide is a Pool filled at once;
// TestPoolDecidesAsDecide holds the two together), but returns only the
// verdicts that changed since its previous decision. A new target, or a
// clock that goes back, has it judge every Node again; a failed rollout
// walks the pool to revert it.
//
// # How Nodes are judged
//
// Against the target (namespace, name, uid, resourceVersion), a selected
// Node is
//
//	Updated      assigned the target, and its agent reports the target both
//	             active and last-known-good; a Node this rollout assigned,
//	             no sooner than the trial period after the assignment
//	             (nodeguard.dev/trial-ends)
//	InTrial      assigned the target and not yet updated (downloading,
//	             draining, restarting, trying it, retrying a failed write,
//	             or not reported yet)
//	Failed       moved to the target by this rollout, in its trial there
//	             (not yet marked as passed), and its agent reports that the
//	             target failed validation (ValidationFailed) or its trial
//	             (RolledBack), or that the drain it needed timed out
//	             (DrainTimedOut) or was blocked by pods it may not delete
//	             (DrainBlocked)
//	Degraded     reports the target failed the same way outside such a
//	             trial: a Node the rollout did not move, or one it saw pass;
//	             or took the target and its agent reports that its kubelet
//	             no longer runs it (ConfigDrifted)
//	Skipped      admission refused it the target for its own state
//	Pending      not assigned the target; it gets it when its turn comes
//	Unavailable  not assigned the target, and not Ready or its agent
//	             reports a problem: it is not assigned until it recovers,
//	             because a trial on a Node that cannot be watched proves
//	             nothing
//	Reverting    moved by this failed rollout and being re-pointed to its
//	             previous source
//	Untouched    not assigned the target, and the rollout has failed: it
//	             is left as it is
//	Conflicted   selected by another rollout too; both leave it alone and
//	             say so in their Progressing condition
//
// A Node counts against maxUnavailable while it is not Ready, is in trial,
// has failed, its KubeletConfigReady condition is other than True, or its
// agent reports a change under way (ConfigStatus.Phase: draining,
// restarting, on trial), whichever configuration that is about, Nodes
// already down at the start included; its Detail then says the phase and
// the pods a drain waits on. maxUnavailable as a percentage is of the selected Nodes,
// rounded down as a Deployment's maxUnavailable is, but never below one
// Node, so that a rollout always moves.
//
// # The order of things
//
// The canary Nodes (spec.canary, at most as many as there are Nodes to
// update) take the target first, alone: no other Node is assigned it until
// that many Nodes are updated. The canary is also held to maxUnavailable.
// After it, Pending Nodes are assigned in name order whenever fewer than
// maxUnavailable Nodes are unavailable, Nodes that join the selection
// later included. A pause stops new assignments and nothing else.
//
// Each assignment carries spec.drain as nodeguard.dev/drain (removed for
// Auto, the agents' default), spec.drainOptions as the drain's switches,
// spec.trial as nodeguard.dev/trial, and the end of its trial period as
// nodeguard.dev/trial-ends (spec.trial.periodSeconds, else
// Input.DefaultTrialPeriod); a revert removes them with the bookkeeping.
// Input.Unfit, which the caller computes with WouldNotFit, is reported as
// status.unfitNodes for the Nodes not yet assigned the target.
//
// A Node speaks for itself only. A Failed Node, or an admission refusal
// the controller feeds back in Input.Refusals that is not about the Node's
// own state, fails the rollout for its target; a Degraded Node is shown
// and counted unavailable, and a refusal about the Node's own state
// (Refusal.NodeState) makes it Skipped, listed in the status for the
// target and generation. Decision.Record marks each Node the rollout moved
// that it sees Updated with the version it passed (TrialPassedValue). When
// no Node is assigned or newly Updated for spec.progressDeadlineSeconds,
// Progressing turns False with reason ProgressDeadlineExceeded, and nothing
// else changes; Decision.RecheckAfter says when that falls due. A rollout
// whose Nodes all took the target, some Degraded since, is NodesDegraded
// instead: nothing is left to assign, and no deadline applies.
//
// A failure of the rollout names the Node and the reason in the Failed
// condition, nothing more is assigned, and with
// onFailure Revert every Node this rollout moved to the target goes back to
// its previous source. The failure is kept in the status, and stays until
// the target changes: a new resourceVersion of the ConfigMap or a new
// spec.configMapRef starts over from the canary (once a revert under way
// has finished).
//
// A ConfigMap that changes in place reaches every Node already assigned it
// at once, through their agents; the rollout can hold back only the Nodes
// not yet assigned it. Immutable ConfigMaps, one per revision (kubectl
// nodeguard create), keep the whole rollout paced.
//
// # Applying a decision
//
// Write the status first, then the Node changes, whenever
// Decision.ChangesState says so: a revert must never run ahead of the
// Failed condition that explains it, since the reverted Nodes no longer
// show the failure, and a change of state is fenced by the status write's
// resourceVersion. The next Nodes of a batch going on in the same state
// may be patched before or while the status is written, and such statuses
// may be folded into the last. Each Change carries the resourceVersion of
// the Node it was decided on, so a Node that moved since fails the patch
// instead of being overwritten. The controller must also decide on its own
// writes, not on a cache that does not show them yet (client-go's
// expectations pattern): deciding on a stale cache would see an assigned
// Node as Pending and could pick another one beside it, or lose a failure
// the status recorded.
package rollout
