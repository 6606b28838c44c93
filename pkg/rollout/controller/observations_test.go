package controller

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardlisters "github.com/nodeguard/nodeguard/pkg/generated/listers/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// TestObservationsMatchFullReading drives the Node handlers with arbitrary
// event sequences, as an informer delivers them (each version a new object,
// deletions sometimes as tombstones, events sometimes replayed), and checks
// after every event that each rollout's pool, brought up to date from the
// Nodes the handlers touched (refreshPool), holds what reading every Node
// afresh gives (rollout.ObserveSelected), that the index holds the cached
// object of every Node and nothing of a deleted one, and that a copy of a
// cached Node (as rolloutState.overlay makes) is read afresh. Some steps
// skip the check, so that touches pile up between two refreshes. A pure
// test: the handlers' input is what makes it, no apiserver needed.
func TestObservationsMatchFullReading(t *testing.T) {
	rollouts := []*v1alpha1.KubeletConfigRollout{
		testRollout("blue", map[string]string{"pool": "blue"}),
		testRollout("green", map[string]string{"pool": "green"}),
		testRollout("all", map[string]string{"fleet": "yes"}),
	}
	for seed := range uint64(50) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			c := handlerController(t, rollouts)
			store := map[string]*corev1.Node{}
			version := 0
			for step := range 300 {
				name := "n" + strconv.Itoa(rng.IntN(8))
				old, exists := store[name]
				version++
				switch op := rng.IntN(10); {
				case !exists || op == 0:
					// An add, or, for a Node the store holds, a relist's add.
					node := randomNode(rng, name, version)
					store[name] = node
					must(t, c.nodes.Add(node))
					if exists {
						c.updateNode(old, node)
					} else {
						c.addNode(node)
					}
				case op == 1:
					delete(store, name)
					must(t, c.nodes.Delete(old))
					if rng.IntN(2) == 0 {
						c.deleteNode(cache.DeletedFinalStateUnknown{Key: name, Obj: old})
					} else {
						c.deleteNode(old)
					}
				case op == 2:
					// A resync or a replay: the same object again.
					c.updateNode(old, old)
				default:
					node := randomNode(rng, name, version)
					if rng.IntN(3) == 0 {
						// A heartbeat: only the resourceVersion moves.
						node = old.DeepCopy()
						node.ResourceVersion = strconv.Itoa(version)
					}
					store[name] = node
					must(t, c.nodes.Update(node))
					c.updateNode(old, node)
				}
				if rng.IntN(3) > 0 {
					checkObservations(t, step, c, store, rollouts)
				}
			}
		})
	}
}

// A Node's config-status is decoded once per text: a later version with
// the same text (a heartbeat, the controller's own patch) and a copy of it
// share the status decoded before; another text is decoded anew.
func TestObservationsDecodeAStatusOncePerText(t *testing.T) {
	o := newObservations()
	node := readyNode("a", map[string]string{})
	node.ResourceVersion = "1"
	node.Annotations = map[string]string{contract.ConfigStatusAnnotation: `{"phase":"Draining","pendingPods":["default/web-0"]}`}
	first := o.set(node)

	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	again := o.set(heartbeat)
	copied, _ := o.of(heartbeat.DeepCopy())
	if first.obs.Status == nil || again.obs.Status != first.obs.Status || copied.Status != first.obs.Status {
		t.Errorf("the same text decoded again: statuses %p, %p, %p", first.obs.Status, again.obs.Status, copied.Status)
	}

	reported := heartbeat.DeepCopy()
	reported.ResourceVersion = "3"
	reported.Annotations[contract.ConfigStatusAnnotation] = `{"phase":"` + contract.PhaseRestarting + `"}`
	changed := o.set(reported)
	if changed.obs.Status == first.obs.Status || changed.obs.Status.Phase != contract.PhaseRestarting {
		t.Errorf("a new text reads %+v, want the new phase", changed.obs.Status)
	}

	reported = reported.DeepCopy()
	reported.ResourceVersion = "4"
	reported.Annotations[contract.ConfigStatusAnnotation] = "{"
	if broken := o.set(reported); broken.err == nil || broken.obs.Status != nil {
		t.Errorf("an unreadable text reads %+v, %v; want no status and the error", broken.obs.Status, broken.err)
	}
}

func checkObservations(t *testing.T, step int, c *Controller, store map[string]*corev1.Node, rollouts []*v1alpha1.KubeletConfigRollout) {
	t.Helper()
	var nodes []*corev1.Node
	for _, node := range store {
		nodes = append(nodes, node)
		entry, ok := c.observed.byName[node.Name]
		if !ok || entry.node != node {
			t.Fatalf("step %d: the index does not hold the cached object of %s", step, node.Name)
		}
	}
	for name := range c.observed.byName {
		if _, ok := store[name]; !ok {
			t.Fatalf("step %d: the index holds %s, which was deleted", step, name)
		}
	}
	if len(nodes) > 0 {
		// A copy, as overlay makes, with an annotation of its own and the
		// others (the config-status among them) as the cache has them.
		changed := nodes[0].DeepCopy()
		changed.Annotations[contract.ConfigSourceAnnotation] = "kubelet-configs/other"
		want, wantErr := rollout.ObserveNode(changed, nil)
		got, gotErr := c.observed.of(changed)
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("step %d: a copy of %s reads %+v (%v), want %+v (%v)", step, changed.Name, got, gotErr, want, wantErr)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range rollouts {
		selector, err := rollout.Selector(r)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := rollout.ObserveSelected(selector, r.Name, rollouts, nodes)
		st := c.state(r.Name)
		_, gotErr := c.refreshPool(r.Name, selector, rollouts, st, time.Unix(0, 0))
		var got []rollout.NodeObservation
		for _, name := range st.pool.Names() {
			obs, _ := st.pool.Observation(name)
			got = append(got, obs)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d, rollout %s: the pool holds\n%+v\nread afresh\n%+v", step, r.Name, got, want)
		}
		if gotErr != nil && wantErr == nil {
			// The pool reads only the Nodes touched: an error says one of
			// them is unreadable, which a full reading finds too.
			t.Fatalf("step %d, rollout %s: error %v through the pool, none read afresh", step, r.Name, gotErr)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// handlerController is a Controller with what the Node handlers use: the
// index, a queue, and the rollouts' lister.
func handlerController(t *testing.T, rollouts []*v1alpha1.KubeletConfigRollout) *Controller {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, r := range rollouts {
		if err := indexer.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(queue.ShutDown)
	return &Controller{
		observed: newObservations(), queue: queue, rolloutLister: nodeguardlisters.NewKubeletConfigRolloutLister(indexer),
		nodes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), states: map[string]*rolloutState{}, expectationsTimeout: time.Minute,
		clock: clocktesting.NewFakeClock(time.Unix(0, 0)),
	}
}

func testRollout(name string, selector map[string]string) *v1alpha1.KubeletConfigRollout {
	return &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: selector},
			ConfigMapRef: contract.ConfigMapRef{Namespace: "kubelet-configs", Name: name},
		},
	}
}

// randomNode is a Node with labels and annotations drawn from values that
// change its reading: pools, assignments, statuses (malformed included),
// bookkeeping, readiness and the agent's condition.
func randomNode(rng *rand.Rand, name string, version int) *corev1.Node {
	pick := func(values ...string) string { return values[rng.IntN(len(values))] }
	node := readyNode(name, map[string]string{})
	node.ResourceVersion = strconv.Itoa(version)
	if pool := pick("", "blue", "green"); pool != "" {
		node.Labels["pool"] = pool
	}
	if rng.IntN(2) == 0 {
		node.Labels["fleet"] = "yes"
	}
	node.Annotations = map[string]string{}
	set := func(key string, values ...string) {
		if value := pick(values...); value != "-" {
			node.Annotations[key] = value
		}
	}
	set(contract.ConfigSourceAnnotation, "-", "kubelet-configs/blue", "kubelet-configs/green", "", "not a ref")
	set(contract.ConfigStatusAnnotation, "-", "{", `{"phase":"Draining","pendingPods":["default/web-0"]}`,
		`{"assigned":{"namespace":"kubelet-configs","name":"blue","uid":"u1","resourceVersion":"3"},"active":{"namespace":"kubelet-configs","name":"blue","uid":"u1","resourceVersion":"3"}}`)
	set(contract.RolloutAnnotation, "-", "blue", "green")
	set(contract.PreviousConfigSourceAnnotation, "-", "", "kubelet-configs/old")
	set(contract.TrialPassedAnnotation, "-", "kubelet-configs/blue@3")
	set(contract.TrialEndsAnnotation, "-", "2026-12-06T10:00:00Z", "tomorrow")
	if rng.IntN(3) == 0 {
		node.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	if rng.IntN(2) == 0 {
		node.Status.Conditions[1] = corev1.NodeCondition{
			Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionStatus(pick("True", "False")), Reason: pick("ConfigActive", "RolledBack"), Message: "m",
		}
	} else {
		node.Status.Conditions = node.Status.Conditions[:1]
	}
	return node
}
