package admission

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/cache"
)

// forgetDeletedAfter is how long the record of a deleted Node is kept. A
// node may delete its own Node and register again; the record outlives
// that, so re-registering does not wash a lowered version clean. A Node
// that comes back later also comes back without its assignment (only an
// administrator, or self-assignment where the settings allow it, gives it
// one), and only assigned Nodes count in feature-gates.
const forgetDeletedAfter = time.Hour

// KubeletVersions remembers the highest kubelet version each Node has
// reported, by name, since the webhook started, so that feature-gates can tell a
// report it may trust from one a node could use to steer it.
//
// The kubelet version is self-reported. Feature-gates uses it so that a
// configuration is never given to a kubelet that cannot run it; left alone,
// that hands every node a veto over the configurations it shares with
// others (report an old version, and every edit of the pool's ConfigMap is
// refused "for" that node), and a node reporting an unparseable version
// made feature-gates skip its checks. So a report is trusted for a shared
// configuration only when it parses and is not below a version the same
// Node reported before. A Node whose report is not trusted is marked: it no
// longer refuses an edit for others, and the ConfigMaps assigned to it must
// instead be ones some kubelet version nodeguard knows can run, which no
// report can change. Its own assignments are still judged by its report
// when that parses (a refusal then concerns that node alone), and by every
// known version when it does not.
//
// The record lives in memory: each replica builds its own from its Node
// informer, and a replica started after a Node lowered its version trusts
// what it sees. It is safe for concurrent use.
type KubeletVersions struct {
	now func() time.Time

	mu      sync.Mutex
	records map[string]*versionRecord
}

type versionRecord struct {
	highest *version.Version
	// deleted is when the Node was deleted; zero while it exists.
	deleted time.Time
}

// NewKubeletVersions returns an empty record.
func NewKubeletVersions() *KubeletVersions {
	return &KubeletVersions{now: time.Now, records: map[string]*versionRecord{}}
}

// Observe records what a Node reports.
func (k *KubeletVersions) Observe(node *corev1.Node) {
	if node == nil {
		return
	}
	parsed, err := version.ParseGeneric(node.Status.NodeInfo.KubeletVersion)
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.records[node.Name]
	if r == nil {
		r = &versionRecord{}
		k.records[node.Name] = r
	}
	r.deleted = time.Time{}
	if err == nil && (r.highest == nil || r.highest.LessThan(parsed)) {
		r.highest = parsed
	}
}

// forget marks a Node deleted, and drops the records of Nodes deleted
// longer than forgetDeletedAfter ago.
func (k *KubeletVersions) forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if r := k.records[name]; r != nil {
		r.deleted = now
	}
	for n, r := range k.records {
		if !r.deleted.IsZero() && now.Sub(r.deleted) > forgetDeletedAfter {
			delete(k.records, n)
		}
	}
}

// EventHandler feeds the record from a Node informer.
func (k *KubeletVersions) EventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.observeObject(obj) },
		UpdateFunc: func(_, obj any) { k.observeObject(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				k.forget(node.Name)
			}
		},
	}
}

func (k *KubeletVersions) observeObject(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		k.Observe(node)
	}
}

// distrust says why a Node's reported version may not steer feature-gates for a
// configuration it shares with others; "" when it may.
func (k *KubeletVersions) distrust(name, reported string, parsed *version.Version) string {
	if parsed == nil {
		return fmt.Sprintf("reports no parseable kubelet version %q", reported)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.records[name]; r != nil && r.highest != nil && parsed.LessThan(r.highest) {
		return fmt.Sprintf("reported kubelet %s after %s", reported, r.highest)
	}
	return ""
}
