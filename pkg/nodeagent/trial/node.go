package trial

import (
	"fmt"
	"strings"
	"time"
)

// maxNamedPods bounds how many failed pods a message names; the rest are
// counted.
const maxNamedPods = 3

// nodeTracker is the part of a Tracker that judges the Node and its pods.
type nodeTracker struct {
	// baseline is the snapshot the signals compare with: the one taken
	// just before the kubelet's restart, or else the first one seen.
	baseline *Snapshot
	// readyBefore is whether the baseline showed the Node Ready; the Ready
	// signal judges only a Node that was.
	readyBefore bool
	// notReady is set while the Node is not seen Ready, since
	// notReadySince (time since boot): the first look that showed it, or
	// the start of tracking, as a restarted kubelet's Node is not Ready
	// until seen so.
	notReady      bool
	notReadySince time.Duration
	everReady     bool
	// short is set while the allocatable signal sees a shortfall, since
	// shortSince (time since boot).
	short      bool
	shortSince time.Duration
	// failure names the first signal that failed the trial; it stays.
	failure string
	// waitingFor is what a trial whose period is over still waits for.
	waitingFor string
	// fit judges the pods the Node held before a drain (fit.go).
	fit fitCheck
}

// SetBaseline gives the snapshot taken just before the kubelet's restart.
// Without one, the first snapshot ObserveNode gets is the baseline: an
// agent that starts during a trial judges only what changes after it
// looked, as it counts only its own probes.
func (t *Tracker) SetBaseline(s Snapshot) {
	b := s.clone()
	t.node.baseline = &b
	t.node.readyBefore = ready(b)
}

func ready(s Snapshot) bool {
	notReady, _ := NotReady(s)
	return !notReady
}

// ObserveNode judges the Node and its pods as seen at now (time since
// boot). The first failing signal fails the trial for good.
func (t *Tracker) ObserveNode(now time.Duration, s Snapshot) {
	n, signals := &t.node, t.terms.Node
	if n.failure != "" {
		return
	}
	if n.baseline == nil {
		t.SetBaseline(s)
	}
	if !n.baseline.PodsKnown && s.PodsKnown {
		// The pods were not known before the restart (their list
		// failed, or the agent restarted mid-trial): judge from the
		// first time they are.
		n.baseline.PodsKnown, n.baseline.Pods = true, s.Pods
	}
	n.waitingFor = ""
	if signals.Ready && n.readyBefore {
		notReady, how := NotReady(s)
		if notReady && !n.notReady {
			n.notReady, n.notReadySince = true, now
		}
		if !notReady {
			n.notReady, n.everReady = false, true
		} else if since := now - n.notReadySince; since >= signals.ReadyGrace {
			if n.everReady {
				n.failure = fmt.Sprintf("the Node has not been Ready for %v (grace %v): %s", since.Round(time.Second), signals.ReadyGrace, how)
			} else {
				n.failure = fmt.Sprintf("the Node was not Ready within %v of the kubelet's restart: %s", signals.ReadyGrace, how)
			}
			return
		} else {
			n.waitingFor = "the Node to be Ready: " + how
		}
	}
	if raised := RaisedPressure(*n.baseline, s, signals.PressureConditions); len(raised) > 0 {
		n.failure = "the Node raised " + strings.Join(raised, "; ")
		return
	}
	if len(signals.PodFailureReasons) > 0 {
		if failed := FailedPods(*n.baseline, s, signals.PodFailureReasons); len(failed) > 0 {
			n.failure = describePodFailures(failed)
			return
		}
	}
	if signals.PodsStopped {
		if stopped := StoppedPods(*n.baseline, s); len(stopped) > 0 {
			n.failure = DescribeStopped(stopped, s)
			return
		}
	}
	failure, waiting := n.fit.observe(now, s, signals.AllocatableGrace, t.terms.Grace)
	if failure != "" {
		n.failure = failure
		return
	}
	if waiting != "" && n.waitingFor == "" {
		n.waitingFor = waiting
	}
	if signals.Allocatable {
		short := AllocatableShortfall(*n.baseline, s)
		switch {
		case len(short) == 0:
			n.short = false
		case !n.short:
			n.short, n.shortSince = true, now
		}
		if n.short && now-n.shortSince >= signals.AllocatableGrace {
			n.failure = strings.Join(short, "; ")
			if signals.AllocatableGrace > 0 {
				n.failure += fmt.Sprintf(" (for %v)", (now - n.shortSince).Round(time.Second))
			}
			return
		}
		if n.short && n.waitingFor == "" {
			// A trial does not pass on a shortfall the kubelet has
			// not resolved yet.
			n.waitingFor = "the kubelet to resolve: " + strings.Join(short, "; ")
		}
	}
}

// describePodFailures names the first few failed pods, with the kubelet's
// reason and message, and counts the rest.
func describePodFailures(failed []PodFailure) string {
	parts := make([]string, 0, maxNamedPods+1)
	for i, f := range failed {
		if i == maxNamedPods {
			parts = append(parts, fmt.Sprintf("and %d more", len(failed)-maxNamedPods))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}
