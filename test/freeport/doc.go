// Package freeport chooses loopback ports for the processes tests start
// (etcd, kube-apiserver, the webhook, agents, kubelet stand-ins): free when
// chosen, below the kernel's ephemeral range so that no outgoing connection
// takes one before its process binds it (or while it restarts), and never
// handed out twice in one test process.
package freeport
