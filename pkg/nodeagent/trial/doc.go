// Package trial judges a kubelet configuration on trial from the health
// probes the agent makes.
//
// The rules, all on the time elapsed since boot:
//
//   - Grace: after the kubelet is (re)started, or after the agent itself
//     starts during a trial, the kubelet has Policy.Grace to answer one
//     probe healthy. If it does not, the trial fails.
//   - Failures: once healthy, every failed probe counts; FailureThreshold of
//     them fail the trial, whether they come in a row (a hang, a crash) or
//     scattered (a crash loop that comes back up between probes).
//   - Pass: the trial passes once Policy.Period has elapsed since it started
//     and the latest probe was healthy. A kubelet unhealthy at that moment
//     keeps the trial open until it recovers or reaches the threshold.
//
// Only probes made by this agent process count. A Tracker lives in memory,
// so neither a reboot nor a restart of the agent carries failures over: the
// crash-loop detection of the old Dynamic Kubelet Config was removed upstream
// because it counted exactly those.
package trial
