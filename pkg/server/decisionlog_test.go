package server

import "testing"

func TestDecisionLog(t *testing.T) {
	for _, tt := range []struct {
		log                DecisionLog
		denials, otherwise bool
	}{
		{DecisionLog{}, false, false},
		{DecisionLog{Mode: DecisionLogOff, Sample: 1}, false, false},
		{DecisionLog{Mode: DecisionLogDenials, Sample: 1}, true, false},
		{DecisionLog{Mode: DecisionLogAll, Sample: 1}, true, true},
		{DecisionLog{Mode: DecisionLogAll, Sample: 0}, true, false},
	} {
		if got := tt.log.Logs(true); got != tt.denials {
			t.Errorf("%+v logs a denial = %v, want %v", tt.log, got, tt.denials)
		}
		if got := tt.log.Logs(false); got != tt.otherwise {
			t.Errorf("%+v logs another decision = %v, want %v", tt.log, got, tt.otherwise)
		}
	}
}

func TestParseDecisionLogMode(t *testing.T) {
	for _, s := range []string{"off", "denials", "all"} {
		if m, err := ParseDecisionLogMode(s); err != nil || string(m) != s {
			t.Errorf("ParseDecisionLogMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "none", "ALL", "denied"} {
		if _, err := ParseDecisionLogMode(s); err == nil {
			t.Errorf("ParseDecisionLogMode(%q) accepted", s)
		}
	}
}
