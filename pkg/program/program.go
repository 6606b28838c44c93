package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Options are a program's command-line settings.
type Options interface {
	// AddFlags registers the options on fs; Main adds klog's.
	AddFlags(fs *pflag.FlagSet)
	// Validate reports every problem with the options at once.
	Validate() []error
}

// Main parses the command line into opts, validates it, and calls run with
// a context that ends on SIGTERM or SIGINT and carries a logger named name.
// It exits 0 after --help or a clean run, 2 on bad flags, 1 when run fails.
// usage is printed before the flags.
func Main[O Options](name, usage string, opts O, run func(context.Context, O) error) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(os.Stderr, "%s\nUsage: %s [flags]\n\nFlags:\n%s", usage, name, fs.FlagUsages()) }
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		// pflag has printed the error and the usage.
		os.Exit(2)
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	ctx = klog.NewContext(ctx, klog.Background().WithName(name))
	err := run(ctx, opts)
	stop()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed", "program", name)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// RESTConfig is the apiserver and credentials from kubeconfig, or the
// pod's own (in-cluster) when it is empty, with the client-side limits and
// the user agent set.
func RESTConfig(kubeconfig string, qps float32, burst int, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster configuration (set --kubeconfig outside a cluster): %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = qps, burst, userAgent
	return cfg, nil
}

// NewRegistry is a Prometheus registry with the Go runtime's and the
// process's collectors.
func NewRegistry() (*prometheus.Registry, error) {
	registry := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := registry.Register(c); err != nil {
			return nil, fmt.Errorf("registering process metrics: %w", err)
		}
	}
	return registry, nil
}
