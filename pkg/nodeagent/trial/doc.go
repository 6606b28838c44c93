// Package trial judges a kubelet configuration on trial from the health
// probes the agent makes and from what the Node and the pods bound to it
// show.
//
// The rules of the kubelet's health, all on the time elapsed since boot:
//
//   - Grace: after the kubelet is (re)started, or after the agent itself
//     starts during a trial, the kubelet has Terms.Grace to answer one
//     probe healthy. If it does not, the trial fails.
//   - Failures: once healthy, every failed probe counts; FailureThreshold of
//     them fail the trial, whether they come in a row (a hang, a crash) or
//     scattered (a crash loop that comes back up between probes).
//   - Pass: the trial passes once Terms.Period has elapsed since it started
//     and the latest probe was healthy. A kubelet unhealthy at that moment
//     keeps the trial open until it recovers or reaches the threshold.
//
// A kubelet can answer /healthz and still hurt the node's workloads, so the
// Node and its pods judge the trial too (Terms.Node, each signal can be
// turned off). Each signal is a pure function over two Snapshots: the
// baseline, taken just before the kubelet's restart, and the latest. What
// the node already had before is never held against the configuration.
//
//   - Ready (NotReady): a Node Ready before the restart may be other than
//     Ready for at most NodeSignals.ReadyGrace at a time, the first stretch
//     counted from the restart; the trial does not pass while it is not
//     Ready.
//   - Pressure (RaisedPressure): a pressure condition that was not True
//     before and is now.
//   - Pods (FailedPods): a pod bound to the Node that is Failed with a reason
//     the kubelet gives when it refuses a pod at admission or evicts it
//     (OutOfpods, Evicted, ...) and was not Failed before.
//   - Stopped pods (StoppedPods): a pod with restartPolicy Always that was
//     not over before and is over now with no reason, not being deleted:
//     what a running pod the restarted kubelet rejects at admission looks
//     like once it has been killed.
//   - Allocatable (AllocatableShortfall): cpu, memory, ephemeral-storage or
//     pods allocatable dropped below what the pods still holding resources
//     request.
//   - After a drain (SetAfterDrain, fit.go): the pods the Node ran before a
//     drain emptied it no longer fit its allocatable, as the scheduler fits
//     pods (pkg/podfit); waived, and reported as such (Waived), when the
//     assignment allows the change to shrink the Node.
//
// Resolve applies an assignment's own terms (contract.TrialTerms: a
// period, signals on or off) to the agent's.
//
// The first signal that fires fails the trial with a message that names it
// and the condition or pods ("pod default/x rejected by the kubelet:
// OutOfpods: ...", "the Node raised MemoryPressure=True ...").
//
// Only what this agent process saw counts. A Tracker lives in memory, so
// neither a reboot nor a restart of the agent carries failures over: the
// crash-loop detection of the old Dynamic Kubelet Config was removed upstream
// because it counted exactly those. An agent that starts during a trial
// takes its first look as the baseline.
package trial
