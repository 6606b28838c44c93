// Command webhook serves nodeguard's /authorize (authorization webhook) and
// /validate (admission webhook) endpoints over one HTTPS server.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/program"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

const usage = "nodeguard webhook: authorization (/authorize) and admission (/validate) for Dynamic Kubelet Config.\n"

func main() { program.Main("webhook", usage, NewOptions(), run) }

func run(ctx context.Context, opts *Options) error {
	registry, err := program.NewRegistry()
	if err != nil {
		return err
	}
	if err := program.RegisterClientMetrics(registry); err != nil {
		return err
	}
	restConfig, err := program.RESTConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst, "nodeguard-webhook")
	if err != nil {
		return err
	}
	restConfig = program.WithContentType(restConfig, opts.KubeAPIContentType)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	metaClient, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building metadata client: %w", err)
	}

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
