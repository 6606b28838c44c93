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

// maxPatchesInFlight is the window these tests give patchAll.
const maxPatchesInFlight = 16

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

// windowSender checks, at every send, that no more changes are in flight
// than patchAll's window allows: first, plus one for each change answered
// ok, up to maxPatchesInFlight. It holds each patch until the next is sent
// or a moment has passed, so that the window fills.
type windowSender struct {
	t     *testing.T
	first int

	mu                 sync.Mutex
	inFlight, ok, most int
}

func (s *windowSender) send(_ context.Context, change rollout.Change) (string, error) {
	s.mu.Lock()
	s.inFlight++
	if limit := min(s.first+s.ok, maxPatchesInFlight); s.inFlight > limit {
		s.t.Errorf("%s sent with %d in flight after %d applied, want at most %d", change.Node, s.inFlight, s.ok, limit)
	}
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	s.inFlight--
	s.ok++
	s.mu.Unlock()
	return resultOK, nil
}

func TestPatchAllWidensItsWindowUpToTheBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first, n int
	}{
		{"slow start", 1, 200},
		{"slow start from 4", 4, 60},
		{"at full width", maxPatchesInFlight, 3*maxPatchesInFlight + 1},
		{"one change", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &windowSender{t: t, first: tc.first}
			got := patchAll(t.Context(), changes(tc.n), tc.first, maxPatchesInFlight, false, s.send)
			if len(got) != tc.n {
				t.Fatalf("%d outcomes, want %d", len(got), tc.n)
			}
			for i, p := range got {
				if want := fmt.Sprintf("n%03d", i); p.change.Node != want || p.result != resultOK || p.err != nil {
					t.Errorf("outcome %d = %s %s %v, want %s ok", i, p.change.Node, p.result, p.err, want)
				}
			}
			if s.most > maxPatchesInFlight {
				t.Errorf("%d patches in flight at once, want at most %d", s.most, maxPatchesInFlight)
			}
		})
	}
}

// A patch the apiserver is slow to answer holds its own slot only: the
// changes after it go out as the others are answered, up to a window past
// it. Groups awaited whole would hold n016 until n001 is answered.
func TestPatchAllDoesNotWaitForTheSlowestPatch(t *testing.T) {
	const n = 3 * maxPatchesInFlight
	last := fmt.Sprintf("n%03d", maxPatchesInFlight)
	lastSent := make(chan struct{})
	send := func(_ context.Context, change rollout.Change) (string, error) {
		switch change.Node {
		case "n001":
			select {
			case <-lastSent:
			case <-time.After(30 * time.Second):
				// A deadlock guard, not a measurement.
				t.Errorf("%s was never sent while n001 was in flight", last)
			}
		case last:
			close(lastSent)
		}
		return resultOK, nil
	}
	if got := patchAll(t.Context(), changes(n), maxPatchesInFlight, maxPatchesInFlight, false, send); len(got) != n {
		t.Fatalf("%d outcomes, want %d", len(got), n)
	}
}

// Nothing goes out a window or more past the oldest change not yet
// answered, however fast the others are answered.
func TestPatchAllSendsNothingAWindowPastTheOldestUnanswered(t *testing.T) {
	var (
		mu       sync.Mutex
		answered bool
	)
	send := func(_ context.Context, change rollout.Change) (string, error) {
		var i int
		fmt.Sscanf(change.Node, "n%d", &i)
		if i == 0 {
			// Held while the others are answered; not a measurement.
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			answered = true
			mu.Unlock()
			return resultOK, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !answered && i >= maxPatchesInFlight {
			t.Errorf("%s sent while n000 was in flight, a window or more past it", change.Node)
		}
		return resultOK, nil
	}
	if got := patchAll(t.Context(), changes(3*maxPatchesInFlight), maxPatchesInFlight, maxPatchesInFlight, false, send); len(got) != 3*maxPatchesInFlight {
		t.Fatalf("%d outcomes, want %d", len(got), 3*maxPatchesInFlight)
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
			if got := firstAssignments(rollout.Decision{Status: tc.status}, maxPatchesInFlight); got != tc.want {
				t.Errorf("firstAssignments = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPatchAllSendsNothingOnceARefusalIsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused int
		stop    bool
		first   int
	}{
		{"the first Node refused", 0, true, 1},
		{"a refusal while the window widens", 4, true, 1},
		{"a refusal at full width", 40, true, maxPatchesInFlight},
		{"reverts go on after a refusal", 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 100
			refused := fmt.Sprintf("n%03d", tc.refused)
			s := &recordingSender{results: map[string]string{refused: resultRefused, "n002": resultConflict}}
			got := patchAll(t.Context(), changes(n), tc.first, maxPatchesInFlight, tc.stop, s.send)
			if len(got) != len(s.sent) {
				t.Fatalf("%d outcomes for %d sent, want one for each", len(got), len(s.sent))
			}
			// Nothing goes out a window or more past a change not yet
			// answered, nor after a refusal is: at most the changes up to
			// the refused one and a window beyond.
			switch most := tc.refused + maxPatchesInFlight; {
			case !tc.stop && len(got) != n:
				t.Errorf("%d sent, want all %d", len(got), n)
			case tc.stop && tc.refused == 0 && tc.first == 1 && len(got) != 1:
				t.Errorf("%d sent, want only the refused first one", len(got))
			case tc.stop && len(got) > most:
				t.Errorf("%d sent, want at most %d (the refused n%03d and a window)", len(got), most, tc.refused)
			}
			if !slices.ContainsFunc(got, func(p patched) bool { return p.change.Node == refused && p.result == resultRefused && p.err != nil }) {
				t.Errorf("the refusal of %s is not among the outcomes", refused)
			}
		})
	}
}

func TestPatchAllOfNothingSendsNothing(t *testing.T) {
	s := &recordingSender{}
	if got := patchAll(t.Context(), nil, 1, maxPatchesInFlight, true, s.send); len(got) != 0 || len(s.sent) != 0 {
		t.Errorf("patchAll(nil) = %v after sending %v, want nothing", got, s.sent)
	}
}
