// Package graph keeps, for every node, the set of ConfigMaps the node may
// read, fed by informers on Nodes, Pods and eligible ConfigMaps.
//
// A ConfigMap reaches a node along one of two paths, as docs/reference.md says:
//
//	ConfigMap --assigned to--> Node      (config-source annotation or legacy
//	                                      spec.configSource, and only while
//	                                      the ConfigMap is eligible)
//	ConfigMap --used by--> Pod --bound to--> Node
//
// Unlike the in-tree Node authorizer, which walks a general vertex/edge graph
// under a read/write lock, this graph stores the answer the authorizer needs:
// per node, a reference count for every ConfigMap it can reach. Readers never
// take a lock: each node's view is an immutable map published through an
// atomic pointer, and writers (serialised by one mutex) replace it
// copy-on-write. A busy reader can therefore never delay a write, which is
// how graph lag turns into wrong refusals in large clusters.
//
// Before the initial lists are in (MarkSynced), writers mutate in place and
// readers see nothing at all, so population pays no copying and nothing is
// ever answered from a half-built graph.
//
// Informers keep serving their last state when their watches are cut, so
// a graph fed by them could go on allowing reads revoked during the cut.
// Freshness watches every list and watch the informers make and marks the
// graph stale once one has been cut for longer than a bound; the
// authorizer then gives no opinion where it would have needed the graph to
// allow. Deletes that only a relist reveals arrive as tombstones, which the
// handlers unwrap.
//
// Files: graph.go (read side), write.go (write side), objects.go (what is
// taken from API objects), populator.go (informer wiring), freshness.go and
// monitor.go (staleness), metrics.go.
package graph
