package graph

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// nodeShards splits the node table so that adding or removing a node after
// sync copies a small map, not the whole table.
const nodeShards = 64

// objectKey names a namespaced object. It is comparable, so a lookup builds
// no string and allocates nothing.
type objectKey struct {
	namespace string
	name      string
}

// reachSet maps each ConfigMap a node can reach to the number of paths that
// reach it. Once published to readers it is never modified.
type reachSet map[objectKey]uint32

// nodeTable maps node names to entries. Once published it is never modified.
type nodeTable map[string]*nodeEntry

// nodeEntry is everything the graph knows about one node name. The atomic
// fields are what readers see; the rest is guarded by Graph.mu.
type nodeEntry struct {
	name string
	// reach is nil while the node reaches nothing.
	reach atomic.Pointer[reachSet]
	// info is nil while no Node object of that name exists (pods may name a
	// node before it registers).
	info atomic.Pointer[NodeInfo]
}

// NodeInfo is what the graph took from a Node object. It is immutable.
type NodeInfo struct {
	Name            string
	ResourceVersion string
	Labels          map[string]string
	// KubeletVersion is status.nodeInfo.kubeletVersion as the node reported
	// it; ParsedKubeletVersion is nil when it is empty or does not parse,
	// and then VersionError says why.
	KubeletVersion       string
	ParsedKubeletVersion *version.Version
	VersionError         string
	// VersionParts is ParsedKubeletVersion's major, minor and patch, inline
	// so that the authorizer's minimum-version check reads no further
	// pointer; all zero when ParsedKubeletVersion is nil.
	VersionParts [3]uint
	// Assignment is the node's config source, nil for the local config.
	// An assignment counts as a path only while its ConfigMap is eligible.
	Assignment *contract.Assignment
	// AssignmentError explains a malformed config-source annotation.
	AssignmentError string
}

// Graph answers which ConfigMaps a node may read. The zero value is not
// usable; call New.
type Graph struct {
	seed      maphash.Seed
	shards    [nodeShards]atomic.Pointer[nodeTable]
	published atomic.Bool
	// stale is set by Freshness while an informer has been cut from the
	// apiserver for longer than its bound.
	stale atomic.Bool

	// mu serialises writers. Readers never take it.
	mu sync.Mutex
	// pods holds, for each bound pod that references ConfigMaps, what it
	// contributed, so that an update or delete takes back exactly that.
	pods map[objectKey]podRecord
	// eligible is the set of labelled ConfigMaps.
	eligible map[objectKey]struct{}
	// assignees maps a ConfigMap to the nodes assigned to it, eligible or
	// not, so that a change of eligibility finds its nodes.
	assignees map[objectKey]map[string]struct{}

	metrics *Metrics
}

type podRecord struct {
	node       string
	configMaps []objectKey
}

// New returns an empty, unsynced graph. metrics may be nil.
func New(metrics *Metrics) *Graph {
	g := &Graph{
		seed:      maphash.MakeSeed(),
		pods:      make(map[objectKey]podRecord),
		eligible:  make(map[objectKey]struct{}),
		assignees: make(map[objectKey]map[string]struct{}),
		metrics:   metrics,
	}
	for i := range g.shards {
		t := make(nodeTable)
		g.shards[i].Store(&t)
	}
	return g
}

// Synced reports whether the initial lists are in. Until then every read
// answers as if the graph were empty.
func (g *Graph) Synced() bool { return g.published.Load() }

// Stale reports whether the graph may have missed changes: an informer
// feeding it has had no working list or watch for longer than the bound
// given to NewFreshness. A graph without a Freshness is never stale.
func (g *Graph) Stale() bool { return g.stale.Load() }

func (g *Graph) shard(node string) *atomic.Pointer[nodeTable] {
	return &g.shards[maphash.String(g.seed, node)%nodeShards]
}

func (g *Graph) entry(node string) *nodeEntry {
	if !g.published.Load() {
		return nil
	}
	return (*g.shard(node).Load())[node]
}

// CanReadConfigMap reports whether a path leads from the ConfigMap to the
// node. It takes no lock and allocates nothing.
func (g *Graph) CanReadConfigMap(node, namespace, name string) bool {
	e := g.entry(node)
	if e == nil {
		return false
	}
	reach := e.reach.Load()
	if reach == nil {
		return false
	}
	_, ok := (*reach)[objectKey{namespace: namespace, name: name}]
	return ok
}

// Lookup answers the authorizer's two questions about a node with one walk
// of the node table: what the graph knows of its Node object (nil when
// none), and whether a path leads from the ConfigMap to it. It takes no
// lock and allocates nothing.
func (g *Graph) Lookup(node, namespace, name string) (info *NodeInfo, canRead bool) {
	e := g.entry(node)
	if e == nil {
		return nil, false
	}
	info = e.info.Load()
	if reach := e.reach.Load(); reach != nil {
		_, canRead = (*reach)[objectKey{namespace: namespace, name: name}]
	}
	return info, canRead
}

// Node returns what the graph knows of the Node object, if one exists.
func (g *Graph) Node(name string) (*NodeInfo, bool) {
	e := g.entry(name)
	if e == nil {
		return nil, false
	}
	info := e.info.Load()
	return info, info != nil
}

// NodesAssignedTo lists, in no particular order, the nodes whose
// assignment names the ConfigMap, eligible or not. It takes the writers' lock, so it is for
// admission of ConfigMap changes, not for the authorization hot path.
func (g *Graph) NodesAssignedTo(namespace, name string) []string {
	if !g.published.Load() {
		return nil
	}
	g.mu.Lock()
	nodes := slices.Collect(maps.Keys(g.assignees[objectKey{namespace: namespace, name: name}]))
	g.mu.Unlock()
	return nodes
}
