package server

import (
	"fmt"
	"math/rand/v2"
)

// DecisionLogMode selects the review decisions that get a log line of their
// own (the webhook's --decision-log).
type DecisionLogMode string

const (
	// DecisionLogOff logs no decision.
	DecisionLogOff DecisionLogMode = "off"
	// DecisionLogDenials logs admission refusals and authorization denials.
	DecisionLogDenials DecisionLogMode = "denials"
	// DecisionLogAll logs denials, and a sample of every other decision.
	DecisionLogAll DecisionLogMode = "all"
)

// ParseDecisionLogMode parses a mode as the flag spells it.
func ParseDecisionLogMode(s string) (DecisionLogMode, error) {
	switch m := DecisionLogMode(s); m {
	case DecisionLogOff, DecisionLogDenials, DecisionLogAll:
		return m, nil
	}
	return "", fmt.Errorf("unknown decision log mode %q: want %s, %s or %s", s, DecisionLogOff, DecisionLogDenials, DecisionLogAll)
}

// DecisionLog says which decisions to log. The zero value logs none.
type DecisionLog struct {
	Mode DecisionLogMode
	// Sample is the fraction (0 to 1) of the decisions that are not
	// denials that mode all logs. Denials are never sampled away: they are
	// few, and they are the lines an operator looks for.
	Sample float64
}

// Logs reports whether a decision gets a line; denied says whether it
// refused the request.
func (d DecisionLog) Logs(denied bool) bool {
	switch d.Mode {
	case DecisionLogDenials:
		return denied
	case DecisionLogAll:
		return denied || d.Sample >= 1 || (d.Sample > 0 && rand.Float64() < d.Sample)
	}
	return false
}
