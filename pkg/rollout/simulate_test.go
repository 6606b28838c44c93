package rollout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// cluster plays the apiserver and the agents around Decide: it applies a
// decision as a controller would (the status, then the Node patches,
// each refused if the Node moved since it was decided on; a controller
// that dies between them is played by not writing the status), and each round
// lets every agent take one step with what it is assigned.
type cluster struct {
	t       *testing.T
	rollout *v1alpha1.KubeletConfigRollout
	nodes   map[string]*corev1.Node
	order   []string
	// fails names the Nodes on which the target fails its trial.
	fails map[string]bool
	// assigned counts the assignments of the target per Node.
	assigned map[string]int
	// now is the controller's clock; each step moves it on by a trial
	// period, so that a Node whose agent reports the target passed has
	// also been assigned it for a period.
	now metav1.Time
}

func newCluster(t *testing.T, r *v1alpha1.KubeletConfigRollout, count int) *cluster {
	c := &cluster{t: t, rollout: r, nodes: map[string]*corev1.Node{}, fails: map[string]bool{}, assigned: map[string]int{}, now: now}
	for i := range count {
		name := fmt.Sprintf("n%02d", i)
		c.nodes[name] = newNode(name)
		c.order = append(c.order, name)
	}
	return c
}

// decide runs Decide on the cluster as it is, with a fresh decider every
// time, as a restarted controller would.
func (c *cluster) decide() Decision {
	c.t.Helper()
	var list []node
	for _, name := range c.order {
		list = append(list, node{Node: c.nodes[name]})
	}
	d, err := Decide(Input{Rollout: c.rollout.DeepCopy(), Target: &v3, Nodes: observe(c.t, list), Now: c.now})
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// apply writes the status (unless the controller crashed before) and the
// Node changes.
func (c *cluster) apply(d Decision, writeStatus bool) {
	c.t.Helper()
	if writeStatus {
		c.rollout.Status = d.Status
	}
	for _, ch := range append(append([]Change{}, d.Assign...), d.Revert...) {
		n := c.nodes[ch.Node]
		if ch.ResourceVersion != n.ResourceVersion {
			continue // the apiserver's conflict: decided on a stale Node
		}
		patch, err := ch.MergePatch()
		if err != nil {
			c.t.Fatal(err)
		}
		var decoded struct {
			Metadata struct {
				Annotations map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(patch, &decoded); err != nil {
			c.t.Fatal(err)
		}
		for k, v := range decoded.Metadata.Annotations {
			if v == nil {
				delete(n.Annotations, k)
			} else {
				n.Annotations[k] = *v
			}
		}
		if v := ch.Annotations[contract.ConfigSourceAnnotation]; v != nil && *v == source(v3) {
			c.assigned[ch.Node]++
		}
		c.bump(n)
	}
}

func (c *cluster) bump(n *corev1.Node) {
	rv, _ := strconv.Atoi(n.ResourceVersion)
	n.ResourceVersion = strconv.Itoa(rv + 1)
}

// step moves every agent on: an assignment of the target goes on trial,
// a trial passes or, on a failing Node, rolls back; an assignment gone
// back to the local configuration is reported as such.
func (c *cluster) step() {
	c.now = metav1.NewTime(c.now.Add(DefaultTrialPeriod))
	for _, name := range c.order {
		n := c.nodes[name]
		obs, _ := ObserveNode(n, nil)
		switch {
		case obs.Assigned && obs.Assignment.ConfigMap.Name == v3.Name:
			switch {
			case obs.KubeletConfigReady.Reason == "TrialInProgress" && c.fails[name]:
				rolledBack(v3)(n)
			case obs.KubeletConfigReady.Reason == "TrialInProgress":
				on(v3)(n)
			case obs.KubeletConfigReady.Reason != "RolledBack" && obs.KubeletConfigReady.Reason != "ConfigActive":
				trying(v3)(n)
			}
		case !obs.Assigned && obs.KubeletConfigReady.Reason != "LocalConfig":
			reports(n, contract.ConfigStatus{}, corev1.ConditionTrue, "LocalConfig", "local")
		default:
			continue
		}
		c.bump(n)
	}
}

// unavailable counts the Nodes in trial, failed or down, as Decide does.
func (c *cluster) unavailable() int {
	count := 0
	for _, r := range c.decide().Nodes {
		if r.Unavailable {
			count++
		}
	}
	return count
}

func TestARolloutRunsToCompletionWithoutAssigningANodeTwice(t *testing.T) {
	c := newCluster(t, newRollout(maxUnavailable(intstr.FromInt32(2))), 7)
	notReady(c.nodes["n05"]) // down at the start, back later
	for round := 0; round < 40; round++ {
		d := c.decide()
		if meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionComplete) {
			for name, times := range c.assigned {
				if times != 1 {
					t.Errorf("%s assigned %d times", name, times)
				}
			}
			return
		}
		if d.Status.Updated == 0 && len(d.Assign)+int(d.Status.InTrial) > 1 {
			t.Fatalf("round %d: the canary is not alone: %d in trial, assigning %v", round, d.Status.InTrial, changedNodes(d.Assign))
		}
		// Every third round the controller dies between the Node patches
		// and the status; and each decision is applied twice, as a
		// controller acting on a stale cache would try to.
		c.apply(d, round%3 != 0)
		c.apply(d, true)
		if got := c.unavailable(); got > 2 && round > 0 {
			t.Fatalf("round %d: %d Nodes unavailable, at most 2", round, got)
		}
		if round == 6 {
			c.nodes["n05"].Status.Conditions[0].Status = corev1.ConditionTrue
		}
		c.step()
	}
	t.Fatalf("not complete after 40 rounds: %+v", c.decide().Status)
}

func TestAFailedTrialRevertsEveryMovedNodeOnce(t *testing.T) {
	c := newCluster(t, newRollout(maxUnavailable(intstr.FromInt32(2))), 6)
	c.fails["n03"] = true
	var reverted []string
	for round := 0; round < 30; round++ {
		d := c.decide()
		reverted = append(reverted, changedNodes(d.Revert)...)
		c.apply(d, true)
		c.step()
		if meta.FindStatusCondition(c.rollout.Status.Conditions, v1alpha1.ConditionProgressing).Reason == v1alpha1.ReasonReverted {
			break
		}
	}
	failed := meta.FindStatusCondition(c.rollout.Status.Conditions, v1alpha1.ConditionFailed)
	if failed == nil || failed.Status != "True" || failed.Reason != v1alpha1.ReasonTrialFailed {
		t.Fatalf("Failed condition %+v, want True/TrialFailed", failed)
	}
	for name, n := range c.nodes {
		if _, ok := n.Annotations[contract.ConfigSourceAnnotation]; ok {
			t.Errorf("%s still has config-source %q after the revert", name, n.Annotations[contract.ConfigSourceAnnotation])
		}
		if _, ok := n.Annotations[contract.RolloutAnnotation]; ok {
			t.Errorf("%s keeps the rollout's bookkeeping after the revert", name)
		}
	}
	seen := map[string]bool{}
	for _, name := range reverted {
		if seen[name] {
			t.Errorf("%s reverted twice", name)
		}
		seen[name] = true
	}
	if !seen["n03"] {
		t.Errorf("the failed Node was not reverted (reverted: %v)", reverted)
	}
	// Settled: the failure is kept, and nothing more happens.
	for range 3 {
		d := c.decide()
		if len(d.Assign)+len(d.Revert) > 0 {
			t.Fatalf("a failed, reverted rollout still acts: assign %v, revert %v", changedNodes(d.Assign), changedNodes(d.Revert))
		}
		c.apply(d, true)
		c.step()
	}
	if !meta.IsStatusConditionTrue(c.rollout.Status.Conditions, v1alpha1.ConditionFailed) {
		t.Error("the failure was forgotten once the Nodes were reverted")
	}
}

func TestChangeMergePatch(t *testing.T) {
	local := ""
	obs := NodeObservation{Name: "n1", ResourceVersion: "7", ConfigSource: &local}
	assigned := time.Date(2026, 12, 10, 10, 0, 0, 500, time.UTC)
	patch, err := mustAssign(t, &obs, spec{drain: v1alpha1.DrainAuto, trialPeriod: time.Minute}, assigned).MergePatch()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"nodeguard.dev/config-source":"kubelet-configs/pool-blue-v3","nodeguard.dev/drain":null,"nodeguard.dev/drain-delete-emptydir-data":null,"nodeguard.dev/drain-force":null,"nodeguard.dev/previous-config-source":"","nodeguard.dev/rollout":"pool-blue","nodeguard.dev/trial":null,"nodeguard.dev/trial-ends":"2026-12-10T10:01:00.001Z","nodeguard.dev/trial-passed":null},"resourceVersion":"7"}}`
	if string(patch) != want {
		t.Errorf("assigning over an explicit local configuration:\n got %s\nwant %s", patch, want)
	}
	obs = NodeObservation{Name: "n1", ResourceVersion: "8"}
	period := int32(90)
	patch, err = mustAssign(t, &obs, spec{drain: v1alpha1.DrainNever, drainOptions: contract.DrainOptions{Force: true},
		trial: &contract.TrialTerms{PeriodSeconds: &period, AllowShrink: true}, trialPeriod: 90 * time.Second}, assigned.Truncate(time.Second)).MergePatch()
	if err != nil {
		t.Fatal(err)
	}
	want = `{"metadata":{"annotations":{"nodeguard.dev/config-source":"kubelet-configs/pool-blue-v3","nodeguard.dev/drain":"Never","nodeguard.dev/drain-delete-emptydir-data":null,"nodeguard.dev/drain-force":"true","nodeguard.dev/previous-config-source":null,"nodeguard.dev/rollout":"pool-blue","nodeguard.dev/trial":"{\"periodSeconds\":90,\"allowShrink\":true}","nodeguard.dev/trial-ends":"2026-12-10T10:01:30.000Z","nodeguard.dev/trial-passed":null},"resourceVersion":"8"}}`
	if string(patch) != want {
		t.Errorf("assigning a Node without config-source, drain Never:\n got %s\nwant %s", patch, want)
	}
	obs = NodeObservation{Name: "n1", ResourceVersion: "9", PreviousConfigSource: &local}
	if patch, err = revert(&obs).MergePatch(); err != nil {
		t.Fatal(err)
	}
	want = `{"metadata":{"annotations":{"nodeguard.dev/config-source":"","nodeguard.dev/drain":null,"nodeguard.dev/drain-delete-emptydir-data":null,"nodeguard.dev/drain-force":null,"nodeguard.dev/previous-config-source":null,"nodeguard.dev/rollout":null,"nodeguard.dev/trial":null,"nodeguard.dev/trial-ends":null,"nodeguard.dev/trial-passed":null},"resourceVersion":"9"}}`
	if string(patch) != want {
		t.Errorf("reverting to an explicit local configuration:\n got %s\nwant %s", patch, want)
	}
}

// mustAssign is assign of the target v3 under s at now.
func mustAssign(t *testing.T, obs *NodeObservation, s spec, now time.Time) Change {
	t.Helper()
	c, err := assign(rolloutName, obs, contract.ConfigMapRef{Namespace: v3.Namespace, Name: v3.Name}, s, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestObserveNode(t *testing.T) {
	n := newNode("n1", trying(v3), movedFrom(nil))
	obs, err := ObserveNode(n, []string{"pool-green"})
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Ready || !obs.Assigned || obs.Assignment.ConfigMap.Name != v3.Name || obs.Rollout != rolloutName ||
		obs.PreviousConfigSource != nil || obs.Status == nil || *obs.Status.Active != v3 ||
		obs.KubeletConfigReady == nil || obs.KubeletConfigReady.Reason != "TrialInProgress" || len(obs.OtherRollouts) != 1 {
		t.Errorf("ObserveNode = %+v", obs)
	}

	n.Annotations[contract.ConfigStatusAnnotation] = "{"
	n.Annotations[contract.ConfigSourceAnnotation] = "no-slash"
	obs, err = ObserveNode(n, nil)
	if err == nil {
		t.Fatal("no error for malformed annotations")
	}
	if obs.Status != nil || obs.Assigned || obs.ConfigSource == nil || *obs.ConfigSource != "no-slash" {
		t.Errorf("ObserveNode of malformed annotations = %+v", obs)
	}
}
