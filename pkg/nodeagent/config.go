package nodeagent

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// Config is everything the agent is told; cmd/agent fills it from flags.
type Config struct {
	// NodeName is the Node this agent manages; its credentials must be
	// system:node:NodeName.
	NodeName string
	// Kubeconfig is the kubelet's kubeconfig.
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst limit requests to the apiserver.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// StateDir holds checkpoints and records (pkg/nodeagent/checkpoint).
	StateDir string
	// BootIDPath overrides /proc/sys/kernel/random/boot_id (tests).
	BootIDPath string

	// Renderer says which file is written and how (pkg/nodeagent/kubelet).
	Renderer kubelet.Renderer
	// KubeletConfigFile is the file written: the kubelet's --config file, or
	// a drop-in in its --config-dir.
	KubeletConfigFile string
	// Restarter restarts the kubelet (kubelet.SystemdRestarter or
	// kubelet.CommandRestarter, built by cmd/agent); RestartTimeout is the
	// bound it was given, which the agent's own liveness check allows for.
	Restarter      kubelet.Restarter
	RestartTimeout time.Duration
	// HealthzURL is the kubelet's health endpoint; each probe gets
	// ProbeTimeout, every ProbePeriod during a trial.
	HealthzURL   string
	ProbePeriod  time.Duration
	ProbeTimeout time.Duration
	// KubeletServerURL is the kubelet's HTTPS server, where its running
	// configuration is read (/configz, /flagz) with the kubelet's own
	// credentials; KubeletCAFile, when set, verifies its serving
	// certificate; KubeletReadTimeout bounds each read.
	KubeletServerURL   string
	KubeletCAFile      string
	KubeletReadTimeout time.Duration
	// Trial is how trials are judged, unless a Node's assignment gives
	// terms of its own (contract.TrialAnnotation); TrialTuning are the
	// settings of every signal whether Trial turns it on or not, for
	// those terms to turn one on (trial.Resolve).
	Trial       trial.Terms
	TrialTuning trial.NodeSignals
	// Drain (contract.DrainAuto, DrainAlways, DrainNever) is the default
	// for Nodes without contract.DrainAnnotation; DrainTimeout bounds a
	// drain and DrainPollPeriod paces it. KubeletRootDir holds the state
	// files a drained change removes.
	Drain           string
	DrainTimeout    time.Duration
	DrainPollPeriod time.Duration
	KubeletRootDir  string
	// KubeletVersion, when set, overrides the Node's reported version for
	// the feature-gate check.
	KubeletVersion *version.Version
	// Hardening are the webhook's forbidden fields and runtime sockets,
	// which every configuration is held to before anything is written
	// (reconciler.Validator).
	Hardening reconciler.Rules

	// ListenAddress serves /healthz and /metrics; empty disables.
	ListenAddress string
	// ResyncPeriod re-runs the state machine even without events, e.g.
	// to notice an edited local configuration file.
	ResyncPeriod time.Duration
}

// runningReader reads the kubelet's running configuration with the
// kubelet's credentials, loaded anew for each read so that the kubelet's
// rotated certificate is used.
func (c Config) runningReader() *kubelet.RunningReader {
	return &kubelet.RunningReader{
		ServerURL: c.KubeletServerURL,
		CAFile:    c.KubeletCAFile,
		Credentials: func() (*rest.Config, error) {
			creds, err := kubeclient.Load(c.Kubeconfig)
			if err != nil {
				return nil, err
			}
			return creds.Config, nil
		},
		Timeout:    c.KubeletReadTimeout,
		Mode:       c.Renderer.Mode,
		ConfigFile: c.KubeletConfigFile,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	required := map[string]string{"node name": c.NodeName, "kubeconfig": c.Kubeconfig, "state directory": c.StateDir,
		"kubelet config file": c.KubeletConfigFile, "kubelet healthz URL": c.HealthzURL}
	for what, value := range required {
		if value == "" {
			errs = append(errs, fmt.Errorf("no %s given", what))
		}
	}
	if !contract.ValidDrainMode(c.Drain) {
		errs = append(errs, fmt.Errorf("drain mode %q: want %s, %s or %s", c.Drain, contract.DrainAuto, contract.DrainAlways, contract.DrainNever))
	}
	if c.Restarter == nil {
		errs = append(errs, errors.New("no way to restart the kubelet given"))
	}
	if err := c.Renderer.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.runningReader().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Trial.Validate(); err != nil {
		errs = append(errs, err)
	}
	for what, d := range map[string]time.Duration{"probe period": c.ProbePeriod, "probe timeout": c.ProbeTimeout,
		"restart timeout": c.RestartTimeout, "resync period": c.ResyncPeriod,
		"drain timeout": c.DrainTimeout, "drain poll period": c.DrainPollPeriod, "kubelet read timeout": c.KubeletReadTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", what, d))
		}
	}
	if c.KubeAPIQPS <= 0 || c.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("the API QPS and burst must be positive"))
	}
	return errors.Join(errs...)
}
