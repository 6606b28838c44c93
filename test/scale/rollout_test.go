package scale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestRolloutShort is the short version of the rollout benchmark (scale
// --rollout): 30 simulated kubelets and agents, canary 1, maxUnavailable
// 10%, once as is and once drain-class (spec.drain: Always). It asserts
// outcomes only, never times: the rollout completes, the harness never
// sees more Nodes unavailable than maxUnavailable, every Node is assigned
// the target exactly once, and every Node's update is timed from its
// agent's write; drain-class, every Node is seen cordoned by its agent
// and Draining, never judged available while cordoned, and released.
func TestRolloutShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the rollout controller")
	}
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%t", drain), func(t *testing.T) {
			o := RolloutOptions{
				Nodes: 30, Trial: time.Second, MaxUnavailablePercent: 10, Canary: 1,
				Period: 10 * time.Second, Timeout: 3 * time.Minute, WorkDir: t.TempDir(),
				Drain: drain, DrainTime: 500 * time.Millisecond,
				// The drain-class run also installs the controller's own
				// priority level, as an operator adds the component.
				APIPriority: drain,
			}
			var progress bytes.Buffer
			o.Progress = &progress
			r, err := RunRollout(t.Context(), o)
			var report bytes.Buffer
			if werr := WriteRolloutReport(&report, o, r); werr != nil {
				t.Errorf("report: %v", werr)
			}
			t.Logf("progress:\n%s\nreport:\n%s", progress.String(), report.String())
			if err != nil {
				t.Fatalf("rollout: %v", err)
			}
			if !r.Complete || r.Updated != o.Nodes {
				t.Errorf("complete %t with %d of %d Nodes updated, want complete with all", r.Complete, r.Updated, o.Nodes)
			}
			if r.MaxUnavailable > o.Batch() {
				t.Errorf("up to %d Nodes unavailable at once, want at most maxUnavailable (%d)", r.MaxUnavailable, o.Batch())
			}
			if r.Assigned[1] != o.Nodes {
				t.Errorf("Nodes by times assigned: %v, want all %d exactly once", r.Assigned, o.Nodes)
			}
			if r.WriteToWatch.OK != o.Nodes {
				t.Errorf("%d Nodes' updates timed from their agents' writes, want all %d", r.WriteToWatch.OK, o.Nodes)
			}
			// Every Node after the first batch answers a pass; the
			// controller times each (a few more when a pass and an
			// assignment cross in a decision the harness pairs otherwise).
			if passes := o.Nodes - o.Batch() - int(o.Canary); r.TimedReactions.Count < float64(passes)/2 {
				t.Errorf("the controller timed %.0f reactions, want about %d", r.TimedReactions.Count, passes)
			}
			// The counting proxy, a process of its own, saw every
			// assignment and the controller's Node watch: the own share
			// is timed from its record.
			if r.Requests["patch nodes"] < o.Nodes || r.ReactionSplit.ControllerOwn.OK == 0 {
				t.Errorf("the proxy recorded %d Node patches and timed %d own shares, want at least %d and some",
					r.Requests["patch nodes"], r.ReactionSplit.ControllerOwn.OK, o.Nodes)
			}
			// The apiserver served the controller in the level the
			// component gives it, and in workload-low without it.
			level, other := "workload-low", "nodeguard-rollout-controller"
			if o.APIPriority {
				level, other = other, level
			}
			if r.PriorityLevels[level] == 0 || r.PriorityLevels[other] != 0 {
				t.Errorf("the controller's requests by priority level: %v, want them in %s", r.PriorityLevels, level)
			}
			if drain {
				if err := DrainOutcomes(o, r); err != nil {
					t.Error(err)
				}
			} else if r.Drain != nil {
				t.Errorf("a drain was reported for a rollout without one: %+v", *r.Drain)
			}
		})
	}
}

func TestReactionsPairFirstInFirstOut(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	events := []nodeEvent{
		{at: at(0)},                 // canary assigned: no update waiting
		{at: at(10), updated: true}, // canary updated
		{at: at(11)}, {at: at(11)},  // first batch: one reaction
		{at: at(20), updated: true}, {at: at(21), updated: true},
		{at: at(23)},                // reacts to the update at 20
		{at: at(30), updated: true}, // nothing left to assign
	}
	got := reactions(events)
	want := []time.Duration{time.Second, 3 * time.Second}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reactions = %v, want %v", got, want)
	}
}

func TestWritesToWatchTimeEachUpdateFromItsAgentsWrite(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	agents := []*agent{
		{k: &kubelet{name: "a"}, updatedSent: at(100)},
		{k: &kubelet{name: "b"}, updatedSent: at(200)},
		{k: &kubelet{name: "c"}}, // never reported a passed trial
	}
	events := []nodeEvent{
		{at: at(50), node: "a"},                 // an assignment, not an update
		{at: at(130), node: "a", updated: true}, // 30 ms after its write
		{at: at(150), node: "c", updated: true}, // no write to time it from
		{at: at(150), node: "b", updated: true}, // before its write: not timed
		{at: at(210), node: "x", updated: true}, // no agent
	}
	got := writesToWatch(events, agents)
	if len(got) != 1 || got[0] != 30*time.Millisecond {
		t.Errorf("writesToWatch = %v, want [30ms]", got)
	}
}

func TestSplitReactionsAtTheControllersPatch(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	events := []nodeEvent{
		{at: at(100), node: "a", updated: true},
		{at: at(400), node: "b"}, // patched 250-300
		{at: at(500), node: "c", updated: true},
		{at: at(700), node: "d"}, // no timed patch: left out
	}
	pairs := reactionPairs(events)
	patches := map[string]wireTiming{"b": {Sent: at(250), Answered: at(300)}}
	toSend, write, toWatch := splitReactions(pairs, patches)
	want := []time.Duration{150 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	if len(toSend) != 1 || toSend[0] != want[0] || write[0] != want[1] || toWatch[0] != want[2] {
		t.Errorf("split = %v %v %v, want one reaction split %v", toSend, write, toWatch, want)
	}
	split := newReactionSplit(events, patches, newDeliveries())
	if split.SlowestMs != [3]float64{150, 50, 100} {
		t.Errorf("slowest 1%% = %v, want [150 50 100]", split.SlowestMs)
	}
}

func TestRolloutPeriodsLightenAboveAThousandNodes(t *testing.T) {
	for _, c := range []struct {
		nodes         int
		lease, status time.Duration
	}{
		{30, 10 * time.Second, 10 * time.Second},
		{1000, 10 * time.Second, 10 * time.Second},
		{2000, 20 * time.Second, 5 * time.Minute},
		{5000, 50 * time.Second, 5 * time.Minute},
	} {
		lease, status := RolloutPeriods(c.nodes)
		if lease != c.lease || status != c.status {
			t.Errorf("RolloutPeriods(%d) = %v, %v; want %v, %v", c.nodes, lease, status, c.lease, c.status)
		}
	}
}

// TestObserverSeesTheDrain feeds the observer the views of one Node's
// drain-class change, in the order the simulated agent writes them.
func TestObserverSeesTheDrain(t *testing.T) {
	target := contract.ConfigMapVersion{Namespace: "ns", Name: "cm", UID: "u", ResourceVersion: "1"}
	node := func(source string, cordoned bool, st *contract.ConfigStatus, reason string, ok bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{}}}
		n.Spec.Unschedulable = cordoned
		if cordoned {
			n.Annotations[contract.CordonedAnnotation] = "for the target"
		}
		if source != "" {
			n.Annotations[contract.ConfigSourceAnnotation] = source
		}
		if st != nil {
			data, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			n.Annotations[contract.ConfigStatusAnnotation] = string(data)
		}
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: contract.ConditionKubeletConfigReady, Status: status, Reason: reason},
		}
		return n
	}
	o := newObserver(target)
	src := "ns/cm"
	steps := []*corev1.Node{
		node("", false, &contract.ConfigStatus{}, contract.ReasonLocalConfig, true),
		node(src, false, &contract.ConfigStatus{}, contract.ReasonLocalConfig, true),
		node(src, true, &contract.ConfigStatus{}, contract.ReasonLocalConfig, true),
		node(src, true, &contract.ConfigStatus{Assigned: &target, Phase: contract.PhaseDraining}, contract.ReasonDraining, false),
		node(src, true, &contract.ConfigStatus{Assigned: &target, Active: &target, Phase: contract.PhaseTrialInProgress}, contract.ReasonTrialInProgress, false),
		node(src, false, &contract.ConfigStatus{Assigned: &target, Active: &target, Phase: contract.PhaseTrialInProgress}, contract.ReasonTrialInProgress, false),
		node(src, false, &contract.ConfigStatus{Assigned: &target, Active: &target, LastKnownGood: &target}, contract.ReasonConfigActive, true),
	}
	for i, n := range steps {
		at := time.Time{}
		if i > 0 {
			at = time.Unix(int64(i), 0)
		}
		o.see(n, at)
	}
	s := o.snapshot()
	want := DrainSeen{Cordoned: 1, Draining: 1, Released: 1}
	if s.drain != want || s.updated != 1 || s.maxUnavailable != 1 {
		t.Errorf("drain %+v, updated %d, max unavailable %d; want %+v, 1, 1", s.drain, s.updated, s.maxUnavailable, want)
	}
	// A cordon on a Node the harness would judge available is counted.
	o.see(node(src, true, &contract.ConfigStatus{Assigned: &target, Active: &target, LastKnownGood: &target}, contract.ReasonConfigActive, true), time.Unix(10, 0))
	if s := o.snapshot(); s.drain.CordonedAvailable != 1 || s.drain.StillCordoned != 1 {
		t.Errorf("after a cordon of an updated Node: %+v, want it counted available while cordoned and still cordoned", s.drain)
	}
}
