package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	"github.com/nodeguard/nodeguard/pkg/program"
	"github.com/nodeguard/nodeguard/pkg/rollout/controller"
)

// run runs the controller until ctx is done, or until it loses its Lease
// (an error). A replica that is not the leader serves /healthz, /livez,
// /readyz and /metrics and waits; it starts its informers only once it
// leads, so a standby costs the apiserver nothing. A leader that loses its
// Lease exits, as kube-controller-manager does, rather than run on beside a
// new leader: its in-memory expectations would no longer be the whole
// truth, and the restart is cheap.
func run(ctx context.Context, opts *Options) error {
	logger := klog.FromContext(ctx)
	registry, err := program.NewRegistry()
	if err != nil {
		return err
	}
	if err := program.RegisterClientMetrics(registry); err != nil {
		return err
	}
	kubeConfig, err := program.RESTConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst, "nodeguard-rollout-controller")
	if err != nil {
		return err
	}
	cfg := opts.config(kubeConfig)
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(cfg.BuiltIn))
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	md, err := metadata.NewForConfig(rest.CopyConfig(cfg.BuiltIn))
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	rollouts, err := versioned.NewForConfig(rest.CopyConfig(cfg.Kube))
	if err != nil {
		return fmt.Errorf("nodeguard client: %w", err)
	}
	metrics, err := controller.NewMetrics(registry)
	if err != nil {
		return err
	}
	leading := &atomic.Bool{}
	if err := registerLeaderMetric(registry, leading); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("event scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("event scheme: %w", err)
	}
	// Events get a client, and so a client-side rate limit, of their own
	// (--event-qps, --event-burst): they are one write per Node moved, and
	// sharing the limit with the Node patches would hold assignments back
	// behind them.
	eventClient, err := kubernetes.NewForConfig(rest.CopyConfig(cfg.Events))
	if err != nil {
		return fmt.Errorf("events client: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, controller.FieldManager)

	ctrl, err := controller.New(controller.Config{
		Kube: kube, Metadata: md, Rollouts: rollouts, Recorder: recorder, Metrics: metrics, Resync: cfg.Resync,
		TrialPeriod:        cfg.TrialPeriod,
		StatusInterval:     cfg.StatusInterval,
		MaxPatchesInFlight: cfg.MaxPatches,
	})
	if err != nil {
		return err
	}

	var electionCheck *leaderelection.HealthzAdaptor
	if cfg.LeaderElection.Enabled {
		// A leader whose renewals fail this much longer than the lease
		// lasts fails /healthz, and is restarted.
		electionCheck = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if cfg.ListenAddress != "" {
		stop, err := serve(ctx, cfg.ListenAddress, registry, ctrl, leading, electionCheck, cfg.LeaderElection.Enabled)
		if err != nil {
			return err
		}
		defer stop()
	}

	runController := func(ctx context.Context) error {
		leading.Store(true)
		broadcaster.StartRecordingToSink(ctx.Done())
		return ctrl.Run(ctx, cfg.Workers)
	}
	if !cfg.LeaderElection.Enabled {
		return runController(ctx)
	}
	return runElected(ctx, kube, cfg.LeaderElection, electionCheck, runController, logger)
}

// runElected runs fn while this replica holds the Lease.
func runElected(ctx context.Context, kube kubernetes.Interface, le leaderElection, check *leaderelection.HealthzAdaptor, fn func(context.Context) error, logger klog.Logger) error {
	identity := le.Identity
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		identity = host + "_" + string(uuid.NewUUID())
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		// Hand the Lease over at once on a clean exit, instead of making
		// the next leader wait out the lease.
		ReleaseOnCancel: true,
		Name:            le.Name,
		WatchDog:        check,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "lease", le.Namespace+"/"+le.Name, "identity", identity)
				err := fn(ctx)
				if err == nil {
					err = errors.New("the controller stopped")
				}
				result <- err
				// The controller is done: give the Lease up.
				cancel()
			},
			OnStoppedLeading: func() {
				// Run returns next; the caller tells a lost Lease from a
				// stop asked for.
				logger.Info("Stopped leading", "lease", le.Namespace+"/"+le.Name, "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another replica leads", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	logger.Info("Waiting to lead", "lease", le.Namespace+"/"+le.Name, "identity", identity)
	elector.Run(ctx)
	if parent.Err() != nil {
		// Stopped from outside: a clean exit.
		return nil
	}
	select {
	case err := <-result:
		return err
	default:
		return errors.New("lost the leader Lease")
	}
}

// serve starts the health and metrics server; stop shuts it down.
func serve(ctx context.Context, address string, gatherer prometheus.Gatherer, ctrl *controller.Controller, leading *atomic.Bool, election *leaderelection.HealthzAdaptor, elected bool) (stop func(), err error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", address, err)
	}
	live := []healthz.HealthChecker{healthz.PingHealthz}
	if election != nil {
		live = append(live, election)
	}
	// A standby is ready: it does what it should, wait. A leader is ready
	// once its caches have synced.
	synced := healthz.NamedCheck("informers-synced", func(*http.Request) error {
		if (!elected || leading.Load()) && !ctrl.HasSynced() {
			return errors.New("informers have not synced")
		}
		return nil
	})
	mux := http.NewServeMux()
	healthz.InstallLivezHandler(mux, live...)
	healthz.InstallHandler(mux, live...)
	healthz.InstallReadyzHandler(mux, append(live, synced)...)
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Health and metrics server failed")
		}
	}()
	klog.FromContext(ctx).Info("Serving /healthz, /livez, /readyz and /metrics", "address", listener.Addr().String())
	return func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}, nil
}

// registerLeaderMetric exposes whether this replica leads.
func registerLeaderMetric(reg prometheus.Registerer, leading *atomic.Bool) error {
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "nodeguard", Subsystem: "rollout", Name: "leader",
		Help: "1 while this replica holds the leader Lease and runs the controller, 0 otherwise.",
	}, func() float64 {
		if leading.Load() {
			return 1
		}
		return 0
	})
	if err := reg.Register(gauge); err != nil {
		return fmt.Errorf("registering the leader metric: %w", err)
	}
	return nil
}
