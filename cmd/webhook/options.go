package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
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
	Resync       time.Duration

	MinKubeletVersion string

	MaxAuthorizeBodyBytes int64
	DrainDuration         time.Duration
	ShutdownTimeout       time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		BindAddress:           "0.0.0.0",
		SecurePort:            8443,
		KubeAPIQPS:            50,
		KubeAPIBurst:          100,
		MaxAuthorizeBodyBytes: 1 << 20,
		DrainDuration:         5 * time.Second,
		ShutdownTimeout:       30 * time.Second,
	}
}

// AddFlags registers the options, and klog's, on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "IP address to listen on for HTTPS.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "Port to serve HTTPS on: /authorize, /validate, /healthz, /livez, /readyz and /metrics.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates). Reloaded when the file changes.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "PEM private key for --tls-cert-file. Reloaded when the file changes.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle. When set, /authorize and /validate answer only clients (the kube-apiserver) that present a certificate signed by it; health and metrics endpoints stay reachable without one. Reloaded when the file changes.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig for watching Nodes, Pods and ConfigMaps. Empty means in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the kube-apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the kube-apiserver.")
	fs.DurationVar(&o.Resync, "resync-period", o.Resync, "Informer resync period; 0 disables resyncs (the graph does not need them).")
	fs.StringVar(&o.MinKubeletVersion, "min-kubelet-version", o.MinKubeletVersion, "Minimum kubelet version (e.g. 1.35.0). A node reporting an older or unparseable version is denied everything except reading and updating its own Node. The version is self-reported: this is a compatibility gate, not a security boundary. Empty disables the check.")
	fs.Int64Var(&o.MaxAuthorizeBodyBytes, "max-authorize-body-bytes", o.MaxAuthorizeBodyBytes, "Largest SubjectAccessReview body accepted on /authorize.")
	fs.DurationVar(&o.DrainDuration, "shutdown-drain-duration", o.DrainDuration, "On SIGTERM, keep serving this long with /readyz failing, so that traffic moves away before the listener closes.")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "After the drain, how long to wait for in-flight requests.")

	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
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
	if o.MaxAuthorizeBodyBytes < 4096 {
		errs = append(errs, fmt.Errorf("--max-authorize-body-bytes %d: must be at least 4096", o.MaxAuthorizeBodyBytes))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.Resync < 0 || o.DrainDuration < 0 || o.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	return errs
}

func (o *Options) minKubeletVersion() *version.Version {
	if o.MinKubeletVersion == "" {
		return nil
	}
	return version.MustParseGeneric(o.MinKubeletVersion)
}
