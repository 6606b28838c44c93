package controller

import (
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

func TestReactionsPairPassesWithAssignmentsInOrder(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	st := newRolloutState(time.Minute, 1)
	r := st.reactions
	if _, ok := r.assigning(at(0)); ok {
		t.Fatal("an assignment with no pass waiting (the canary) was timed")
	}
	st.touch("a", at(100))
	st.touch("a", at(150)) // a later change of a Node not yet read keeps the first
	st.touch("b", at(120))
	st.touch("x", at(130))
	st.takeTouched(at(200))
	changed := []rollout.NodeResult{
		{Name: "a", State: rollout.StateUpdated},
		{Name: "b", State: rollout.StateUpdated},
		{Name: "x", State: rollout.StateUpdated}, // updated, but not from a trial
		{Name: "c", State: rollout.StateUpdated}, // its change was not handed over: the decision's time
	}
	previous := map[string]rollout.NodeState{"a": rollout.StateInTrial, "b": rollout.StateInTrial, "x": rollout.StatePending, "c": rollout.StateInTrial}
	r.decided(changed, previous, st.handedOverRead, false, at(200))
	for _, want := range []time.Duration{200 * time.Millisecond, 180 * time.Millisecond, 100 * time.Millisecond} {
		got, ok := r.assigning(at(300))
		if !ok || got != want {
			t.Errorf("assigning = %v, %t; want %v", got, ok, want)
		}
	}
	if _, ok := r.assigning(at(300)); ok {
		t.Error("more assignments timed than passes")
	}

	// A decision with nothing left to assign forgets the passes waiting.
	st.touch("d", at(400))
	st.takeTouched(at(410))
	r.decided([]rollout.NodeResult{{Name: "d", State: rollout.StateUpdated}}, map[string]rollout.NodeState{"d": rollout.StateInTrial}, st.handedOverRead, true, at(410))
	if _, ok := r.assigning(at(5000)); ok {
		t.Error("a pass no assignment could answer was charged to a later one")
	}
}
