package trial

import (
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Resolve gives the terms a trial is judged by: the agent's (base, from its
// flags) with an assignment's own terms (contract.TrialAnnotation, nil for
// none) applied. The period is the assignment's when it gives one; a signal
// it turns off is off; a signal it turns on takes its settings from tuning,
// the agent's flags for every signal whether on or not, so a signal that
// reads pods stays off on an agent that reads none (tuning leaves it off).
// AllowShrink is not a term of the Tracker's: the reconciler hands it over
// with the pods the Node held (SetAfterDrain).
func Resolve(base Terms, tuning NodeSignals, o *contract.TrialTerms) Terms {
	out := base
	out.Node.PressureConditions = append(out.Node.PressureConditions[:0:0], base.Node.PressureConditions...)
	out.Node.PodFailureReasons = append(out.Node.PodFailureReasons[:0:0], base.Node.PodFailureReasons...)
	if o == nil {
		return out
	}
	if o.PeriodSeconds != nil && *o.PeriodSeconds > 0 {
		out.Period = time.Duration(*o.PeriodSeconds) * time.Second
	}
	s := o.Signals
	if s == nil {
		return out
	}
	if s.NodeReady != nil {
		out.Node.Ready = *s.NodeReady && tuning.ReadyGrace > 0
		if out.Node.Ready {
			out.Node.ReadyGrace = tuning.ReadyGrace
		}
	}
	if s.Pressure != nil {
		out.Node.PressureConditions = nil
		if *s.Pressure {
			out.Node.PressureConditions = append(out.Node.PressureConditions, tuning.PressureConditions...)
		}
	}
	if s.PodFailures != nil {
		out.Node.PodFailureReasons = nil
		if *s.PodFailures {
			out.Node.PodFailureReasons = append(out.Node.PodFailureReasons, tuning.PodFailureReasons...)
		}
	}
	if s.PodsStopped != nil {
		out.Node.PodsStopped = *s.PodsStopped && tuning.PodsStopped
	}
	if s.Allocatable != nil {
		out.Node.Allocatable = *s.Allocatable && tuning.Allocatable
		if out.Node.Allocatable {
			out.Node.AllocatableGrace = tuning.AllocatableGrace
		}
	}
	return out
}
