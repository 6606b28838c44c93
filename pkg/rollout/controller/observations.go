package controller

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// observations keeps each cached Node's rollout.ObserveNode reading, made
// once per Node event by the Node informer's handlers, so that a sync reads
// its Nodes without decoding every Node's config-status again. An entry is
// keyed by the very object the informer's cache holds: a sync that finds
// another object under the name (a copy rolloutState.overlay made, or a
// Node whose event has not reached the handler yet) reads that object
// afresh, so the index can make a sync faster and never different.
type observations struct {
	mu     sync.Mutex
	byName map[string]observedNode
}

// observedNode is one Node's reading, without OtherRollouts, which depend
// on the rollouts rather than on the Node.
type observedNode struct {
	node *corev1.Node
	obs  rollout.NodeObservation
	err  error
}

// decodeStatus decodes a config-status annotation's text, or hands out the
// status this reading decoded from the same text (rollout.ObserveNodeWith).
func (e observedNode) decodeStatus(raw string) (*contract.ConfigStatus, error) {
	if e.obs.Status != nil && e.node != nil && e.node.Annotations[contract.ConfigStatusAnnotation] == raw {
		return e.obs.Status, nil
	}
	return contract.ParseConfigStatus(raw)
}

func newObservations() *observations {
	return &observations{byName: map[string]observedNode{}}
}

// set records the reading of node, the object the cache holds now. Setting
// the same object again is harmless: a replayed event costs one reading.
func (o *observations) set(node *corev1.Node) observedNode {
	obs, err := rollout.ObserveNodeWith(node, nil, o.previous(node.Name).decodeStatus)
	entry := observedNode{node: node, obs: obs, err: err}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byName[node.Name] = entry
	return entry
}

// previous returns the Node's recorded reading, the zero one when none.
func (o *observations) previous(name string) observedNode {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byName[name]
}

// remove drops a deleted Node's reading.
func (o *observations) remove(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.byName, name)
}

// of returns node's reading: the recorded one when it was made of this very
// object, else a fresh one (not recorded: node may be a copy).
func (o *observations) of(node *corev1.Node) (rollout.NodeObservation, error) {
	entry := o.previous(node.Name)
	if entry.node == node {
		return entry.obs, entry.err
	}
	return rollout.ObserveNodeWith(node, nil, entry.decodeStatus)
}

// namedSelectors are the selectors of rollouts, by name, sorted by name;
// a rollout whose selector does not parse selects nothing (as
// rollout.OtherRollouts has it).
type namedSelectors []namedSelector

type namedSelector struct {
	name     string
	selector labels.Selector
}

func otherSelectors(rollouts []*v1alpha1.KubeletConfigRollout, self string) namedSelectors {
	var out namedSelectors
	for _, r := range rollouts {
		if r.Name == self {
			continue
		}
		if selector, err := rollout.Selector(r); err == nil {
			out = append(out, namedSelector{name: r.Name, selector: selector})
		}
	}
	slices.SortFunc(out, func(a, b namedSelector) int { return strings.Compare(a.name, b.name) })
	return out
}

// matching names the rollouts that pick a Node with these labels, sorted;
// nil for none.
func (s namedSelectors) matching(set labels.Set) []string {
	var out []string
	for _, ns := range s {
		if ns.selector.Matches(set) {
			out = append(out, ns.name)
		}
	}
	return out
}

// poolBasis names the selector and the other rollouts' selectors a pool is
// read with: a rollout's pool is read afresh when it changes.
func poolBasis(selector labels.Selector, others namedSelectors) string {
	var b strings.Builder
	b.WriteString(selector.String())
	for _, o := range others {
		b.WriteString("\x00" + o.name + "=" + o.selector.String())
	}
	return b.String()
}
