package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
	"github.com/nodeguard/nodeguard/pkg/nodeagent"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// Options are the agent's command-line settings.
type Options struct {
	NodeName     string
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int

	StateDir string

	KubeletConfigMode string
	KubeletConfigFile string
	LocalConfigFile   string
	LocalFields       []string

	RestartCommand    string
	StopCommand       string
	StartCommand      string
	SystemdBusAddress string
	KubeletUnit       string
	RestartTimeout    time.Duration

	// Changes that need the node drained (docs/disruptive-changes.md).
	Drain           string
	DrainTimeout    time.Duration
	DrainPollPeriod time.Duration
	KubeletRootDir  string

	HealthzURL            string
	KubeletServerURL      string
	KubeletCAFile         string
	KubeletReadTimeout    time.Duration
	ProbePeriod           time.Duration
	ProbeTimeout          time.Duration
	TrialPeriod           time.Duration
	TrialGracePeriod      time.Duration
	TrialFailureThreshold int
	KubeletVersion        string

	// The trial's signals of the Node and its pods (pkg/nodeagent/trial).
	TrialNodeReady          bool
	TrialReadyGrace         time.Duration
	TrialPressure           bool
	TrialPressureConditions []string
	TrialReadPods           bool
	TrialPodFailureReasons  []string
	TrialPodsStopped        bool
	TrialAllocatable        bool
	TrialAllocatableGrace   time.Duration

	// The webhook's hardening rules, which the agent applies itself
	// (reconciler.Validator); hardening is what Validate read.
	Settings                  string
	ContainerRuntimeEndpoints []string
	hardening                 reconciler.Rules

	ListenAddress string
	ResyncPeriod  time.Duration
}

// NewOptions returns the defaults, laid out for a kubeadm node.
func NewOptions() *Options {
	hostname, _ := os.Hostname()
	o := &Options{
		NodeName:              strings.ToLower(hostname),
		Kubeconfig:            "/etc/kubernetes/kubelet.conf",
		KubeAPIQPS:            5,
		KubeAPIBurst:          10,
		StateDir:              "/var/lib/nodeguard",
		KubeletConfigMode:     string(kubelet.ModeConfig),
		KubeletConfigFile:     "/var/lib/kubelet/config.yaml",
		LocalConfigFile:       "/etc/nodeguard/kubelet-local.yaml",
		LocalFields:           append([]string(nil), kubelet.DefaultLocalFields...),
		SystemdBusAddress:     kubelet.DefaultSystemBusAddress,
		KubeletUnit:           kubelet.DefaultKubeletUnit,
		RestartTimeout:        2 * time.Minute,
		Drain:                 contract.DrainAuto,
		DrainTimeout:          5 * time.Minute,
		DrainPollPeriod:       5 * time.Second,
		KubeletRootDir:        kubelet.DefaultRootDir,
		HealthzURL:            "http://127.0.0.1:10248/healthz",
		KubeletServerURL:      kubelet.DefaultServerURL,
		KubeletReadTimeout:    5 * time.Second,
		ProbePeriod:           5 * time.Second,
		ProbeTimeout:          3 * time.Second,
		TrialPeriod:           5 * time.Minute,
		TrialGracePeriod:      2 * time.Minute,
		TrialFailureThreshold: 6,
		TrialNodeReady:        true,
		TrialReadyGrace:       2 * time.Minute,
		TrialPressure:         true,
		TrialReadPods:         true,
		TrialPodsStopped:      true,
		TrialAllocatable:      true,
		TrialAllocatableGrace: 30 * time.Second,
		ListenAddress:         "127.0.0.1:10266",
		ResyncPeriod:          time.Minute,
	}
	for _, c := range trial.DefaultPressureConditions {
		o.TrialPressureConditions = append(o.TrialPressureConditions, string(c))
	}
	o.TrialPodFailureReasons = append([]string(nil), trial.DefaultPodFailureReasons...)
	o.ContainerRuntimeEndpoints = append([]string(nil), hardening.DefaultRuntimeEndpoints...)
	return o
}

// AddFlags registers the options on fs (program.Main adds klog's).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of this node's Node object; the kubeconfig's identity must be system:node:<node-name>. Defaults to the lower-cased hostname, as the kubelet's does.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "The kubelet's kubeconfig. The agent uses the kubelet's own credentials; a client certificate named by path (e.g. /var/lib/kubelet/pki/kubelet-client-current.pem) is reloaded when the kubelet rotates it. Until the file and its certificate exist (TLS bootstrap), the agent waits with backoff and runs from its checkpoints.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the kube-apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the kube-apiserver.")

	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "Directory for checkpoints and the assigned, last-known-good, active, trial and bad records (created with mode 0700). Must survive reboots. One agent runs per directory: an agent waits while another holds its agent.lock.")

	fs.StringVar(&o.KubeletConfigMode, "kubelet-config-mode", o.KubeletConfigMode, `Which kubelet file the agent owns. "config": the kubelet's --config file, rendered from the ConfigMap with node-local fields taken from --local-config-file, or a copy of that file when nothing is assigned. "drop-in": one drop-in in the kubelet's --config-dir (its name must end in .conf), holding the ConfigMap minus the node-local fields, and removed when nothing is assigned.`)
	fs.StringVar(&o.KubeletConfigFile, "kubelet-config-file", o.KubeletConfigFile, "The file the agent writes (atomically): the kubelet's --config file in config mode, e.g. /etc/kubernetes/kubelet.conf.d/90-nodeguard.conf in drop-in mode.")
	fs.StringVar(&o.LocalConfigFile, "local-config-file", o.LocalConfigFile, "Config mode only: this node's own KubeletConfiguration. Written as-is when nothing is assigned, and the source of the node-local fields otherwise. When it does not exist at start, the agent creates it as a copy of --kubelet-config-file, unless that file was written by the agent (an assigned configuration): then it refuses to start until the file is restored by hand. Must differ from --kubelet-config-file.")
	fs.StringSliceVar(&o.LocalFields, "local-fields", o.LocalFields, "Top-level KubeletConfiguration fields that are node-specific and never taken from a ConfigMap: in config mode copied from --local-config-file (or dropped when it does not set them), in drop-in mode left out of the drop-in.")

	fs.StringVar(&o.SystemdBusAddress, "systemd-bus-address", o.SystemdBusAddress, "D-Bus address of the host's system bus, through which systemd is asked to restart --kubelet-unit (Manager.RestartUnit, mode replace) and the job's result awaited. In a pod, mount the host's /run/dbus. Restarting a unit needs root or a polkit rule. Not used with --kubelet-restart-command.")
	fs.StringVar(&o.KubeletUnit, "kubelet-unit", o.KubeletUnit, "The kubelet's systemd unit, in full (kubelet.service, not kubelet). A restart job that systemd finishes with a result other than done (failed, timeout, canceled, ...) is a failed restart. Not used with --kubelet-restart-command.")
	fs.StringVar(&o.RestartCommand, "kubelet-restart-command", o.RestartCommand, `For hosts whose kubelet is not a systemd unit: a command that restarts the kubelet, used instead of D-Bus when set (empty, the default, means D-Bus). Split into words without a shell (quotes and backslashes group words; no variables, globs or pipes: write sh -c '...' for those). Must exit 0 once the restart is issued.`)
	fs.StringVar(&o.StopCommand, "kubelet-stop-command", o.StopCommand, "With --kubelet-restart-command: a command that stops the kubelet (split like it), used with --kubelet-start-command for a change that invalidates the kubelet's state files, which are removed while it is stopped. Without them the files are removed just before the restart command. Not used with D-Bus, where systemd stops and starts --kubelet-unit.")
	fs.StringVar(&o.StartCommand, "kubelet-start-command", o.StartCommand, "With --kubelet-stop-command: a command that starts the kubelet again.")
	fs.DurationVar(&o.RestartTimeout, "kubelet-restart-timeout", o.RestartTimeout, "How long one restart may take (connecting to the bus and waiting for systemd's job result, or running the command, which is then killed) before it counts as failed and the apply is retried. A stop and a start each get as long.")

	fs.StringVar(&o.Drain, "drain", o.Drain, `Whether a change is applied through a drain (cordon, evict through the Eviction API respecting PodDisruptionBudgets, stop the kubelet, remove the state files the change invalidates, start it, trial, uncordon), for Nodes without the nodeguard.dev/drain annotation (which a rollout's spec.drain sets): "Auto" drains when the change needs it (docs/disruptive-changes.md lists every field), "Always" for every change, "Never" for none (a change the kubelet refuses to start with then fails its trial and is rolled back). DaemonSet pods, mirror pods and finished pods stay. As with kubectl drain, a pod no controller recreates and a pod with emptyDir data block the drain (reason DrainBlocked: nothing is evicted, the Node is uncordoned and the change not applied) unless the Node's nodeguard.dev/drain-force or nodeguard.dev/drain-delete-emptydir-data annotation (a rollout's spec.drainOptions) is "true"; every other pod bound to the node is evicted. After the drain, the trial also judges whether the pods the Node ran before it fit its new allocatable.`)
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "How long a drain may wait for pods to leave (a PodDisruptionBudget that allows no eviction, a pod slow to terminate). Past it the Node is uncordoned and the change is not applied: the status names the pods that blocked it (reason DrainTimedOut), and the configuration is not retried until the ConfigMap changes. A rollback's drain that times out goes back anyway.")
	fs.DurationVar(&o.DrainPollPeriod, "drain-poll-period", o.DrainPollPeriod, "How often a drain in progress asks again for the evictions a PodDisruptionBudget refused, and looks for pods still terminating.")
	fs.StringVar(&o.KubeletRootDir, "kubelet-root-dir", o.KubeletRootDir, "The kubelet's --root-dir, where it keeps the state files a drained change may remove (cpu_manager_state, memory_manager_state). In a pod, mount it from the host.")

	fs.StringVar(&o.HealthzURL, "kubelet-healthz-url", o.HealthzURL, "The kubelet's health endpoint (healthzBindAddress:healthzPort, kept node-local for this reason), probed during trials.")
	fs.StringVar(&o.KubeletServerURL, "kubelet-server-url", o.KubeletServerURL, "The kubelet's HTTPS server (its address and --port), where the agent reads the configuration the kubelet runs (/configz: defaults, --config, drop-ins and flags merged) and its flags (/flagz), with the kubelet's own credentials from --kubeconfig. The kubelet must authenticate the node's client certificate (authentication.x509.clientCAFile) and authorize through the apiserver (authorization.mode Webhook), whose nodeguard authorizer lets a node get its own nodes/configz and nothing of any other Node. A configuration is active only once this shows it running: a trial does not pass until it does, and outside trials it is compared again every --resync-period.")
	fs.StringVar(&o.KubeletCAFile, "kubelet-ca-file", o.KubeletCAFile, "A CA bundle that verifies the kubelet's serving certificate at --kubelet-server-url (e.g. the cluster's CA with serverTLSBootstrap, or the kubelet's self-signed /var/lib/kubelet/pki/kubelet.crt). Empty: not verified, as kube-apiserver does without --kubelet-certificate-authority; the kubelet is on this node.")
	fs.DurationVar(&o.KubeletReadTimeout, "kubelet-read-timeout", o.KubeletReadTimeout, "How long one read of the kubelet's /configz or /flagz may take.")
	fs.DurationVar(&o.ProbePeriod, "health-probe-period", o.ProbePeriod, "How often the kubelet is probed during a trial.")
	fs.DurationVar(&o.ProbeTimeout, "health-probe-timeout", o.ProbeTimeout, "How long one probe may take; a slower answer counts as a failure (a hung kubelet). Must be shorter than --health-probe-period.")
	fs.DurationVar(&o.TrialPeriod, "trial-period", o.TrialPeriod, "How long a newly applied configuration is on trial before it becomes last-known-good; five minutes, so that a trial and a kubelet restart fit in a rollout's default progress deadline (ten minutes). Measured as time since boot on one boot; a reboot starts the trial over. A Node's nodeguard.dev/trial annotation (a rollout's spec.trial) may give its assignment another period, and turn the --trial-* signals on or off; these flags are the defaults.")
	fs.DurationVar(&o.TrialGracePeriod, "trial-grace-period", o.TrialGracePeriod, "How long the kubelet has to answer /healthz after a restart (or after the agent starts during a trial) before the configuration is rolled back.")
	fs.IntVar(&o.TrialFailureThreshold, "trial-failure-threshold", o.TrialFailureThreshold, "Failed probes, after the kubelet was first healthy, that roll a configuration on trial back. Only probes made by the running agent, on this boot, count.")
	fs.BoolVar(&o.TrialNodeReady, "trial-node-ready", o.TrialNodeReady, "Fail a trial when the Node, Ready before the kubelet's restart, is not Ready again within --trial-ready-grace of it, or later stops being Ready for that long; a trial does not pass while the Node is not Ready. On by default: a runtime or network setting can leave the Node NotReady while the kubelet's /healthz answers.")
	fs.DurationVar(&o.TrialReadyGrace, "trial-ready-grace", o.TrialReadyGrace, "How long the Node may be other than Ready at a time during a trial, the first time counted from the kubelet's restart. The default, like --trial-grace-period, leaves a slow node time to report after a restart (a kubelet reports NotReady for a few seconds at start) and stays below a 10m trial.")
	fs.BoolVar(&o.TrialPressure, "trial-pressure", o.TrialPressure, "Fail a trial when the Node raises one of --trial-pressure-conditions that was not raised before the kubelet's restart. On by default: eviction thresholds beyond what the node has make the kubelet raise pressure and evict pods.")
	fs.StringSliceVar(&o.TrialPressureConditions, "trial-pressure-conditions", o.TrialPressureConditions, "The pressure conditions --trial-pressure watches (MemoryPressure, DiskPressure, PIDPressure). By default all three, each of which follows from the kubelet's eviction thresholds.")
	fs.BoolVar(&o.TrialReadPods, "trial-read-pods", o.TrialReadPods, "List the pods bound to this node during trials (just before the restart and once a --health-probe-period; fieldSelector spec.nodeName, the list the kubelet's identity is allowed) so that --trial-pod-failure-reasons, --trial-pods-stopped and --trial-allocatable can judge trials. On by default: maxPods, reservations and eviction thresholds hurt pods while the kubelet stays healthy. False reads no pods and turns the three off.")
	fs.StringSliceVar(&o.TrialPodFailureReasons, "trial-pod-failure-reasons", o.TrialPodFailureReasons, "status.reason values of pods the kubelet failed (phase Failed) that fail a trial when a pod bound to this node got one after the kubelet's restart; X* matches every reason starting with X. The default lists the kubelet's own admission refusals and evictions, each of which its configuration can cause; an empty list turns this signal off.")
	fs.BoolVar(&o.TrialPodsStopped, "trial-pods-stopped", o.TrialPodsStopped, "Fail a trial when a pod bound to this node with restartPolicy Always, not over before the kubelet's restart, is over (Succeeded or Failed) with no reason and not being deleted. On by default: only the kubelet ends such a pod, and a running pod it rejects at admission after a restart ends this way, its OutOf* reason replaced by the phase its killed containers left.")
	fs.BoolVar(&o.TrialAllocatable, "trial-allocatable", o.TrialAllocatable, "Fail a trial when the Node's allocatable cpu, memory, ephemeral-storage or pods drops, after the kubelet's restart, below what its running pods request. On by default: it catches reservations and maxPods that leave running pods without room even when the kubelet admitted them against the Node's old status.")
	fs.DurationVar(&o.TrialAllocatableGrace, "trial-allocatable-grace", o.TrialAllocatableGrace, "How long an allocatable below the running pods' requests may last before --trial-allocatable fails the trial (0: at once). The restarted kubelet rejects the pods it has no room for at once and reports it in the pods' status within about 10s (its status manager's periodic sync), naming the pods and its reason, which says more than a sum; a shortfall that outlasts 30s is pods it admitted against the Node status it read before reporting its own. The check after a drain (the pods the Node ran before it must fit its new allocatable) waits as long, whether --trial-allocatable is on or not.")
	fs.StringVar(&o.Settings, "settings", o.Settings, "The webhook's settings file (its --settings, a NodeguardPolicy; e.g. the nodeguard-policy ConfigMap mounted): a configuration that sets one of its forbiddenDynamicFields (other than a --local-fields one) is refused before anything is written, as the webhook refuses it (ValidationFailed). Read at start. Empty forbids no field; the dangerous-field rules apply either way.")
	// The flag's name before the settings file was called settings, kept
	// so that existing DaemonSets go on working.
	fs.StringVar(&o.Settings, "policy-config", o.Settings, "Deprecated name of --settings.")
	_ = fs.MarkDeprecated("policy-config", "use --settings")
	fs.StringSliceVar(&o.ContainerRuntimeEndpoints, "container-runtime-endpoints", o.ContainerRuntimeEndpoints, "The runtime sockets a configuration's containerRuntimeEndpoint and imageServiceEndpoint may name, as the webhook's data.nodeguard.config.container_runtime_endpoints (both default to containerd's and CRI-O's well-known sockets). Both fields are node-local by default (--local-fields), and then never judged.")
	fs.StringVar(&o.KubeletVersion, "kubelet-version", o.KubeletVersion, "The kubelet's version (e.g. 1.37.2) for the feature-gate check. Empty means the Node's status.nodeInfo.kubeletVersion.")

	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "host:port for the agent's own /healthz, /readyz and /metrics (plain HTTP). Empty disables. Keep it on loopback unless a scraper needs it.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "How often to look again without an event, e.g. to notice an edited --local-config-file or an overwritten kubelet file, and to compare the kubelet's running configuration with the one applied (drift).")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", o.NodeName, strings.Join(msgs, "; ")))
	}
	for flagName, value := range map[string]string{"--kubeconfig": o.Kubeconfig, "--state-dir": o.StateDir, "--kubelet-config-file": o.KubeletConfigFile} {
		if value == "" {
			errs = append(errs, fmt.Errorf("%s is required", flagName))
		}
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	switch kubelet.Mode(o.KubeletConfigMode) {
	case kubelet.ModeConfig:
		switch {
		case o.LocalConfigFile == "":
			errs = append(errs, errors.New("--local-config-file is required in config mode"))
		case filepath.Clean(o.LocalConfigFile) == filepath.Clean(o.KubeletConfigFile):
			errs = append(errs, errors.New("--local-config-file must differ from --kubelet-config-file: the agent overwrites the latter"))
		}
	case kubelet.ModeDropIn:
		if !strings.HasSuffix(o.KubeletConfigFile, ".conf") {
			errs = append(errs, fmt.Errorf("--kubelet-config-file %q: a drop-in must end in .conf, or the kubelet ignores it", o.KubeletConfigFile))
		}
	default:
		errs = append(errs, fmt.Errorf("--kubelet-config-mode %q: want %q or %q", o.KubeletConfigMode, kubelet.ModeConfig, kubelet.ModeDropIn))
	}
	if err := kubelet.CheckLocalFields(o.LocalFields); err != nil {
		errs = append(errs, fmt.Errorf("--local-fields: %w", err))
	}
	errs = append(errs, o.validateRestart()...)
	if !contract.ValidDrainMode(o.Drain) || o.Drain == "" {
		errs = append(errs, fmt.Errorf("--drain %q: want %s, %s or %s", o.Drain, contract.DrainAuto, contract.DrainAlways, contract.DrainNever))
	}
	if o.KubeletRootDir == "" || !filepath.IsAbs(o.KubeletRootDir) {
		errs = append(errs, fmt.Errorf("--kubelet-root-dir %q: want an absolute path", o.KubeletRootDir))
	}
	if u, err := url.Parse(o.HealthzURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--kubelet-healthz-url %q: want an http(s) URL", o.HealthzURL))
	}
	if u, err := url.Parse(o.KubeletServerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		errs = append(errs, fmt.Errorf("--kubelet-server-url %q: want https://HOST:PORT", o.KubeletServerURL))
	}
	if o.KubeletCAFile != "" {
		if _, err := os.Stat(o.KubeletCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--kubelet-ca-file: %w", err))
		}
	}
	for flagName, d := range map[string]time.Duration{
		"--kubelet-restart-timeout": o.RestartTimeout, "--health-probe-period": o.ProbePeriod, "--health-probe-timeout": o.ProbeTimeout,
		"--trial-period": o.TrialPeriod, "--trial-grace-period": o.TrialGracePeriod, "--resync-period": o.ResyncPeriod,
		"--drain-timeout": o.DrainTimeout, "--drain-poll-period": o.DrainPollPeriod, "--kubelet-read-timeout": o.KubeletReadTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", flagName, d))
		}
	}
	if o.ProbeTimeout >= o.ProbePeriod {
		errs = append(errs, errors.New("--health-probe-timeout must be shorter than --health-probe-period"))
	}
	if o.TrialNodeReady && o.TrialReadyGrace <= 0 {
		errs = append(errs, fmt.Errorf("--trial-ready-grace %v: must be positive", o.TrialReadyGrace))
	}
	// The lists are checked even where their signal is off, so that a
	// typo does not wait for the day it is turned on; the Ready grace is
	// checked above, under its flag's name.
	var signals trial.NodeSignals
	for _, r := range o.TrialPodFailureReasons {
		if r = strings.TrimSpace(r); r != "" {
			signals.PodFailureReasons = append(signals.PodFailureReasons, r)
		}
	}
	for _, c := range o.TrialPressureConditions {
		signals.PressureConditions = append(signals.PressureConditions, corev1.NodeConditionType(c))
	}
	if err := signals.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--trial-pressure-conditions, --trial-pod-failure-reasons: %w", err))
	}
	if o.TrialAllocatableGrace < 0 {
		errs = append(errs, fmt.Errorf("--trial-allocatable-grace %v: must not be negative", o.TrialAllocatableGrace))
	}
	if o.TrialFailureThreshold < 1 {
		errs = append(errs, fmt.Errorf("--trial-failure-threshold %d: must be at least 1", o.TrialFailureThreshold))
	}
	if o.KubeletVersion != "" {
		if _, err := version.ParseGeneric(o.KubeletVersion); err != nil {
			errs = append(errs, fmt.Errorf("--kubelet-version %q: %w", o.KubeletVersion, err))
		}
	}
	if rules, err := reconciler.LoadRules(o.Settings, o.ContainerRuntimeEndpoints); err != nil {
		errs = append(errs, fmt.Errorf("--settings: %w", err))
	} else {
		o.hardening = rules
	}
	if o.ListenAddress != "" {
		if _, _, err := net.SplitHostPort(o.ListenAddress); err != nil {
			errs = append(errs, fmt.Errorf("--listen-address %q: %w", o.ListenAddress, err))
		}
	}
	return errs
}

// usesCommand says which way the kubelet is restarted: by the command when
// one is given, else through systemd over D-Bus. An explicit setting wins
// over a default, so a host without systemd needs only the command, and
// the shipped default needs nothing.
func (o *Options) usesCommand() bool {
	return o.RestartCommand != ""
}

// validateRestart checks the flags of the restart path in use, and refuses
// D-Bus settings given alongside a command, which would be silently unused.
func (o *Options) validateRestart() []error {
	if o.usesCommand() {
		var errs []error
		if _, err := kubelet.ParseCommand(o.RestartCommand); err != nil {
			errs = append(errs, fmt.Errorf("--kubelet-restart-command: %w", err))
		}
		for flagName, command := range map[string]string{"--kubelet-stop-command": o.StopCommand, "--kubelet-start-command": o.StartCommand} {
			if command == "" {
				continue
			}
			if _, err := kubelet.ParseCommand(command); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flagName, err))
			}
		}
		if (o.StopCommand == "") != (o.StartCommand == "") {
			errs = append(errs, errors.New("--kubelet-stop-command and --kubelet-start-command go together: give both or neither"))
		}
		if o.SystemdBusAddress != kubelet.DefaultSystemBusAddress || o.KubeletUnit != kubelet.DefaultKubeletUnit {
			errs = append(errs, errors.New("--systemd-bus-address and --kubelet-unit are for the D-Bus restart, which --kubelet-restart-command replaces: give one or the other"))
		}
		return errs
	}
	var errs []error
	if o.StopCommand != "" || o.StartCommand != "" {
		errs = append(errs, errors.New("--kubelet-stop-command and --kubelet-start-command go with --kubelet-restart-command; through D-Bus systemd stops and starts the unit"))
	}
	if err := kubelet.CheckBusAddress(o.SystemdBusAddress); err != nil {
		errs = append(errs, fmt.Errorf("--systemd-bus-address: %w", err))
	}
	if err := kubelet.CheckUnitName(o.KubeletUnit); err != nil {
		errs = append(errs, fmt.Errorf("--kubelet-unit: %w", err))
	}
	return errs
}

// restarter builds the restarter the validated options ask for.
func (o *Options) restarter() kubelet.Restarter {
	if o.usesCommand() {
		argv, _ := kubelet.ParseCommand(o.RestartCommand)
		r := kubelet.NewCommandRestarter(argv, o.RestartTimeout)
		if o.StopCommand != "" && o.StartCommand != "" {
			r.StopArgv, _ = kubelet.ParseCommand(o.StopCommand)
			r.StartArgv, _ = kubelet.ParseCommand(o.StartCommand)
		}
		return r
	}
	return kubelet.NewSystemdRestarter(o.SystemdBusAddress, o.KubeletUnit, o.RestartTimeout)
}

// signalTuning are the settings of every signal as the options give them,
// whether the options turn the signal on or not: an assignment's own trial
// terms may turn it on (trial.Resolve). The signals that read pods stay
// off without --trial-read-pods.
func (o *Options) signalTuning() trial.NodeSignals {
	s := trial.NodeSignals{Ready: true, ReadyGrace: o.TrialReadyGrace, PodsStopped: o.TrialReadPods, Allocatable: o.TrialReadPods,
		AllocatableGrace: o.TrialAllocatableGrace}
	for _, c := range o.TrialPressureConditions {
		s.PressureConditions = append(s.PressureConditions, corev1.NodeConditionType(c))
	}
	if o.TrialReadPods {
		for _, r := range o.TrialPodFailureReasons {
			if r = strings.TrimSpace(r); r != "" {
				s.PodFailureReasons = append(s.PodFailureReasons, r)
			}
		}
	}
	return s
}

// nodeSignals are the trial's signals of the Node and its pods that the
// options turn on.
func (o *Options) nodeSignals() trial.NodeSignals {
	s := o.signalTuning()
	s.Ready = o.TrialNodeReady
	s.PodsStopped = s.PodsStopped && o.TrialPodsStopped
	s.Allocatable = s.Allocatable && o.TrialAllocatable
	if !o.TrialPressure {
		s.PressureConditions = nil
	}
	return s
}

// Config turns validated options into the agent's configuration.
func (o *Options) Config() nodeagent.Config {
	var kubeletVersion *version.Version
	if o.KubeletVersion != "" {
		kubeletVersion, _ = version.ParseGeneric(o.KubeletVersion)
	}
	renderer := kubelet.Renderer{Mode: kubelet.Mode(o.KubeletConfigMode), LocalFields: o.LocalFields}
	if renderer.Mode == kubelet.ModeConfig {
		renderer.LocalConfigFile = o.LocalConfigFile
	}
	return nodeagent.Config{
		NodeName:           o.NodeName,
		Kubeconfig:         o.Kubeconfig,
		KubeAPIQPS:         o.KubeAPIQPS,
		KubeAPIBurst:       o.KubeAPIBurst,
		StateDir:           o.StateDir,
		Renderer:           renderer,
		KubeletConfigFile:  o.KubeletConfigFile,
		Restarter:          o.restarter(),
		RestartTimeout:     o.RestartTimeout,
		HealthzURL:         o.HealthzURL,
		KubeletServerURL:   o.KubeletServerURL,
		KubeletCAFile:      o.KubeletCAFile,
		KubeletReadTimeout: o.KubeletReadTimeout,
		ProbePeriod:        o.ProbePeriod,
		ProbeTimeout:       o.ProbeTimeout,
		Drain:              o.Drain,
		DrainTimeout:       o.DrainTimeout,
		DrainPollPeriod:    o.DrainPollPeriod,
		KubeletRootDir:     o.KubeletRootDir,
		Trial: trial.Terms{Period: o.TrialPeriod, Grace: o.TrialGracePeriod, FailureThreshold: o.TrialFailureThreshold,
			Node: o.nodeSignals()},
		TrialTuning:    o.signalTuning(),
		KubeletVersion: kubeletVersion,
		Hardening:      o.hardening,
		ListenAddress:  o.ListenAddress,
		ResyncPeriod:   o.ResyncPeriod,
	}
}
