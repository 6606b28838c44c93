package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestDefaultsValidate(t *testing.T) {
	if errs := parse(t).Validate(); len(errs) > 0 {
		t.Fatalf("defaults: %v", errs)
	}
}

func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers=0"}, "--workers"},
		{[]string{"--listen-address=nonsense"}, "--listen-address"},
		{[]string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=5s"}, "longer than --leader-elect-renew-deadline"},
		{[]string{"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"}, "times --leader-elect-retry-period"},
		{[]string{"--leader-elect-lease-namespace=Not_A_Namespace"}, "--leader-elect-lease-namespace"},
		{[]string{"--resync-period=-1s"}, "--resync-period"},
		{[]string{"--status-interval=0s"}, "--status-interval"},
		{[]string{"--max-patches-in-flight=0"}, "--max-patches-in-flight"},
		{[]string{"--kube-api-content-type=application/yaml"}, "--kube-api-content-type"},
		{[]string{"--event-burst=0"}, "--event-qps and --event-burst"},
	} {
		errs := parse(t, tc.args...).Validate()
		found := false
		for _, err := range errs {
			found = found || strings.Contains(err.Error(), tc.want)
		}
		if !found {
			t.Errorf("%v: errors %v, want one about %s", tc.args, errs, tc.want)
		}
	}
}

// TestNoLeaderElection: without a Lease its settings are not checked.
func TestNoLeaderElection(t *testing.T) {
	o := parse(t, "--leader-elect=false", "--leader-elect-lease-duration=0s")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestShortLeaseForTests(t *testing.T) {
	o := parse(t, "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if o.LeaseRetryPeriod != 500*time.Millisecond {
		t.Fatal(o.LeaseRetryPeriod)
	}
}
