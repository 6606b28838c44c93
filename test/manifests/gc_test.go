package manifests

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWebhookGCSettings checks what benchmarks read: the shipped GOGC, and
// no GOMEMLIMIT (the invariants in workloads_test.go say why).
func TestWebhookGCSettings(t *testing.T) {
	settings, err := WebhookGCSettings()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(settings, func(s string) bool { return strings.HasPrefix(s, "GOGC=") })
	if i < 0 || len(settings) != 1 {
		t.Fatalf("settings %q, want GOGC alone", settings)
	}
	if gogc, err := strconv.Atoi(strings.TrimPrefix(settings[i], "GOGC=")); err != nil || gogc <= 100 {
		t.Fatalf("settings %q, want GOGC above 100", settings)
	}
}
