// Package podfit says whether a set of pods fits a Node's allocatable, as
// the scheduler's NodeResourcesFit filter and the kubelet's admission judge
// a pod against the pods already there: no more pods than allocatable pods,
// and for every resource the pods request (cpu, memory, ephemeral-storage,
// hugepages, extended resources) no more than allocatable. A pod's requests
// are counted with k8s.io/component-helpers, which both use: pod-level
// requests where set, else its containers with the init and sidecar rules,
// plus its overhead.
//
// The node agent judges with it whether a drained Node can take back the
// pods it ran before the drain (pkg/nodeagent/trial), and a rollout whether
// its target would leave a Node unable to hold the pods it runs
// (pkg/rollout).
package podfit
