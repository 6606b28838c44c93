package trial

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var errDown = errors.New("connection refused")

func TestVerdict(t *testing.T) {
	terms := Terms{Period: 10 * time.Minute, Grace: time.Minute, FailureThreshold: 3}
	type probe struct {
		at  time.Duration // since boot
		err error
	}
	cases := []struct {
		name       string
		trialStart time.Duration
		since      time.Duration // tracking start
		probes     []probe
		now        time.Duration
		want       Outcome
		wantMsg    string
	}{{
		name:   "healthy for the whole period passes",
		probes: []probe{{10 * time.Second, nil}, {5 * time.Minute, nil}, {10 * time.Minute, nil}},
		now:    10 * time.Minute,
		want:   Pass,
	}, {
		name:   "healthy but period not over continues",
		probes: []probe{{10 * time.Second, nil}},
		now:    9 * time.Minute,
		want:   Continue,
	}, {
		name: "no probe at all does not pass",
		now:  30 * time.Second,
		want: Continue,
	}, {
		name:    "never healthy within grace fails",
		probes:  []probe{{10 * time.Second, errDown}, {30 * time.Second, errDown}, {61 * time.Second, errDown}},
		now:     61 * time.Second,
		want:    Fail,
		wantMsg: "did not become healthy within 1m0s",
	}, {
		name:   "failures before the first healthy probe do not count",
		probes: []probe{{5 * time.Second, errDown}, {10 * time.Second, errDown}, {15 * time.Second, errDown}, {20 * time.Second, errDown}, {25 * time.Second, nil}},
		now:    25 * time.Second,
		want:   Continue,
	}, {
		name:    "repeated failures after healthy fail",
		probes:  []probe{{5 * time.Second, nil}, {10 * time.Second, errDown}, {15 * time.Second, nil}, {20 * time.Second, errDown}, {25 * time.Second, nil}, {30 * time.Second, errDown}},
		now:     30 * time.Second,
		want:    Fail,
		wantMsg: "failed 3 health checks",
	}, {
		name:   "failures below the threshold, then the period ends healthy, passes",
		probes: []probe{{5 * time.Second, nil}, {10 * time.Second, errDown}, {15 * time.Second, errDown}, {11 * time.Minute, nil}},
		now:    11 * time.Minute,
		want:   Pass,
	}, {
		name: "an admin restart (one refused probe between healthy ones) passes",
		probes: []probe{{5 * time.Second, nil}, {2 * time.Minute, nil}, {2*time.Minute + 5*time.Second, errDown},
			{2*time.Minute + 10*time.Second, nil}, {10 * time.Minute, nil}},
		now:  10 * time.Minute,
		want: Pass,
	}, {
		name:    "unhealthy when the period ends keeps the trial open",
		probes:  []probe{{5 * time.Second, nil}, {10 * time.Minute, errDown}},
		now:     10 * time.Minute,
		want:    Continue,
		wantMsg: "waiting for a healthy kubelet",
	}, {
		name:       "agent restarted mid-trial: grace counts from its own start",
		trialStart: 0,
		since:      9 * time.Minute,
		probes:     []probe{{9*time.Minute + 30*time.Second, errDown}},
		now:        9*time.Minute + 30*time.Second,
		want:       Continue,
	}, {
		name:       "agent restarted after the period: one healthy probe passes",
		trialStart: 0,
		since:      20 * time.Minute,
		probes:     []probe{{20 * time.Minute, nil}},
		now:        20 * time.Minute,
		want:       Pass,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tracker := NewTracker(terms, tc.since)
			for _, p := range tc.probes {
				tracker.Observe(p.err)
			}
			got := tracker.Verdict(tc.trialStart, tc.now)
			if got.Outcome != tc.want {
				t.Fatalf("Verdict = %v (%s), want %v", got.Outcome, got.Message, tc.want)
			}
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Fatalf("message %q does not contain %q", got.Message, tc.wantMsg)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Terms{Period: time.Minute, Grace: time.Second, FailureThreshold: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (Terms{}).Validate()
	if err == nil {
		t.Fatal("zero terms accepted")
	}
	for _, want := range []string{"trial period", "grace period", "failure threshold"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}
