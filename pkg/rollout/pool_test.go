package rollout

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestPoolDecidesAsDecide holds a pool that is told of one change at a
// time (a Node set or deleted, time passing, the rollout's spec, status or
// target changing, refusals, unfit Nodes) to Decide over the same Nodes
// afresh: after every change the decisions are equal, and the verdicts the
// pool returned (changes only) add up to Decide's.
func TestPoolDecidesAsDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for seq := range 400 {
		pool := NewPool(rolloutName)
		current := map[string]NodeObservation{}
		verdicts := map[string]NodeResult{}
		at := now
		r := newRollout()
		target := &v3
		var refusals []Refusal
		var unfit map[string]string
		var log []string
		for step := range 60 {
			switch k := rng.IntN(20); {
			case k < 11:
				obs := randomNode(t, rng, fmt.Sprintf("n%02d", rng.IntN(14)), at)
				current[obs.Name] = obs
				pool.Set(obs)
				log = append(log, "set "+obs.Name)
			case k < 13:
				name := fmt.Sprintf("n%02d", rng.IntN(14))
				delete(current, name)
				pool.Delete(name)
				log = append(log, "delete "+name)
			case k < 15:
				at = metav1.NewTime(at.Add(time.Duration(rng.IntN(4000)) * time.Millisecond))
				log = append(log, "time "+at.String())
			case k < 17:
				r = randomRollout(rng)
				log = append(log, fmt.Sprintf("rollout %+v", r.Spec))
			case k < 18:
				target = []*contract.ConfigMapVersion{&v3, &v3b, nil}[rng.IntN(3)]
				log = append(log, fmt.Sprintf("target %v", target))
			case k < 19:
				refusals = nil
				if rng.IntN(2) == 0 {
					refusals = []Refusal{{Node: fmt.Sprintf("n%02d", rng.IntN(14)), Message: "too old", NodeState: rng.IntN(3) > 0}}
				}
				log = append(log, fmt.Sprintf("refusals %v", refusals))
			default:
				unfit = map[string]string{}
				for range rng.IntN(3) {
					unfit[fmt.Sprintf("n%02d", rng.IntN(14))] = "its pods would not fit"
				}
				log = append(log, fmt.Sprintf("unfit %v", unfit))
			}
			in := Input{Rollout: r, Target: target, Refusals: refusals, Unfit: unfit, Now: at}
			got, err := pool.Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			in.Nodes = slices.Collect(maps.Values(current))
			want, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range got.Left {
				delete(verdicts, name)
			}
			for _, v := range got.Nodes {
				verdicts[v.Name] = v
			}
			wantVerdicts := map[string]NodeResult{}
			for _, v := range want.Nodes {
				wantVerdicts[v.Name] = v
			}
			fail := func(what string, got, want any) {
				t.Helper()
				t.Fatalf("sequence %d, step %d: %s differ\n got %+v\nwant %+v\nafter:\n  %s", seq, step, what, got, want, strings.Join(log, "\n  "))
			}
			if !maps.Equal(verdicts, wantVerdicts) {
				fail("verdicts", verdicts, wantVerdicts)
			}
			got.Nodes, got.Left, want.Nodes, want.Left = nil, nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				fail("decisions", got, want)
			}
		}
	}
}

// randomNode is a Node in one of the states agents, rollouts and other
// actors leave Nodes in, with trial periods ending around at.
func randomNode(t *testing.T, rng *rand.Rand, name string, at metav1.Time) NodeObservation {
	t.Helper()
	states := []nodeOpt{
		func(*corev1.Node) {}, on(v3), on(v3b), on(v2), trying(v3), trying(v3b), trying(v2), assignedOnly(v3), noAgent,
		rolledBack(v2), invalid(v2), rolledBack(v3), invalid(v3),
	}
	n := newNode(name, states[rng.IntN(len(states))])
	n.ResourceVersion = fmt.Sprint(rng.IntN(1000))
	if rng.IntN(5) == 0 {
		notReady(n)
	}
	if _, ok := n.Annotations[contract.ConfigSourceAnnotation]; ok && rng.IntN(3) > 0 {
		movedFrom([]*string{nil, ptr.To(""), ptr.To(source(v2))}[rng.IntN(3)])(n)
		if rng.IntN(2) == 0 {
			trialEnds(at.Add(time.Duration(rng.IntN(8000)-2000) * time.Millisecond))(n)
		}
		if rng.IntN(3) == 0 {
			passedOn([]contract.ConfigMapVersion{v3, v3b}[rng.IntN(2)])(n)
		}
	}
	var others []string
	if rng.IntN(8) == 0 {
		others = []string{"pool-green"}
	}
	obs, err := ObserveNode(n, others)
	if err != nil {
		t.Fatalf("observing %s: %v", name, err)
	}
	return obs
}

// randomRollout is the rollout with one of the specs and statuses it goes
// through.
func randomRollout(rng *rand.Rand) *v1alpha1.KubeletConfigRollout {
	opts := []rolloutOpt{canary(int32(1 + rng.IntN(3)))}
	if rng.IntN(2) == 0 {
		opts = append(opts, maxUnavailable(intstr.FromInt32(int32(1+rng.IntN(4)))))
	} else {
		opts = append(opts, maxUnavailable(intstr.FromString(fmt.Sprintf("%d%%", 1+rng.IntN(100)))))
	}
	if rng.IntN(6) == 0 {
		opts = append(opts, paused())
	}
	if rng.IntN(3) == 0 {
		opts = append(opts, halt())
	}
	switch rng.IntN(4) {
	case 0:
		opts = append(opts, statusFor(v3))
	case 1:
		opts = append(opts, failedFor(v3, "n01"))
	case 2:
		opts = append(opts, statusFor(v3), func(r *v1alpha1.KubeletConfigRollout) {
			r.Status.SkippedNodes = []v1alpha1.SkippedNode{{Name: fmt.Sprintf("n%02d", rng.IntN(14)), Message: "refused for its own state"}}
		})
	}
	return newRollout(opts...)
}
