package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
)

// nodeView is how the harness judges one Node against the target, by
// pkg/rollout's rules (doc.go, "How Nodes are judged") but from its own
// reading of the Node, so that the figures do not rest on the controller's
// bookkeeping.
type nodeView struct {
	assigned    bool // config-source names the target
	updated     bool
	unavailable bool
	// cordoned: unschedulable under the agent's mark; draining: its agent
	// reports the phase Draining.
	cordoned, draining bool
}

func judge(node *corev1.Node, source string, target contract.ConfigMapVersion) nodeView {
	v := nodeView{assigned: node.Annotations[contract.ConfigSourceAnnotation] == source}
	ready, configReady, configActive := false, false, false
	for _, c := range node.Status.Conditions {
		switch string(c.Type) {
		case string(corev1.NodeReady):
			ready = c.Status == corev1.ConditionTrue
		case contract.ConditionKubeletConfigReady:
			configReady = c.Status == corev1.ConditionTrue
			configActive = configReady && c.Reason == "ConfigActive"
		}
	}
	st, reported := statusOf(node)
	if reported && v.assigned && configActive {
		v.updated = st.Active != nil && *st.Active == target && st.LastKnownGood != nil && *st.LastKnownGood == target
	}
	// A change under way (ConfigStatus.Phase), whatever configuration it
	// is about, counts as pkg/rollout counts it.
	v.unavailable = !ready || !configReady || (v.assigned && !v.updated) || (reported && st.Phase != "")
	v.cordoned = node.Spec.Unschedulable && drain.CordonedByAgent(node)
	v.draining = reported && st.Phase == contract.PhaseDraining
	return v
}

// observer watches every Node with the admin's credentials and keeps the
// harness's own record of the rollout: when each Node was assigned the
// target and reached Updated (the time its watch event arrived here), how
// often each was assigned, and the most Nodes unavailable at once.
type observer struct {
	source string
	target contract.ConfigMapVersion

	mu             sync.Mutex
	views          map[string]nodeView
	unavailable    int
	maxUnavailable int
	assignments    map[string]int
	// events are assignments and updates in the order they were seen.
	events []nodeEvent
	drain  DrainSeen
}

// DrainSeen is what the harness's Node watch showed of the agents'
// cordons (a drain-class rollout).
type DrainSeen struct {
	// Cordoned, Draining and Released count the Nodes seen at least once
	// cordoned by their agent, reporting the phase Draining, and going
	// from cordoned to not.
	Cordoned int `json:"cordoned"`
	Draining int `json:"draining"`
	Released int `json:"released"`
	// CordonedAvailable counts the times a Node was seen cordoned while
	// the harness judged it available: it must stay 0.
	CordonedAvailable int `json:"cordoned_while_available"`
	// StillCordoned is how many Nodes the last view shows cordoned.
	StillCordoned int `json:"still_cordoned"`
}

type nodeEvent struct {
	at      time.Time
	node    string
	updated bool // else an assignment
	// rv is the Node's resourceVersion in the event that showed it.
	rv string
}

func newObserver(target contract.ConfigMapVersion) *observer {
	return &observer{
		source: target.Namespace + "/" + target.Name, target: target,
		views: map[string]nodeView{}, assignments: map[string]int{},
	}
}

// run lists the Nodes (the state before the rollout, which records no
// events) and then watches them until ctx ends; ready is closed after the
// list.
func (o *observer) run(ctx context.Context, admin kubernetes.Interface, ready chan<- struct{}) error {
	list, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	for i := range list.Items {
		o.see(&list.Items[i], time.Time{})
	}
	close(ready)
	rv := list.ResourceVersion
	for ctx.Err() == nil {
		w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			pause(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("the harness's Node watch failed and cannot resume without losing events: %v", ev.Object)
			}
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			rv = node.ResourceVersion
			if ev.Type != watch.Bookmark {
				o.see(node, time.Now())
			}
		}
		w.Stop()
	}
	return nil
}

func (o *observer) see(node *corev1.Node, at time.Time) {
	v := judge(node, o.source, o.target)
	o.mu.Lock()
	defer o.mu.Unlock()
	was, known := o.views[node.Name]
	o.views[node.Name] = v
	if was.unavailable != v.unavailable || !known {
		if v.unavailable {
			o.unavailable++
		} else if known {
			o.unavailable--
		}
	}
	o.maxUnavailable = max(o.maxUnavailable, o.unavailable)
	if at.IsZero() {
		return
	}
	if v.cordoned && !was.cordoned {
		o.drain.Cordoned++
	}
	if v.draining && !was.draining {
		o.drain.Draining++
	}
	if was.cordoned && !v.cordoned {
		o.drain.Released++
	}
	if v.cordoned && !v.unavailable {
		o.drain.CordonedAvailable++
	}
	if v.assigned && !was.assigned {
		o.assignments[node.Name]++
		o.events = append(o.events, nodeEvent{at: at, node: node.Name, rv: node.ResourceVersion})
	}
	if v.updated && !was.updated {
		o.events = append(o.events, nodeEvent{at: at, node: node.Name, updated: true, rv: node.ResourceVersion})
	}
}

// observed is a copy of what the observer recorded.
type observed struct {
	maxUnavailable int
	assignments    map[string]int
	events         []nodeEvent
	updated        int
	drain          DrainSeen
}

func (o *observer) snapshot() observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := observed{maxUnavailable: o.maxUnavailable, assignments: map[string]int{}, events: append([]nodeEvent(nil), o.events...), drain: o.drain}
	for k, v := range o.assignments {
		s.assignments[k] = v
	}
	for _, v := range o.views {
		if v.updated {
			s.updated++
		}
		if v.cordoned {
			s.drain.StillCordoned++
		}
	}
	return s
}

// catchUp waits, up to timeout, until the observer has seen nodes Nodes
// updated.
func catchUp(ctx context.Context, o *observer, nodes int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for o.snapshot().updated < nodes && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}
