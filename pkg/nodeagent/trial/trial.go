package trial

import (
	"errors"
	"fmt"
	"time"
)

// Terms are how a trial is judged.
type Terms struct {
	// Period is how long a configuration stays on trial.
	Period time.Duration
	// Grace is how long the kubelet has to become healthy after a restart.
	Grace time.Duration
	// FailureThreshold is how many failed probes, after the kubelet was first
	// healthy, fail the trial.
	FailureThreshold int
	// Node says what of the Node and its pods judges the trial too.
	Node NodeSignals
}

// Validate reports terms that could never pass or never fail.
func (p Terms) Validate() error {
	var errs []error
	if p.Period <= 0 {
		errs = append(errs, fmt.Errorf("trial period %v: must be positive", p.Period))
	}
	if p.Grace <= 0 {
		errs = append(errs, fmt.Errorf("grace period %v: must be positive", p.Grace))
	}
	if p.FailureThreshold < 1 {
		errs = append(errs, fmt.Errorf("failure threshold %d: must be at least 1", p.FailureThreshold))
	}
	if err := p.Node.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Outcome is a trial's state.
type Outcome int

const (
	// Continue: not decided yet.
	Continue Outcome = iota
	// Pass: the configuration survived; it becomes last-known-good.
	Pass
	// Fail: the configuration is rolled back.
	Fail
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "Pass"
	case Fail:
		return "Fail"
	default:
		return "Continue"
	}
}

// Verdict is a Tracker's judgement at one moment.
type Verdict struct {
	Outcome Outcome
	// Message says why, for Fail (and for Continue, what is awaited).
	Message string
	// Remaining is the time left until the period ends (zero once it has).
	Remaining time.Duration
}

// Tracker collects the probes of one trial as seen by this process.
type Tracker struct {
	terms Terms
	// observingSince is when this process started watching: the later of
	// the kubelet's restart and the agent's own start.
	observingSince time.Duration
	everHealthy    bool
	failures       int
	probes         int
	lastHealthy    bool
	lastErr        error

	// node is what the Node and its pods said; see node.go.
	node nodeTracker
}

// NewTracker starts tracking at since (time since boot).
func NewTracker(terms Terms, since time.Duration) *Tracker {
	return &Tracker{terms: terms, observingSince: since, node: nodeTracker{notReady: true, notReadySince: since}}
}

// Observe records one probe result (nil is healthy).
func (t *Tracker) Observe(probeErr error) {
	t.probes++
	t.lastHealthy = probeErr == nil
	t.lastErr = probeErr
	if probeErr == nil {
		t.everHealthy = true
		return
	}
	if t.everHealthy {
		t.failures++
	}
}

// Verdict judges a trial that started at trialStart, at now (both time
// since boot, on the current boot).
func (t *Tracker) Verdict(trialStart, now time.Duration) Verdict {
	remaining := max(trialStart+t.terms.Period-now, 0)
	switch {
	case t.failures >= t.terms.FailureThreshold:
		return Verdict{Outcome: Fail, Remaining: remaining, Message: fmt.Sprintf(
			"the kubelet failed %d health checks during its trial (threshold %d); last: %v", t.failures, t.terms.FailureThreshold, t.lastErr)}
	case !t.everHealthy && now-t.observingSince >= t.terms.Grace:
		return Verdict{Outcome: Fail, Remaining: remaining, Message: fmt.Sprintf(
			"the kubelet did not become healthy within %v of its restart; last: %v", t.terms.Grace, t.describeLast())}
	case t.node.failure != "":
		return Verdict{Outcome: Fail, Remaining: remaining, Message: t.node.failure}
	case remaining == 0 && t.probes > 0 && t.lastHealthy && t.node.waitingFor != "":
		return Verdict{Outcome: Continue, Message: "trial period over, waiting for " + t.node.waitingFor}
	case remaining == 0 && t.probes > 0 && t.lastHealthy:
		return Verdict{Outcome: Pass}
	case remaining == 0:
		return Verdict{Outcome: Continue, Message: fmt.Sprintf("trial period over, waiting for a healthy kubelet; last: %v", t.describeLast())}
	default:
		return Verdict{Outcome: Continue, Remaining: remaining, Message: fmt.Sprintf("%v of the trial left", remaining.Round(time.Second))}
	}
}

func (t *Tracker) describeLast() string {
	if t.probes == 0 {
		return "no probe yet"
	}
	if t.lastErr == nil {
		return "healthy"
	}
	return t.lastErr.Error()
}
