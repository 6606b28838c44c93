package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/program"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// Options are the webhook's command-line settings.
type Options struct {
	BindAddress       string
	SecurePort        int
	TLSCertFile       string
	TLSPrivateKeyFile string
	ClientCAFile      string

	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int
	// KubeAPIContentType is what its clients send and ask for first.
	KubeAPIContentType string
	Resync             time.Duration
	// GraphStaleAfter is how long the graph may go without a working list
	// or watch before it stops allowing; 0 disables the check.
	GraphStaleAfter time.Duration

	MinKubeletVersion string
	// Settings is the settings file (a NodeguardPolicy), --settings.
	Settings string
	// PolicyReloadInterval is how often the settings file and the Rego
	// policy directory are checked for changes.
	PolicyReloadInterval time.Duration

	PolicyDir  string
	PolicyData string
	// ExemptNamespaces are the namespaces the admission webhook's
	// namespaceSelector keeps from it; no policy may allow kubelet
	// configurations there.
	ExemptNamespaces []string
	// APIAudiences are kube-apiserver's --api-audiences, which it fills
	// into a node's TokenRequest that names none before this webhook sees
	// it (standalone manifests); empty reads its default, the service
	// account issuer, from the apiserver.
	APIAudiences           []string
	PolicyEvalTimeout      time.Duration
	AdmissionPolicyFailure string
	AuthzPolicyFailure     string
	DecisionLog            string
	DecisionLogSample      float64

	MaxAuthorizeBodyBytes int64
	MaxValidateBodyBytes  int64
	MaxAuthorizeInFlight  int
	MaxValidateInFlight   int
	MaxQueuedReviews      int
	MaxQueueWait          time.Duration
	// QuiesceDuration is --shutdown-drain-duration: how long the server
	// keeps serving, unready, on SIGTERM (an HTTP matter, not a node drain).
	QuiesceDuration time.Duration
	ShutdownTimeout time.Duration
}

const (
	// defaultGraphStaleAfter: watches are re-established in milliseconds
	// in normal operation, and the apiserver's own authorizedTTL (10s as
	// shipped) already lets a revoked read through that long.
	defaultGraphStaleAfter = 30 * time.Second
	minGraphStaleAfter     = time.Second
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		BindAddress:          "0.0.0.0",
		SecurePort:           8443,
		KubeAPIQPS:           50,
		KubeAPIBurst:         100,
		KubeAPIContentType:   runtime.ContentTypeProtobuf,
		GraphStaleAfter:      defaultGraphStaleAfter,
		PolicyReloadInterval: 2 * time.Second,
		PolicyEvalTimeout:    policy.DefaultTimeout,
		ExemptNamespaces:     policy.DefaultExemptNamespaces(),
		// Admission fails closed as its webhook does (failurePolicy: Fail);
		// authorization has no opinion as its webhook entry does, so that a
		// broken policy cannot lock every node out.
		AdmissionPolicyFailure: admissionFailClosed,
		AuthzPolicyFailure:     authzNoOpinion,
		DecisionLog:            string(server.DecisionLogOff),
		DecisionLogSample:      1,
		MaxAuthorizeBodyBytes:  1 << 20,
		// An AdmissionReview carries the object and the old object, each
		// up to the apiserver's 3 MiB request limit.
		MaxValidateBodyBytes: 7 << 20,
		// Decisions are CPU-bound: more in flight only adds memory, at
		// most MaxValidateInFlight bodies of MaxValidateBodyBytes for
		// /validate.
		MaxAuthorizeInFlight: 64,
		MaxValidateInFlight:  16,
		MaxQueuedReviews:     256,
		MaxQueueWait:         time.Second,
		QuiesceDuration:      5 * time.Second,
		ShutdownTimeout:      30 * time.Second,
	}
}

// AddFlags registers the options on fs (program.Main adds klog's).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "IP address to listen on for HTTPS.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "Port to serve HTTPS on: /authorize, /validate, /healthz, /livez, /readyz and /metrics.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates). Reloaded when the file changes.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "PEM private key for --tls-cert-file. Reloaded when the file changes.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle. When set, /authorize and /validate answer only clients (the kube-apiserver) that present a certificate signed by it; health and metrics endpoints stay reachable without one. Reloaded when the file changes.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig for watching Nodes, Pods and ConfigMaps. Empty means in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the kube-apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the kube-apiserver.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, program.ContentTypeFlagHelp)
	fs.DurationVar(&o.Resync, "resync-period", o.Resync, "Informer resync period; 0 disables resyncs (the graph does not need them).")
	fs.DurationVar(&o.GraphStaleAfter, "graph-stale-after", o.GraphStaleAfter, "How long the graph may go without a working list or watch on the kube-apiserver (for any of Nodes, Pods, eligible ConfigMaps) before it is stale. While stale, node ConfigMap reads get no opinion instead of an allow (denials still apply), /readyz fails its graph-fresh check and nodeguard_graph_stale is 1; a relist or a resumed watch makes it fresh again. At least 1s; 0 disables the check and trusts the graph however long it has been cut off.")
	fs.StringVar(&o.MinKubeletVersion, "min-kubelet-version", o.MinKubeletVersion, "Minimum kubelet version (e.g. 1.35.0) when no --settings is given. A node reporting an older or unparseable version may not register, and is denied everything except reading and updating its own Node. The version is self-reported: this is a compatibility gate, not a security boundary. Empty disables the check.")
	fs.StringVar(&o.Settings, "settings", o.Settings, "Settings file, a NodeguardPolicy (config.nodeguard.dev/v1alpha1): minimum kubelet version, node self-assignment, fields that may not change dynamically, exempt users. Reloaded when it changes; a file that does not parse keeps the last good policy. Empty means the built-in defaults.")
	// The flag's name before the settings file was called settings, kept
	// so that existing manifests go on working.
	fs.StringVar(&o.Settings, "policy-config", o.Settings, "Deprecated name of --settings.")
	_ = fs.MarkDeprecated("policy-config", "use --settings")
	fs.DurationVar(&o.PolicyReloadInterval, "policy-reload-interval", o.PolicyReloadInterval, "How often --settings and --policy-dir are checked for changes.")
	fs.StringVar(&o.PolicyDir, "policy-dir", o.PolicyDir, "Directory of Rego policies (every *.rego under it except *_test.rego and hidden entries), evaluated after the built-in rules on /validate and /authorize; a deny from either side wins. Empty means the policies shipped in the binary (policies/). A changed set is recompiled without a restart; one that does not compile keeps the last good set serving and shows in /readyz?verbose and nodeguard_policy_last_load_success. See policies/README.md.")
	fs.StringVar(&o.PolicyData, "policy-data", o.PolicyData, "JSON or YAML file with an object that policies read as data.nodeguard.config, e.g. 'allowed_namespaces: [kubelet-configs, infra]' for the shipped config_namespaces policy (a namespace of --exempt-namespaces there is refused: the webhook never judges it). Read once at start. Empty means none (the policies' own defaults); a package nodeguard.config in --policy-dir may not define the same keys.")
	fs.StringSliceVar(&o.APIAudiences, "api-audiences", o.APIAudiences, "kube-apiserver's --api-audiences, when it sets them; empty reads its default (the service account issuer) from the apiserver's issuer discovery. Only the standalone manifests' service account token rule reads them: a token request that names no audience reaches the webhook with these.")
	fs.StringSliceVar(&o.ExemptNamespaces, "exempt-namespaces", o.ExemptNamespaces, "Namespaces the admission webhook's namespaceSelector exempts (as shipped: kube-system and nodeguard). An allowed_namespaces that names one, in --policy-data or in a package nodeguard.config of --policy-dir, is refused at load: kubelet configurations there would skip every content check. --policy-data is then a start-up error; a policy directory keeps its last good set.")
	fs.DurationVar(&o.PolicyEvalTimeout, "policy-eval-timeout", o.PolicyEvalTimeout, "Longest one review's policy evaluation may take (within the apiserver's own timeout); it stops runaway policies. A timeout is an evaluation error, handled by --admission-policy-failure or --authz-policy-failure.")
	fs.StringVar(&o.AdmissionPolicyFailure, "admission-policy-failure", o.AdmissionPolicyFailure, "What a failed or timed-out admission policy evaluation means: 'fail-closed' refuses the request, naming the error; 'ignore' leaves the decision to the built-in rules and adds a warning naming the error.")
	fs.StringVar(&o.AuthzPolicyFailure, "authz-policy-failure", o.AuthzPolicyFailure, "What a failed or timed-out authorization policy evaluation means: 'no-opinion' leaves the decision to the built-in rules and reports the error in the SubjectAccessReview's evaluationError; 'deny' denies the request.")
	fs.StringVar(&o.DecisionLog, "decision-log", o.DecisionLog, "Log one structured line per decision (who, what, outcome, the rule or policy that decided, latency): 'off', 'denials' (admission refusals and authorization denials), or 'all' (denials, and --decision-log-sample of the other decisions).")
	fs.Float64Var(&o.DecisionLogSample, "decision-log-sample", o.DecisionLogSample, "With --decision-log=all, the fraction (0 to 1) of decisions that are not denials to log; denials are always logged.")
	fs.Int64Var(&o.MaxValidateBodyBytes, "max-validate-body-bytes", o.MaxValidateBodyBytes, "Largest AdmissionReview body accepted on /validate.")
	fs.Int64Var(&o.MaxAuthorizeBodyBytes, "max-authorize-body-bytes", o.MaxAuthorizeBodyBytes, "Largest SubjectAccessReview body accepted on /authorize.")
	fs.IntVar(&o.MaxAuthorizeInFlight, "max-authorize-in-flight", o.MaxAuthorizeInFlight, "Most SubjectAccessReviews decided at once on /authorize. Beyond it requests wait (see --max-queued-reviews and --max-queue-wait), then are shed: answered with no opinion and an evaluationError saying the webhook is overloaded (the shipped authorization configuration does not cache refusals, so the node's retry is decided afresh), counted in nodeguard_http_requests_shed_total.")
	fs.IntVar(&o.MaxValidateInFlight, "max-validate-in-flight", o.MaxValidateInFlight, "Most AdmissionReviews decided at once on /validate; it bounds memory too (at most this many bodies of --max-validate-body-bytes). Requests shed beyond it are refused with a 429 status the apiserver passes on to the client, or HTTP 429 with Retry-After when the request's UID cannot be read.")
	fs.IntVar(&o.MaxQueuedReviews, "max-queued-reviews", o.MaxQueuedReviews, "Per endpoint, how many requests beyond the in-flight limit may wait for a free slot, their bodies unread; more are shed at once. 0 sheds every request beyond the limit.")
	fs.DurationVar(&o.MaxQueueWait, "max-queue-wait", o.MaxQueueWait, "Longest a request waits for a free slot before it is shed. A request never waits more than half the timeout the apiserver sends (?timeout=), so that its answer still arrives in time.")
	fs.DurationVar(&o.QuiesceDuration, "shutdown-drain-duration", o.QuiesceDuration, "On SIGTERM, keep serving this long with /readyz failing, so that traffic moves away before the listener closes.")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "After --shutdown-drain-duration, how long to wait for in-flight requests.")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	if o.SecurePort < 1 || o.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d: must be between 1 and 65535", o.SecurePort))
	}
	if o.TLSCertFile == "" || o.TLSPrivateKeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required"))
	}
	if o.MinKubeletVersion != "" {
		if _, err := version.ParseGeneric(o.MinKubeletVersion); err != nil {
			errs = append(errs, fmt.Errorf("--min-kubelet-version %q: %w", o.MinKubeletVersion, err))
		}
	}
	if o.MinKubeletVersion != "" && o.Settings != "" {
		errs = append(errs, errors.New("--min-kubelet-version and --settings are exclusive: set minKubeletVersion in the settings file, where it can change without a restart"))
	}
	if o.PolicyReloadInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--policy-reload-interval %v: must be at least 100ms", o.PolicyReloadInterval))
	}
	errs = append(errs, o.validatePolicyOptions()...)
	for i, ns := range o.ExemptNamespaces {
		if ns == "" {
			errs = append(errs, fmt.Errorf("--exempt-namespaces[%d]: empty namespace name", i))
		}
	}
	if o.MaxValidateBodyBytes < 64<<10 {
		errs = append(errs, fmt.Errorf("--max-validate-body-bytes %d: must be at least 65536", o.MaxValidateBodyBytes))
	}
	if o.MaxAuthorizeBodyBytes < 4096 {
		errs = append(errs, fmt.Errorf("--max-authorize-body-bytes %d: must be at least 4096", o.MaxAuthorizeBodyBytes))
	}
	if o.MaxAuthorizeInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-authorize-in-flight %d: must be at least 1", o.MaxAuthorizeInFlight))
	}
	if o.MaxValidateInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-validate-in-flight %d: must be at least 1", o.MaxValidateInFlight))
	}
	if o.MaxQueuedReviews < 0 {
		errs = append(errs, fmt.Errorf("--max-queued-reviews %d: must not be negative", o.MaxQueuedReviews))
	}
	if o.MaxQueueWait < 0 || o.MaxQueueWait > 30*time.Second {
		errs = append(errs, fmt.Errorf("--max-queue-wait %v: must be between 0 and 30s (the apiserver's longest webhook timeout)", o.MaxQueueWait))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if err := program.ValidateContentType(o.KubeAPIContentType); err != nil {
		errs = append(errs, err)
	}
	if o.GraphStaleAfter != 0 && o.GraphStaleAfter < minGraphStaleAfter {
		errs = append(errs, fmt.Errorf("--graph-stale-after %v: must be 0 (off) or at least %v, above the blink of a watch being re-established", o.GraphStaleAfter, minGraphStaleAfter))
	}
	if o.Resync < 0 || o.QuiesceDuration < 0 || o.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	return errs
}

// inFlightLimit is the limit of an endpoint that decides maxInFlight
// reviews at once and answers the ones it sheds with shed.
func (o *Options) inFlightLimit(maxInFlight int, shed server.ShedFunc) server.InFlightLimit {
	return server.InFlightLimit{MaxInFlight: maxInFlight, MaxQueued: o.MaxQueuedReviews, MaxWait: o.MaxQueueWait, Shed: shed}
}

// fallbackSettings are the settings when no --settings is given.
func (o *Options) fallbackSettings() *settings.Settings {
	s := settings.Default()
	if o.MinKubeletVersion != "" {
		s.MinKubeletVersion = version.MustParseGeneric(o.MinKubeletVersion)
		s.Source = "--min-kubelet-version"
	}
	return s
}
