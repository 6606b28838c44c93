package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/program"
	"github.com/nodeguard/nodeguard/pkg/rollout"
	"github.com/nodeguard/nodeguard/pkg/rollout/controller"
)

// Options are the controller's command-line settings.
type Options struct {
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int
	// KubeAPIContentType is what the clients of built-in resources send
	// and ask for first.
	KubeAPIContentType string
	// EventQPS and EventBurst limit the Events client, apart from the
	// rest.
	EventQPS   float32
	EventBurst int

	Workers        int
	ResyncPeriod   time.Duration
	TrialPeriod    time.Duration
	StatusInterval time.Duration
	MaxPatches     int
	ListenAddress  string

	LeaderElect        bool
	LeaseName          string
	LeaseNamespace     string
	LeaseIdentity      string
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration
}

// NewOptions returns the defaults: in-cluster, leader-elected, in the
// namespace the pod runs in.
func NewOptions() *Options {
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = "nodeguard"
	}
	return &Options{
		KubeAPIQPS:         200,
		KubeAPIBurst:       1000,
		KubeAPIContentType: runtime.ContentTypeProtobuf,
		EventQPS:           controller.DefaultEventQPS,
		EventBurst:         controller.DefaultEventBurst,
		Workers:            2,
		ResyncPeriod:       10 * time.Minute,
		TrialPeriod:        rollout.DefaultTrialPeriod,
		StatusInterval:     controller.DefaultStatusInterval,
		MaxPatches:         controller.DefaultMaxPatchesInFlight,
		ListenAddress:      ":8080",
		LeaderElect:        true,
		LeaseName:          "nodeguard-rollout-controller",
		LeaseNamespace:     namespace,
		LeaseDuration:      15 * time.Second,
		LeaseRenewDeadline: 10 * time.Second,
		LeaseRetryPeriod:   2 * time.Second,
	}
}

// AddFlags registers the options on fs (program.Main adds klog's).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig file with the apiserver and the controller's credentials. Empty means in-cluster: the pod's service account token and the KUBERNETES_SERVICE_HOST/PORT it is given.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the kube-apiserver for status writes and Node patches; Events have their own (--event-qps, --event-burst). A rollout writes each Node it moves twice (its assignment, then the mark of its passed trial; again when the Node moved meanwhile), and at most maxUnavailable Nodes' trials end together; rest_client_rate_limiter_duration_seconds shows how long writes waited for the limit.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the kube-apiserver: the writes sent at once before --kube-api-qps paces them. At least twice the largest maxUnavailable, in Nodes, so that a wave of trials ending together is not held back (the default fits 10% of 5,000 Nodes).")

	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, program.ContentTypeFlagHelp)
	fs.Float32Var(&o.EventQPS, "event-qps", o.EventQPS, "Events created per second at most (one per Node assigned, reverted or refused, and per change of a rollout's state), apart from --kube-api-qps. They go to the apiserver as the controller's Node patches do, in its ServiceAccount's one flow of priority and fairness, where a burst of them would queue beside, or turn away, the next wave's assignments; an Event waits its turn in the controller rather than being dropped.")
	fs.IntVar(&o.EventBurst, "event-burst", o.EventBurst, "Events created at once before --event-qps paces them.")

	fs.IntVar(&o.Workers, "workers", o.Workers, "Rollouts synced at once. One rollout is never synced by two workers at a time.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "How often every rollout is synced again without an event. 0 disables; events alone drive the controller, this is a backstop.")
	fs.IntVar(&o.MaxPatches, "max-patches-in-flight", o.MaxPatches, "A rollout's assignments and reverts in flight at once; its trial-passed marks have a window of their own, of 64 or this when lower. The window starts at one until admission has let the target onto one Node, then widens with every patch that applies. Wider moves a large pool's waves faster. All of the controller's requests are one flow of the apiserver's priority and fairness (its ServiceAccount's), which queues what exceeds its seats only up to its queues' length and answers the rest 429, which client-go sends again after the Retry-After (a second or more): keep this, with the marks and Events beside it, within what that flow is given, or give the ServiceAccount a FlowSchema of its own.")
	fs.DurationVar(&o.StatusInterval, "status-interval", o.StatusInterval, "How often at most a rollout's status is written while only its counts and message change (a Node passing its trial, the next one assigned). A change of the rollout's state (the canary done, a pause, a failure, a new target) is written at once, before any Node moves on it.")
	fs.DurationVar(&o.TrialPeriod, "trial-period", o.TrialPeriod, "How long a Node's trial lasts, for rollouts whose spec.trial gives no periodSeconds: set it to the agents' --trial-period (five minutes by default). The controller counts a Node it assigned updated no sooner than this long after the assignment (written on the Node as nodeguard.dev/trial-ends), whatever its agent reports.")
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "host:port for /healthz, /livez, /readyz and /metrics (plain HTTP). Empty disables. /readyz fails on the leader until its caches have synced; a standby is ready.")

	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Take a Lease before deciding anything, so that of several replicas one acts at a time. Turn it off only when exactly one replica can ever run.")
	fs.StringVar(&o.LeaseName, "leader-elect-lease-name", o.LeaseName, "Name of the Lease (coordination.k8s.io) the replicas contend for.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-lease-namespace", o.LeaseNamespace, "Namespace of the Lease. Defaults to $POD_NAMESPACE, or nodeguard.")
	fs.StringVar(&o.LeaseIdentity, "leader-elect-identity", o.LeaseIdentity, "This replica's identity in the Lease. Empty means the hostname (the pod's name) and a random suffix.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a standby waits after the leader's last renewal before it takes the Lease: the longest a failed leader's rollouts stand still.")
	fs.DurationVar(&o.LeaseRenewDeadline, "leader-elect-renew-deadline", o.LeaseRenewDeadline, "How long the leader keeps trying to renew before it gives up leading and exits. Must be shorter than --leader-elect-lease-duration.")
	fs.DurationVar(&o.LeaseRetryPeriod, "leader-elect-retry-period", o.LeaseRetryPeriod, "How often a replica tries to take or renew the Lease. Must be shorter than --leader-elect-renew-deadline.")
}

// jitter is client-go's leaderelection.JitterFactor: the retry period,
// jittered, must stay below the renew deadline.
const jitter = 1.2

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.EventQPS <= 0 || o.EventBurst <= 0 {
		errs = append(errs, errors.New("--event-qps and --event-burst must be positive"))
	}
	if err := program.ValidateContentType(o.KubeAPIContentType); err != nil {
		errs = append(errs, err)
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: must be at least 1", o.Workers))
	}
	if o.MaxPatches < 1 {
		errs = append(errs, fmt.Errorf("--max-patches-in-flight %d: must be at least 1", o.MaxPatches))
	}
	if o.StatusInterval <= 0 {
		errs = append(errs, fmt.Errorf("--status-interval %v: must be positive", o.StatusInterval))
	}
	if o.TrialPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--trial-period %v: must be positive", o.TrialPeriod))
	}
	if o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--resync-period %v: must not be negative", o.ResyncPeriod))
	}
	if o.ListenAddress != "" {
		if _, _, err := net.SplitHostPort(o.ListenAddress); err != nil {
			errs = append(errs, fmt.Errorf("--listen-address %q: %w", o.ListenAddress, err))
		}
	}
	if !o.LeaderElect {
		return errs
	}
	if msgs := validation.IsDNS1123Subdomain(o.LeaseName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-name %q: %s", o.LeaseName, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(o.LeaseNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-namespace %q: %s", o.LeaseNamespace, strings.Join(msgs, "; ")))
	}
	for flagName, d := range map[string]time.Duration{
		"--leader-elect-lease-duration": o.LeaseDuration, "--leader-elect-renew-deadline": o.LeaseRenewDeadline, "--leader-elect-retry-period": o.LeaseRetryPeriod,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", flagName, d))
		}
	}
	if o.LeaseDuration <= o.LeaseRenewDeadline {
		errs = append(errs, errors.New("--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline"))
	}
	if float64(o.LeaseRenewDeadline) <= jitter*float64(o.LeaseRetryPeriod) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline must be longer than %v times --leader-elect-retry-period", jitter))
	}
	return errs
}

// config is the process's configuration from validated options.
type config struct {
	// Kube is for nodeguard's own resources (JSON), BuiltIn for the
	// built-in ones (--kube-api-content-type), Events for Events (their
	// own limits).
	Kube, BuiltIn, Events *rest.Config
	Workers               int
	Resync                time.Duration
	TrialPeriod           time.Duration
	StatusInterval        time.Duration
	MaxPatches            int
	ListenAddress         string
	LeaderElection        leaderElection
}

// leaderElection are the Lease settings (client-go tools/leaderelection).
type leaderElection struct {
	Enabled bool
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity of this replica; empty means the hostname and a random
	// suffix, unique across restarts.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (o *Options) config(kube *rest.Config) config {
	return config{
		Kube:           kube,
		BuiltIn:        program.WithContentType(kube, o.KubeAPIContentType),
		Events:         o.eventsConfig(kube),
		Workers:        o.Workers,
		Resync:         o.ResyncPeriod,
		TrialPeriod:    o.TrialPeriod,
		StatusInterval: o.StatusInterval,
		MaxPatches:     o.MaxPatches,
		ListenAddress:  o.ListenAddress,
		LeaderElection: leaderElection{
			Enabled:       o.LeaderElect,
			Namespace:     o.LeaseNamespace,
			Name:          o.LeaseName,
			Identity:      o.LeaseIdentity,
			LeaseDuration: o.LeaseDuration,
			RenewDeadline: o.LeaseRenewDeadline,
			RetryPeriod:   o.LeaseRetryPeriod,
		},
	}
}

// eventsConfig is the built-in resources' config with the Events' own
// limits.
func (o *Options) eventsConfig(kube *rest.Config) *rest.Config {
	cfg := program.WithContentType(kube, o.KubeAPIContentType)
	cfg.QPS, cfg.Burst = o.EventQPS, o.EventBurst
	return cfg
}
