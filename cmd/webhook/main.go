// Command webhook serves nodeguard's /authorize (authorization webhook) and
// /validate (admission webhook) endpoints over one HTTPS server.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

func main() {
	opts := NewOptions()
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "nodeguard webhook: authorization (/authorize) and admission (/validate) for Dynamic Kubelet Config.\n\nUsage: webhook [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("webhook"))
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Webhook failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts *Options) error {
	restConfig, err := loadRESTConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	restConfig.UserAgent = "nodeguard-webhook"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	metaClient, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building metadata client: %w", err)
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	graphMetrics, err := graph.NewMetrics(registry)
	if err != nil {
		return err
	}
	decisionMetrics, err := server.NewDecisionMetrics(registry)
	if err != nil {
		return err
	}

	g := graph.New(graphMetrics)
	// Without a bound (--graph-stale-after=0) freshness stays nil: the
	// informers are not monitored and the graph is never stale.
	var freshness *graph.Freshness
	if opts.GraphStaleAfter > 0 {
		if freshness, err = graph.NewFreshness(g, opts.GraphStaleAfter, nil); err != nil {
			return err
		}
	}
	informers, err := graph.NewInformers(client, metaClient, opts.Resync, freshness)
	if err != nil {
		return err
	}
	populator, err := graph.NewPopulator(g, informers)
	if err != nil {
		return err
	}
	settingsFile, err := settings.NewWatcher(opts.Settings, opts.fallbackSettings(), opts.PolicyReloadInterval, registry)
	if err != nil {
		return err
	}
	authorizer := authz.New(g, nil)
	settingsFile.OnChange(func(s *settings.Settings) { authorizer.SetMinKubeletVersion(s.MinKubeletVersion) })

	configMaps := admission.NewConfigMapInformer(client, opts.Resync)
	admitter := admission.New(settingsFile.Current, corelisters.NewConfigMapLister(configMaps.GetIndexer()), g)
	// NodeRestriction's rules (standalone manifests only) look up what a
	// node's write points at, live: the RBAC for it ships with them.
	admitter.SetCluster(admission.NewAPICluster(client, opts.APIAudiences))
	// Feature-gates trusts a node's reported kubelet version only if it has not
	// gone down: the record follows every Node the graph's informer sees.
	if _, err := informers.Nodes.AddEventHandler(admitter.KubeletVersions().EventHandler()); err != nil {
		return fmt.Errorf("following reported kubelet versions: %w", err)
	}
	// The Rego policies: compiled now, judged after the built-in rules.
	policies, err := newPolicies(ctx, opts, g, registry)
	if err != nil {
		return err
	}

	tlsFiles := server.TLSFiles{CertFile: opts.TLSCertFile, KeyFile: opts.TLSPrivateKeyFile, ClientCAFile: opts.ClientCAFile}
	dynamicTLS, err := server.NewDynamicTLS(tlsFiles)
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.SecurePort)))
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	srv, err := server.New(server.Config{
		Listener: listener,
		TLS:      dynamicTLS,
		Registry: registry,
		ReadyChecks: []healthz.HealthChecker{
			healthz.NamedCheck("graph-synced", func(*http.Request) error {
				if !g.Synced() {
					return errors.New("graph has not synced")
				}
				return nil
			}),
			// Fails while the graph's watches have been cut for longer than
			// --graph-stale-after, naming the informers and the error.
			healthz.NamedCheck(freshness.Name(), func(*http.Request) error { return freshness.Check() }),
			healthz.NamedCheck("configmaps-synced", func(*http.Request) error {
				if !configMaps.HasSynced() {
					return errors.New("eligible ConfigMaps have not synced")
				}
				return nil
			}),
			// Not ready until a first policy set has compiled.
			policies.engine.HealthChecker(),
		},
		// freshness adds the stale graph's detail, which /readyz withholds.
		Degraded:        []server.Degradable{settingsFile, policyLoadStatus{policies.engine}, freshness},
		QuiesceDuration: opts.QuiesceDuration,
		ShutdownTimeout: opts.ShutdownTimeout,
	})
	if err != nil {
		return err
	}
	decisionLog := opts.decisionLog()
	authorize, err := srv.LimitInFlight("/authorize", opts.inFlightLimit(opts.MaxAuthorizeInFlight, server.ShedSubjectAccessReview),
		server.Authorize(authorizer, policies.authz, opts.MaxAuthorizeBodyBytes, server.WithMetrics(decisionMetrics), server.WithDecisionLog(decisionLog)))
	if err != nil {
		return err
	}
	validate, err := srv.LimitInFlight("/validate", opts.inFlightLimit(opts.MaxValidateInFlight, server.ShedAdmissionReview),
		server.Validate(admitter, policies.admission, opts.MaxValidateBodyBytes, server.WithMetrics(decisionMetrics), server.WithDecisionLog(decisionLog)))
	if err != nil {
		return err
	}
	srv.HandleReview("/authorize", authorize)
	srv.HandleReview("/validate", validate)

	dynamicTLS.Run(ctx)
	go settingsFile.Run(ctx)
	go func() { _ = policies.engine.Run(ctx) }()
	go configMaps.RunWithContext(ctx)
	go populator.Run(ctx)
	return srv.Run(ctx)
}

func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (set --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
