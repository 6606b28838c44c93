package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// recordingSender answers each change with the result named for its Node
// (resultOK otherwise) and records what was sent.
type recordingSender struct {
	results map[string]string

	mu   sync.Mutex
	sent []string
}

func (s *recordingSender) send(_ context.Context, change rollout.Change) (string, error) {
	s.mu.Lock()
	s.sent = append(s.sent, change.Node)
	s.mu.Unlock()
	if r, ok := s.results[change.Node]; ok {
		return r, fmt.Errorf("%s: %s", change.Node, r)
	}
	return resultOK, nil
}

func changes(n int) []rollout.Change {
	out := make([]rollout.Change, n)
	for i := range out {
		out[i] = rollout.Change{Node: fmt.Sprintf("n%03d", i)}
	}
	return out
}

// groupSender holds every patch until all of its group (sizes first, twice
// that and so on up to maxPatchesInFlight) are sent, and notes a patch sent before the groups ahead of
// it were answered: patchAll must send a group at once and await it.
type groupSender struct {
	t        *testing.T
	first, n int

	mu       sync.Mutex
	answered int
	arrived  map[int]int
	full     map[int]chan struct{}
}

func groupOf(i, first int) (start, size int) {
	for size = first; i >= start+size; size = min(2*size, maxPatchesInFlight) {
		start += size
	}
	return start, size
}

func (s *groupSender) send(_ context.Context, change rollout.Change) (string, error) {
	var i int
	fmt.Sscanf(change.Node, "n%d", &i)
	start, size := groupOf(i, s.first)
	size = min(size, s.n-start) // the last group may be partial
	s.mu.Lock()
	if s.answered < start {
		s.t.Errorf("%s sent with %d patches answered, before its group's predecessors (%d)", change.Node, s.answered, start)
	}
	if s.full[start] == nil {
		s.full[start] = make(chan struct{})
	}
	full := s.full[start]
	if s.arrived[start]++; s.arrived[start] == size {
		close(full)
	}
	s.mu.Unlock()
	select {
	case <-full:
	case <-time.After(30 * time.Second):
		// A deadlock guard, not a measurement: the group never filled.
		s.t.Errorf("%s waited in vain for the rest of its group of %d from n%03d", change.Node, size, start)
	}
	s.mu.Lock()
	s.answered++
	s.mu.Unlock()
	return resultOK, nil
}

func TestPatchAllSendsGroupsInOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first, n int
	}{
		// 1+2+4+8+16 = 31, then groups of 16, the last one partial.
		{"slow start", 1, 31 + 4*16 + 5},
		{"slow start from 4", 4, 4 + 8 + 16 + 3},
		{"at full width", maxPatchesInFlight, 3*maxPatchesInFlight + 1},
		{"one change", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &groupSender{t: t, first: tc.first, n: tc.n, arrived: map[int]int{}, full: map[int]chan struct{}{}}
			got := patchAll(t.Context(), changes(tc.n), tc.first, false, s.send)
			if len(got) != tc.n {
				t.Fatalf("%d outcomes, want %d", len(got), tc.n)
			}
			for i, p := range got {
				if want := fmt.Sprintf("n%03d", i); p.change.Node != want || p.result != resultOK || p.err != nil {
					t.Errorf("outcome %d = %s %s %v, want %s ok", i, p.change.Node, p.result, p.err, want)
				}
			}
		})
	}
}

func TestFirstAssignmentsWidenOnceAdmissionLetTheTargetOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status v1alpha1.KubeletConfigRolloutStatus
		want   int
	}{
		{"no Node has the target yet", v1alpha1.KubeletConfigRolloutStatus{Selected: 5}, 1},
		{"the canary in trial", v1alpha1.KubeletConfigRolloutStatus{Selected: 5, InTrial: 1}, maxPatchesInFlight},
		{"a Node updated", v1alpha1.KubeletConfigRolloutStatus{Selected: 5, Updated: 1}, maxPatchesInFlight},
		{"a Node failed it, after admission let it on", v1alpha1.KubeletConfigRolloutStatus{Selected: 5, Failed: 1}, maxPatchesInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstAssignments(rollout.Decision{Status: tc.status}); got != tc.want {
				t.Errorf("firstAssignments = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPatchAllStopsAfterTheGroupOfARefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused string
		stop    bool
		want    int // changes sent: the groups are 1, 2, 4, 8, 16, 16, ...
	}{
		{"the first Node refused", "n000", true, 1},
		{"a refusal in the third group", "n004", true, 7},
		{"a refusal in the sixth group", "n040", true, 47},
		{"reverts go on after a refusal", "n000", false, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &recordingSender{results: map[string]string{tc.refused: resultRefused, "n002": resultConflict}}
			got := patchAll(t.Context(), changes(50), 1, tc.stop, s.send)
			if len(got) != tc.want || len(s.sent) != tc.want {
				t.Fatalf("%d outcomes for %d sent, want %d", len(got), len(s.sent), tc.want)
			}
			if !slices.ContainsFunc(got, func(p patched) bool { return p.change.Node == tc.refused && p.result == resultRefused && p.err != nil }) {
				t.Errorf("the refusal of %s is not among the outcomes", tc.refused)
			}
		})
	}
}

func TestPatchAllOfNothingSendsNothing(t *testing.T) {
	s := &recordingSender{}
	if got := patchAll(t.Context(), nil, 1, true, s.send); len(got) != 0 || len(s.sent) != 0 {
		t.Errorf("patchAll(nil) = %v after sending %v, want nothing", got, s.sent)
	}
}
