// Package reliability holds what the reliability suite puts around real
// webhook processes: a load balancer that routes, as a Service's endpoints
// do, only to replicas whose /readyz passes, and counts every request it
// could not answer; and a Secret-volume writer that swaps files as the
// kubelet does.
//
// The suite itself (the _test files) runs a real kube-apiserver and etcd
// through test/e2e/framework: two webhook replicas restarted one after the
// other under continuous /authorize and /validate traffic, and a replica
// whose serving certificate and client CA are replaced under load. It is
// short by default; NODEGUARD_SOAK=1 runs more rounds.
package reliability
