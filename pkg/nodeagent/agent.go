package nodeagent

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/bootclock"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/httpserver"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/metrics"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/source"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/statelock"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
	"github.com/nodeguard/nodeguard/pkg/program"
)

// queueKey is the work queue's only key: every reason to look again adds it.
const queueKey = "node"

// stateLockRetry is how often an agent waiting for another to exit tries
// the state directory's lock again.
const stateLockRetry = time.Second

// maxPendingEvents bounds the Events kept while the apiserver is unknown.
const maxPendingEvents = 32

// agent is one running agent.
type agent struct {
	cfg        Config
	reconciler *reconciler.Reconciler
	metrics    *metrics.Metrics
	queue      workqueue.TypedRateLimitingInterface[string]

	// online is set once the watches and the reporter exist.
	online atomic.Pointer[onlineParts]
	// credentials says what the agent waits for before it can connect.
	credentials kubeclient.Status
	// lastPass is when the worker last finished a pass (Unix nanoseconds).
	lastPass atomic.Int64
	// pendingEvents waits for the reporter; only the worker touches it.
	pendingEvents []status.Event
	// allowances tells the validator the assigned ConfigMap's
	// allowance of dangerous fields, from each pass's observation.
	allowances *reconciler.Allowances

	// scheme is core/v1's, for the client and the event recorder alike.
	scheme *runtime.Scheme
	// newClient builds the client once the kubelet's credentials exist;
	// tests replace it.
	newClient func(ctx context.Context) (kubeclient.Interface, error)
}

type onlineParts struct {
	source   *source.Source
	reporter *status.Reporter
}

// Run runs the agent until ctx ends. It returns an error only for what the
// agent cannot run with: bad settings, an unusable state directory, a local
// configuration that is missing and cannot be seeded, a kubeconfig that does
// not parse, a port that is taken.
func Run(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, nil)
}

func run(ctx context.Context, cfg Config, newClient func(context.Context) (kubeclient.Interface, error)) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("agent configuration: %w", err)
	}
	clock, err := bootclock.NewSystem(cfg.BootIDPath)
	if err != nil {
		return err
	}
	// Before anything in the state directory or beside the kubelet's file
	// is read or cleaned up: another agent may still be running there.
	lock, err := statelock.Acquire(ctx, cfg.StateDir, stateLockRetry)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		if err := lock.Release(); err != nil {
			klog.FromContext(ctx).Error(err, "Could not release the state directory's lock")
		}
	}()
	store, err := checkpoint.Open(cfg.StateDir, checkpoint.Options{})
	if err != nil {
		return err
	}
	// Config mode renders from the node's own configuration; on the first
	// start it is the kubelet's current file. A file the agent cannot seed
	// is one only an operator can restore, so the agent does not start.
	if cfg.Renderer.Mode == kubelet.ModeConfig {
		if err := kubelet.SeedLocalConfig(ctx, cfg.Renderer.LocalConfigFile, cfg.KubeletConfigFile); err != nil {
			return err
		}
	}
	kubeletFile := kubelet.ConfigFile{Path: cfg.KubeletConfigFile}
	// No write has begun yet, so a temporary file beside the kubelet's is
	// one a killed agent left. Failing to remove it costs only disk space,
	// which is no reason to leave the node unmanaged.
	if err := kubeletFile.RemoveStaleTemps(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Could not remove stale temporary files; continuing")
	}
	registry, err := program.NewRegistry()
	if err != nil {
		return err
	}
	m, err := metrics.New(registry, cfg.Trial.Period)
	if err != nil {
		return err
	}
	allowances := &reconciler.Allowances{}
	var stateFiles reconciler.StateFileRemover
	if cfg.KubeletRootDir != "" {
		stateFiles = kubelet.StateFiles{RootDir: cfg.KubeletRootDir}
	}
	rec, err := reconciler.New(reconciler.Config{
		Trial:           cfg.Trial,
		TrialTuning:     cfg.TrialTuning,
		ProbePeriod:     cfg.ProbePeriod,
		KubeletVersion:  cfg.KubeletVersion,
		DrainMode:       cfg.Drain,
		DrainTimeout:    cfg.DrainTimeout,
		DrainPollPeriod: cfg.DrainPollPeriod,
		// Drift is looked for as often as everything else nobody
		// announces.
		RunningCheckPeriod: cfg.ResyncPeriod,
	}, reconciler.Deps{
		Store:      store,
		Clock:      clock,
		Renderer:   cfg.Renderer,
		File:       kubeletFile,
		Restarter:  cfg.Restarter,
		Prober:     kubelet.NewProber(cfg.HealthzURL, cfg.ProbeTimeout),
		Running:    cfg.runningReader(),
		Validator:  reconciler.Validator{Rules: cfg.Hardening, LocalFields: cfg.Renderer.LocalFields, Allowances: allowances},
		StateFiles: stateFiles,
		Metrics:    m,
	})
	if err != nil {
		return err
	}
	scheme, err := kubeclient.NewScheme()
	if err != nil {
		return err
	}
	a := &agent{
		cfg:        cfg,
		reconciler: rec,
		metrics:    m,
		scheme:     scheme,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeguard-agent"}),
		newClient:  newClient,
		allowances: allowances,
	}
	if a.newClient == nil {
		a.newClient = a.clientFromKubeconfig
	}
	a.lastPass.Store(time.Now().UnixNano())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var fatal error
	var fatalOnce sync.Once
	fail := func(err error) {
		fatalOnce.Do(func() { fatal = err })
		cancel()
	}
	if cfg.ListenAddress != "" {
		srv, err := httpserver.New(cfg.ListenAddress, registry, httpserver.Checks{
			Liveness:  []httpserver.Check{httpserver.NamedCheck("sync-loop", a.checkSyncLoop)},
			Readiness: []httpserver.Check{httpserver.NamedCheck("apiserver-connection", a.checkConnected)},
		})
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Serving /healthz and /metrics", "address", srv.Addr().String())
		wg.Go(func() {
			if err := srv.Run(ctx); err != nil {
				fail(err)
			}
		})
	}
	wg.Go(func() {
		if err := a.connect(ctx); err != nil {
			fail(err)
		}
	})
	// Periodically too, so that changes nobody announces (an edited local
	// file, a rewritten kubelet file) are noticed.
	wg.Go(func() { wait.Until(func() { a.queue.Add(queueKey) }, cfg.ResyncPeriod, ctx.Done()) })
	context.AfterFunc(ctx, a.queue.ShutDown)

	a.queue.Add(queueKey)
	a.work(ctx)
	cancel()
	wg.Wait()
	return fatal
}

// clientFromKubeconfig waits for the kubelet's credentials and builds a
// client from them.
func (a *agent) clientFromKubeconfig(ctx context.Context) (kubeclient.Interface, error) {
	creds, err := kubeclient.WaitForConfig(ctx, a.cfg.Kubeconfig, kubeclient.DefaultBackoff, &a.credentials)
	if err != nil {
		return nil, err
	}
	kubeclient.CheckIdentity(ctx, creds, a.cfg.NodeName)
	creds.Config.QPS, creds.Config.Burst = a.cfg.KubeAPIQPS, a.cfg.KubeAPIBurst
	creds.Config.UserAgent = "nodeguard-agent/" + a.cfg.NodeName
	// The client follows the kubelet's certificate rotation until the
	// agent stops.
	return kubeclient.New(ctx, creds, a.scheme, kubeclient.Options{})
}

// connect starts the watches and the reporter once there is a client, and
// runs them until ctx ends.
func (a *agent) connect(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	client, err := a.newClient(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	drainer, err := drain.New(client, a.cfg.NodeName)
	if err != nil {
		return err
	}
	src, err := source.New(client, a.cfg.NodeName, source.Options{ReadPods: a.cfg.Trial.Node.ReadsPods() || a.cfg.TrialTuning.ReadsPods(), Drainer: drainer}, func() { a.queue.Add(queueKey) })
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.NewEventSink(ctx, client))
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(a.scheme, corev1.EventSource{Component: "nodeguard-agent", Host: a.cfg.NodeName})
	reporter := status.NewReporter(client, a.cfg.NodeName, src.Node, recorder)

	var wg sync.WaitGroup
	wg.Go(func() { src.Run(ctx) })
	wg.Go(func() { reporter.Run(ctx) })
	a.online.Store(&onlineParts{source: src, reporter: reporter})
	logger.Info("Watching the Node", "node", a.cfg.NodeName)
	a.queue.Add(queueKey)
	wg.Wait()
	return nil
}

// work is the single worker.
func (a *agent) work(ctx context.Context) {
	for {
		key, quit := a.queue.Get()
		if quit {
			return
		}
		a.pass(ctx)
		a.queue.Done(key)
	}
}

func (a *agent) pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	parts := a.online.Load()
	var obs reconciler.Observation
	if parts != nil {
		obs = parts.source.Observe(ctx)
		a.metrics.ObserveNode(obs.Node)
		a.allowances.Seen(obs.ConfigMap, obs.Assignment)
	}
	start := time.Now()
	// A pass that has begun is finished even on shutdown: killing a restart
	// command halfway helps nobody. Every step is bounded by its own
	// timeout.
	result, err := a.reconciler.Sync(context.WithoutCancel(ctx), obs)
	a.metrics.ObserveSync(time.Since(start), err)
	a.lastPass.Store(time.Now().UnixNano())

	a.pendingEvents = append(a.pendingEvents, result.Events...)
	if parts != nil {
		for _, ev := range a.pendingEvents {
			parts.reporter.Event(ctx, ev)
		}
		a.pendingEvents = a.pendingEvents[:0]
		parts.reporter.Set(result.Report)
	} else {
		for _, ev := range result.Events {
			ev.Log(ctx)
		}
		if n := len(a.pendingEvents); n > maxPendingEvents {
			a.pendingEvents = a.pendingEvents[n-maxPendingEvents:]
		}
	}

	if err != nil {
		logger.Error(err, "Pass failed; retrying with backoff")
		a.queue.AddRateLimited(queueKey)
	} else {
		a.queue.Forget(queueKey)
	}
	if result.RequeueAfter > 0 {
		a.queue.AddAfter(queueKey, result.RequeueAfter)
	}
}

// checkConnected fails /readyz until the watches run, saying what the
// agent waits for (typically the kubelet's TLS bootstrap).
func (a *agent) checkConnected(r *http.Request) error {
	if a.online.Load() != nil {
		return nil
	}
	return a.credentials.Check(r)
}

// checkSyncLoop fails /healthz when the worker has not finished a pass for
// far longer than the resync period: it is stuck.
func (a *agent) checkSyncLoop(*http.Request) error {
	// A drained change stops and starts the kubelet: two bounded steps.
	limit := 3*a.cfg.ResyncPeriod + 2*a.cfg.RestartTimeout
	if since := time.Since(time.Unix(0, a.lastPass.Load())); since > limit {
		return fmt.Errorf("no pass of the state machine for %v", since.Round(time.Second))
	}
	return nil
}
