// Package controller runs the KubeletConfigRollout controller: it watches
// KubeletConfigRollouts, Nodes and the identity of eligible ConfigMaps,
// asks its rollout.Pool what to do for each rollout, and carries the
// decision out against the apiserver. It holds no state a restart would
// miss: everything a decision needs is on the Nodes and in the rollouts'
// status, and what this package keeps in memory about a rollout (its
// rolloutState: the pool, the writes the caches do not show yet, refusals
// not yet written, what Events and metrics compare with) is rebuilt or
// harmlessly lost.
//
// # Informers and the queue
//
// Nodes come from a typed informer whose transform drops managedFields,
// the largest part of a Node that Decide never reads. Rollouts come from
// the generated informer factory and lister (pkg/generated), so the cache
// holds typed objects and no handler converts unstructured maps; their
// status is written with the generated clientset's UpdateStatus.
// ConfigMaps are watched through a metadata-only informer restricted to
// eligible ones (nodeguard.dev/kubelet-config=true): a rollout needs its
// target's uid and resourceVersion, never its data, and a ConfigMap
// without the label can never be assigned, so it reads as absent
// (TargetNotFound).
//
// Every event enqueues the names of the rollouts it concerns into one
// rate-limited workqueue: a Node event the rollouts whose selectors pick
// its old or its new labels, a ConfigMap event the rollouts that name it,
// a rollout event the rollout itself (and, when its spec changed or it
// came or went, every rollout, since which Nodes are shared may have
// changed). Each Node event also marks the Node as touched for those
// rollouts, whose next sync reads it again. A Node update that changes
// neither its labels nor anything Decide reads (a kubelet's heartbeat,
// nearly every update) is marked and enqueues nothing: on a large pool
// those alone would keep a rollout syncing back to back. A pod event marks
// its Node for the report of unfit Nodes (fit.go) and wakes no rollout.
// Handlers unwrap DeletedFinalStateUnknown tombstones, so a replayed or
// repeated event costs one idempotent sync.
//
// The Node handlers also read each Node once per event into what Decide
// reads of it (observations.go, rollout.ObserveNodeWith), kept by name
// beside the very object the cache holds: a sync takes that reading instead
// of decoding every selected Node's annotations again, and reads afresh any
// object it does not match (a copy with the controller's unseen patches
// applied). A reading decodes the config-status annotation only when its
// text differs from the Node's last reading, which most updates (a
// heartbeat, the controller's own patch) leave as it was. So the index
// makes a sync cheaper, never different.
//
// # A sync
//
// A sync of one rollout (sync.go) follows pkg/rollout's "Applying a
// decision" and reads top to bottom: observe, rollout.Decide, carry out.
// What the controller keeps in memory about a rollout between its syncs is
// one rolloutState (state.go), made on the rollout's first sync and
// dropped, with its metrics, by forget when a sync finds the rollout gone:
// the rollout's pool (rollout.Pool: its selected Nodes, their verdicts and
// what a decision reads of them) and the Nodes touched since, the last
// status write the cache may not show yet and the routine status not yet
// written (status.go), the Node patches the cache does not show yet, the
// refusals not yet in the status, the report of unfit Nodes, the
// rollout's patch slots, and the last verdicts, Progressing reason and
// batches that Events and metrics are recorded against. None of a sync's
// work grows with the pool but for a changed selector (the pool is read
// afresh), a new target (every Node judged and fitted again) and a failed
// rollout's revert.
//
// Observe:
//
//  1. Read the rollout as this controller's last status write left it
//     (the apiserver's answer) until the cache shows that write, at the
//     resourceVersion it returned or a later one (resourceVersions compare
//     since Kubernetes 1.35); a deadline returns to the cache if it never
//     does. A decision reads the status and writes the next over it, and
//     so waits on no watch delivery of its own writes.
//  2. Read the Nodes touched since the last decision from the cache into
//     the pool, each the controller has patched and the cache does not
//     show yet as the patch leaves it: in flight, or answered and not yet
//     delivered. So a decision never waits for a patch's round trip, a
//     Node being assigned counts as unavailable from the moment its patch
//     is sent, and no Node is picked twice. A Node no longer selected
//     leaves the pool.
//  3. Collect the admission refusals of the current target not yet
//     recorded in the status, and fit again the Nodes touched or whose
//     pods changed, for the decision.
//
// Decide (rollout.Pool.Decide), then carry out:
//
//  4. Write the status (UpdateStatus, retried on conflicts unless the spec
//     changed meanwhile) when it differs from what is stored. A decision
//     that reverts or changes the rollout's state
//     (rollout.Decision.ChangesState) writes it within the sync, before
//     any Node is patched. Made over the rollout's resourceVersion, it
//     fails once the rollout was paused, edited or deleted since, before
//     any Node moves. Such a decision first waits for the assignments in
//     flight: the status must follow their outcome, and a revert must
//     cover them. A status that only counts what moved goes to the
//     rollout's background writer (status.go), which writes the last one
//     decided at most once a Config.StatusInterval: there it would fence
//     little (a pause can land just after it as well as before), and
//     written by the sync it would cost every reaction a round trip. An
//     unchanged status is not written, and fences nothing.
//  5. Patch the Nodes (patches.go, all of the Node patch code), each a
//     JSON merge patch carrying the resourceVersion it was decided on,
//     under this controller's field manager. Reverts are patched within
//     the sync. Assignments go out in the background and the sync ends
//     without them, so that a Node passing its trial meanwhile frees its
//     slot for the next at once; their answers wake the rollout. They go
//     through a sliding window of Config.MaxPatchesInFlight, the next sent
//     as soon as one is answered while it is fewer than a window past the
//     oldest unanswered, and a rollout never has more than a window of
//     assignments and reverts in flight across its syncs; its trial-passed
//     marks have a window of their own, so that none holds up an
//     assignment.
//     Until admission has let the target onto one selected Node, the
//     assignments start one at a time and widen with each that applies. A
//     conflict requeues the rollout; an admission refusal (a webhook's or
//     an admission policy's denial, or Invalid) stops the assignments
//     (those in flight are awaited), is kept as a rollout.Refusal for that
//     Node and fed to the next Decide, which fails the rollout with
//     AssignmentRefused.
//
// Events (events.k8s.io) go on the rollout when its state changes or it
// fails, and on every Node it assigns or reverts. Metrics are in
// metrics.go.
package controller
