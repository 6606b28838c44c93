package graph

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every writer below is idempotent: applying the same object twice, or a
// delete for something unknown, changes nothing. Informer resyncs and
// replayed tombstones rely on that.

// MarkSynced publishes the graph to readers. Writers mutate in place before
// it and copy on write after it.
func (g *Graph) MarkSynced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.published.Store(true)
	g.metrics.setSynced(true)
}

// UpsertNode records a Node: its kubelet version, labels and assignment.
func (g *Graph) UpsertNode(node *corev1.Node) {
	info := nodeInfoFrom(node)
	defer g.metrics.observeWrite("upsert_node", time.Now())
	g.mu.Lock()
	defer g.mu.Unlock()

	e := g.entryLocked(info.Name, true)
	old := e.info.Load()
	if old != nil && old.ResourceVersion == info.ResourceVersion && info.ResourceVersion != "" {
		return
	}
	g.reassignLocked(e, assignedConfigMap(old), assignedConfigMap(info))
	e.info.Store(info)
}

// DeleteNode forgets a Node object. Pods still bound to the name keep their
// paths until they are deleted themselves.
func (g *Graph) DeleteNode(name string) {
	defer g.metrics.observeWrite("delete_node", time.Now())
	g.mu.Lock()
	defer g.mu.Unlock()

	e := g.entryLocked(name, false)
	if e == nil {
		return
	}
	g.reassignLocked(e, assignedConfigMap(e.info.Load()), nil)
	e.info.Store(nil)
	g.dropIfEmptyLocked(e)
}

// UpsertPod records the ConfigMaps a bound pod references. Unbound pods
// reach no node and are ignored.
func (g *Graph) UpsertPod(pod *corev1.Pod) {
	key := objectKey{namespace: pod.Namespace, name: pod.Name}
	var configMaps []objectKey
	if pod.Spec.NodeName != "" {
		configMaps = podConfigMaps(pod)
	}
	defer g.metrics.observeWrite("upsert_pod", time.Now())
	g.mu.Lock()
	defer g.mu.Unlock()

	old, had := g.pods[key]
	if had && old.node == pod.Spec.NodeName && slices.Equal(old.configMaps, configMaps) {
		return
	}
	if had {
		g.removePodLocked(key, old)
	}
	if len(configMaps) == 0 {
		return
	}
	e := g.entryLocked(pod.Spec.NodeName, true)
	g.applyLocked(e, configMaps, nil)
	// Share the entry's copy of the node name rather than keep the pod's.
	g.pods[key] = podRecord{node: e.name, configMaps: configMaps}
	g.metrics.setPods(len(g.pods))
}

// DeletePod takes back what a pod contributed.
func (g *Graph) DeletePod(namespace, name string) {
	defer g.metrics.observeWrite("delete_pod", time.Now())
	g.mu.Lock()
	defer g.mu.Unlock()

	key := objectKey{namespace: namespace, name: name}
	if old, had := g.pods[key]; had {
		g.removePodLocked(key, old)
	}
}

// UpsertConfigMap records whether a ConfigMap is eligible. Only metadata is
// needed: the graph never looks at a ConfigMap's data.
func (g *Graph) UpsertConfigMap(obj metav1.Object) {
	g.setEligible(objectKey{namespace: obj.GetNamespace(), name: obj.GetName()}, isEligible(obj.GetLabels()))
}

// DeleteConfigMap records that a ConfigMap is gone, which ends every
// assignment path from it.
func (g *Graph) DeleteConfigMap(namespace, name string) {
	g.setEligible(objectKey{namespace: namespace, name: name}, false)
}

func (g *Graph) setEligible(key objectKey, eligible bool) {
	defer g.metrics.observeWrite("upsert_configmap", time.Now())
	g.mu.Lock()
	defer g.mu.Unlock()

	_, was := g.eligible[key]
	if was == eligible {
		return
	}
	if eligible {
		g.eligible[key] = struct{}{}
	} else {
		delete(g.eligible, key)
	}
	g.metrics.setEligible(len(g.eligible))
	for node := range g.assignees[key] {
		e := g.entryLocked(node, true)
		if eligible {
			g.applyLocked(e, []objectKey{key}, nil)
		} else {
			g.applyLocked(e, nil, []objectKey{key})
		}
	}
}

func (g *Graph) removePodLocked(key objectKey, rec podRecord) {
	delete(g.pods, key)
	g.metrics.setPods(len(g.pods))
	if e := g.entryLocked(rec.node, false); e != nil {
		g.applyLocked(e, nil, rec.configMaps)
	}
}

// reassignLocked moves a node's assignment path from one ConfigMap to
// another; either may be nil.
func (g *Graph) reassignLocked(e *nodeEntry, from, to *objectKey) {
	if from != nil && to != nil && *from == *to {
		return
	}
	if from != nil {
		if nodes := g.assignees[*from]; nodes != nil {
			delete(nodes, e.name)
			if len(nodes) == 0 {
				delete(g.assignees, *from)
			}
		}
		if _, ok := g.eligible[*from]; ok {
			g.applyLocked(e, nil, []objectKey{*from})
		}
	}
	if to != nil {
		nodes := g.assignees[*to]
		if nodes == nil {
			nodes = make(map[string]struct{})
			g.assignees[*to] = nodes
		}
		nodes[e.name] = struct{}{}
		if _, ok := g.eligible[*to]; ok {
			g.applyLocked(e, []objectKey{*to}, nil)
		}
	}
}

// applyLocked adds one path for each of add and takes one back for each of
// remove, publishing a new reach set for the node.
func (g *Graph) applyLocked(e *nodeEntry, add, remove []objectKey) {
	if len(add) == 0 && len(remove) == 0 {
		return
	}
	published := g.published.Load()
	var reach reachSet
	if old := e.reach.Load(); old != nil {
		reach = *old
		if published {
			reach = maps.Clone(reach)
		}
	}
	if reach == nil {
		reach = make(reachSet, len(add))
	}
	for _, k := range add {
		reach[k]++
	}
	for _, k := range remove {
		switch n := reach[k]; {
		case n > 1:
			reach[k] = n - 1
		case n == 1:
			delete(reach, k)
		}
	}
	if len(reach) == 0 {
		e.reach.Store(nil)
		g.dropIfEmptyLocked(e)
		return
	}
	e.reach.Store(&reach)
}

// entryLocked finds the entry for a node name, creating it if asked.
func (g *Graph) entryLocked(name string, create bool) *nodeEntry {
	p := g.shard(name)
	table := *p.Load()
	if e := table[name]; e != nil || !create {
		return e
	}
	e := &nodeEntry{name: name}
	if g.published.Load() {
		table = maps.Clone(table)
		table[name] = e
		p.Store(&table)
	} else {
		table[name] = e
	}
	g.metrics.addNodes(1)
	return e
}

// dropIfEmptyLocked removes an entry that no longer carries anything, so a
// churning cluster does not leak node names.
func (g *Graph) dropIfEmptyLocked(e *nodeEntry) {
	if e.reach.Load() != nil || e.info.Load() != nil {
		return
	}
	p := g.shard(e.name)
	table := *p.Load()
	if table[e.name] != e {
		return
	}
	if g.published.Load() {
		table = maps.Clone(table)
		delete(table, e.name)
		p.Store(&table)
	} else {
		delete(table, e.name)
	}
	g.metrics.addNodes(-1)
}
