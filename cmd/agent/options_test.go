package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
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
	want := kubelet.NewSystemdRestarter("unix:path=/run/dbus/system_bus_socket", "kubelet.service", 2*time.Minute)
	if got, ok := cfg.Restarter.(*kubelet.SystemdRestarter); !ok || *got != *want {
		t.Fatalf("default restarter %#v, want %#v", cfg.Restarter, want)
	}
}

func TestRestartPath(t *testing.T) {
	o := parse(t, "--node-name=n", "--kubelet-restart-command=kubeletunit restart", "--kubelet-restart-timeout=5s")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	got, ok := o.Config().Restarter.(*kubelet.CommandRestarter)
	if !ok || strings.Join(got.Argv, "|") != "kubeletunit|restart" || got.Timeout != 5*time.Second {
		t.Fatalf("an explicit command gave %#v", o.Config().Restarter)
	}

	o = parse(t, "--node-name=n", "--systemd-bus-address=unix:path=/host/run/dbus/system_bus_socket", "--kubelet-unit=snap.k8s.kubelet.service")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, ok := o.Config().Restarter.(*kubelet.SystemdRestarter); !ok || got.BusAddress != "unix:path=/host/run/dbus/system_bus_socket" || got.Unit != "snap.k8s.kubelet.service" {
		t.Fatalf("D-Bus settings gave %#v", o.Config().Restarter)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubelet-restart-command=systemctl restart kubelet", "--kubelet-unit=k8s-kubelet.service"}, "give one or the other"},
		{[]string{"--kubelet-restart-command=true", "--systemd-bus-address=unix:path=/x"}, "give one or the other"},
		{[]string{"--kubelet-restart-command=   "}, "--kubelet-restart-command"},
		{[]string{"--kubelet-unit=kubelet"}, "--kubelet-unit"},
		{[]string{"--systemd-bus-address=/run/dbus/system_bus_socket"}, "--systemd-bus-address"},
		{[]string{"--kubelet-restart-timeout=0"}, "--kubelet-restart-timeout"},
	} {
		errs := parse(t, append([]string{"--node-name=n"}, tc.args...)...).Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%v: got %v, want one error about %s", tc.args, errs, tc.want)
		}
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

func TestTrialSignalFlags(t *testing.T) {
	cfg := parse(t, "--node-name=n").Config()
	want := trial.NodeSignals{Ready: true, ReadyGrace: 2 * time.Minute, PressureConditions: trial.DefaultPressureConditions,
		PodFailureReasons: trial.DefaultPodFailureReasons, PodsStopped: true, Allocatable: true, AllocatableGrace: 30 * time.Second}
	if !reflect.DeepEqual(cfg.Trial.Node, want) {
		t.Errorf("default signals %+v, want every one on: %+v", cfg.Trial.Node, want)
	}

	o := parse(t, "--node-name=n", "--trial-node-ready=false", "--trial-pressure=false", "--trial-read-pods=false")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := o.Config().Trial.Node; !reflect.DeepEqual(got, trial.NodeSignals{ReadyGrace: 2 * time.Minute, AllocatableGrace: 30 * time.Second}) || got.ReadsPods() {
		t.Errorf("every signal turned off gave %+v", got)
	}

	o = parse(t, "--node-name=n", "--trial-ready-grace=30s", "--trial-pressure-conditions=DiskPressure",
		"--trial-pod-failure-reasons=", "--trial-pods-stopped=false", "--trial-allocatable=true")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	got := o.Config().Trial.Node
	if got.ReadyGrace != 30*time.Second || !reflect.DeepEqual(got.PressureConditions, []corev1.NodeConditionType{corev1.NodeDiskPressure}) ||
		got.PodFailureReasons != nil || got.PodsStopped || !got.Allocatable || !got.ReadsPods() {
		t.Errorf("tuned signals gave %+v", got)
	}

	errs := parse(t, "--node-name=n", "--trial-ready-grace=0", "--trial-pressure-conditions=Ready", "--trial-pod-failure-reasons=*",
		"--trial-allocatable-grace=-1s").Validate()
	joined := fmt.Sprint(errs)
	for _, want := range []string{"--trial-ready-grace", `"Ready"`, `"*"`, "--trial-allocatable-grace"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no error mentions %s: %s", want, joined)
		}
	}
	// A Ready signal turned off needs no grace.
	if errs := parse(t, "--node-name=n", "--trial-node-ready=false", "--trial-ready-grace=0").Validate(); len(errs) > 0 {
		t.Errorf("grace refused with the Ready signal off: %v", errs)
	}
}

// TestPolicyConfigIsSettings: the flag's old name still sets the settings
// file, and help shows only --settings.
func TestPolicyConfigIsSettings(t *testing.T) {
	for _, arg := range []string{"--settings=/etc/s.yaml", "--policy-config=/etc/s.yaml"} {
		if o := parse(t, arg); o.Settings != "/etc/s.yaml" {
			t.Errorf("%s: Settings = %q", arg, o.Settings)
		}
	}
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	if usage := fs.FlagUsages(); strings.Contains(usage, "policy-config") || !strings.Contains(usage, "--settings") {
		t.Errorf("help shows --policy-config, or not --settings:\n%s", usage)
	}
}
