package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %v: %v", args, err)
	}
	return o
}

func TestDefaultsAreValid(t *testing.T) {
	o := parse(t, "--node-name=node-1")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("defaults: %v", errs)
	}
	cfg := o.Config()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the agent refuses the defaults: %v", err)
	}
	if strings.Join(cfg.RestartCommand, "|") != "systemctl|restart|kubelet" {
		t.Fatalf("restart command %q", cfg.RestartCommand)
	}
}

func TestValidateNamesEveryBadFlag(t *testing.T) {
	o := parse(t,
		"--node-name=Not_A_Name",
		"--kubelet-config-mode=drop-in", "--kubelet-config-file=/etc/kubernetes/kubelet.conf.d/90-nodeguard.yaml",
		"--local-fields=providerID,noSuchField",
		"--kubelet-restart-command=systemctl 'restart",
		"--kubelet-healthz-url=127.0.0.1:10248",
		"--health-probe-period=1s", "--health-probe-timeout=2s",
		"--trial-period=0", "--trial-failure-threshold=0",
		"--kubelet-version=banana",
		"--listen-address=localhost",
	)
	errs := o.Validate()
	joined := ""
	for _, err := range errs {
		joined += err.Error() + "\n"
	}
	for _, want := range []string{"--node-name", ".conf", "noSuchField", "--kubelet-restart-command", "--kubelet-healthz-url",
		"--health-probe-timeout", "--trial-period", "--trial-failure-threshold", "--kubelet-version", "--listen-address"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no error mentions %s; got:\n%s", want, joined)
		}
	}
}

func TestConfigModeNeedsASeparateLocalFile(t *testing.T) {
	o := parse(t, "--node-name=n", "--kubelet-config-file=/var/lib/kubelet/config.yaml", "--local-config-file=/var/lib/kubelet/../kubelet/config.yaml")
	errs := o.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "must differ") {
		t.Fatalf("got %v", errs)
	}
}

func TestDropInModeIgnoresTheLocalFile(t *testing.T) {
	o := parse(t, "--node-name=n", "--kubelet-config-mode=drop-in", "--kubelet-config-file=/etc/kubernetes/kubelet.conf.d/90-nodeguard.conf", "--local-config-file=")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := o.Config().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestEveryFlagIsExplained(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if len(strings.TrimSpace(f.Usage)) < 10 {
			t.Errorf("--%s has no real help text: %q", f.Name, f.Usage)
		}
	})
}
