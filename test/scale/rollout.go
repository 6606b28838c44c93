package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// RolloutOptions shape a rollout benchmark (RunRollout).
type RolloutOptions struct {
	// Nodes is the number of simulated kubelets, each with an agent.
	Nodes int
	// Trial is each simulated agent's trial period.
	Trial time.Duration
	// MaxUnavailablePercent is the rollout's maxUnavailable, a percentage.
	MaxUnavailablePercent int
	// Canary is the rollout's spec.canary.
	Canary int32
	// Period is the kubelets' lease renewal interval and StatusPeriod
	// their status patch interval (Options), the cluster's background load
	// during the rollout.
	Period       time.Duration
	StatusPeriod time.Duration
	// Timeout bounds the rollout itself.
	Timeout time.Duration
	// ControllerArgs are added to the controller's flags (later flags
	// win), e.g. --kube-api-qps, to see what bounds it.
	ControllerArgs []string
	// ControllerBinary, when set, is a cmd/rollout-controller already
	// built (e.g. from the tree before a change) to run instead of this
	// tree's; it must take the flags startController passes.
	ControllerBinary string
	// Drain makes the rollout drain-class (spec.drain: Always): each
	// agent cordons its Node and reports Draining for DrainTime before
	// its trial, and lifts the cordon when the trial passes.
	Drain     bool
	DrainTime time.Duration
	// ControllerNice, when not zero, is the nice value the controller and
	// the counting proxy run at: on this machine they share two cores
	// with the control plane and the simulated fleet, where a controller
	// in a cluster has its own CPU, and time they spend waiting for a
	// CPU would count as their own share.
	ControllerNice int
	// APIPriority installs manifests/components/api-priority with
	// nodeguard: the controller's own priority level at the apiserver.
	APIPriority bool
	// WorkDir holds the cluster's certificates and logs.
	WorkDir string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// fleetOptions shape the fleet of simulated kubelets under the rollout.
func (o RolloutOptions) fleetOptions() Options {
	return Options{Nodes: o.Nodes, Period: o.Period, StatusPeriod: o.StatusPeriod}
}

func (o RolloutOptions) validate() error {
	var errs []error
	if o.Nodes < 2 {
		errs = append(errs, fmt.Errorf("nodes must be at least 2, not %d", o.Nodes))
	}
	if o.Trial <= 0 || o.Period <= 0 || o.StatusPeriod < 0 || o.Timeout <= 0 || o.DrainTime < 0 {
		errs = append(errs, errors.New("trial, period and timeout must be positive, the status period and the drain time not negative"))
	}
	if o.MaxUnavailablePercent < 1 || o.MaxUnavailablePercent > 100 {
		errs = append(errs, fmt.Errorf("max-unavailable %d%% is not between 1%% and 100%%", o.MaxUnavailablePercent))
	}
	if o.Canary < 1 || int(o.Canary) >= o.Nodes {
		errs = append(errs, fmt.Errorf("canary %d must be at least 1 and fewer than the nodes", o.Canary))
	}
	if o.WorkDir == "" {
		errs = append(errs, errors.New("a work directory is required"))
	}
	if o.ControllerNice < -20 || o.ControllerNice > 19 {
		errs = append(errs, fmt.Errorf("controller nice %d is not between -20 and 19", o.ControllerNice))
	}
	return errors.Join(errs...)
}

// Batch is maxUnavailable in Nodes, as pkg/rollout rounds it: down, never
// below one.
func (o RolloutOptions) Batch() int { return max(1, o.Nodes*o.MaxUnavailablePercent/100) }

// TrialsOnPath is how many trials lie end to end on the rollout's critical
// path: the canary's, then ceil((N-canary)/batch) waves.
func (o RolloutOptions) TrialsOnPath() int {
	rest := o.Nodes - int(o.Canary)
	return 1 + int(math.Ceil(float64(rest)/float64(o.Batch())))
}

// Wave is what each Node on the critical path takes by itself: its
// simulated drain, if any, then its trial.
func (o RolloutOptions) Wave() time.Duration {
	if o.Drain {
		return o.DrainTime + o.Trial
	}
	return o.Trial
}

// RolloutResult is one rollout's figures.
type RolloutResult struct {
	Nodes               int       `json:"nodes"`
	Batch               int       `json:"batch"`
	TrialSeconds        float64   `json:"trial_seconds"`
	LeasePeriodSeconds  float64   `json:"lease_period_seconds"`
	StatusPeriodSeconds float64   `json:"status_period_seconds"`
	Start               time.Time `json:"start"`
	Complete            bool      `json:"complete"`
	TotalSeconds        float64   `json:"total_seconds"`
	TrialsOnPath        int       `json:"trials_on_path"`
	BeyondTrialsSeconds float64   `json:"beyond_trials_seconds"`
	// OverTrials is the total over the trials on the critical path (with
	// the drain before each in a drain-class rollout): 1 is a controller
	// and an apiserver that cost nothing.
	OverTrials float64 `json:"total_over_trials"`
	// ApiserverFloorSeconds is a floor under the rollout's total on this
	// apiserver, whatever the controller: each wave on the critical path
	// holds its trial (and drain) and, on its Nodes' path, two writes each
	// seen through a watch (the assignment reaching the agent, the agent's
	// report of a passed trial reaching the controller); a wave ends with
	// its slowest Node, of a hundred or more, and the floor counts it one
	// such write at the run's write-to-watch p99. OverFloor is the total
	// over it.
	ApiserverFloorSeconds float64 `json:"apiserver_floor_seconds"`
	OverFloor             float64 `json:"total_over_apiserver_floor"`
	// Drain is what the harness saw of the agents' cordons, in a
	// drain-class rollout.
	Drain *DrainSeen `json:"drain,omitempty"`
	// Reactions are from a Node reaching Updated to the next assignment.
	Reactions OpStats `json:"reactions"`
	// ReactionSplit divides the reactions at the controller's patch
	// (splitReactions).
	ReactionSplit ReactionSplit `json:"reaction_split"`
	// WriteToWatch is, in the same run, from an agent sending the write
	// that made its Node Updated to the harness's Node watch showing it:
	// one write and one watch delivery, the apiserver's share of a
	// reaction, which holds a write and two deliveries besides the
	// controller's own work.
	WriteToWatch OpStats `json:"write_to_watch"`
	// ReadRetries counts the agents' reads of the target retried (refused
	// until nodeguard's graph saw the assignment).
	ReadRetries int64 `json:"agent_read_retries"`
	// Admission is what validating webhooks cost the rollout's writes.
	Admission      AdmissionStats `json:"admission"`
	MaxUnavailable int            `json:"max_unavailable_observed"`
	// Assigned counts Nodes by how often they were assigned the target.
	Assigned map[int]int `json:"assigned_times"`
	Updated  int         `json:"updated"`
	// Controller is the controller's CPU over the rollout and its RSS at
	// the end; PeakRSSMiB the most RSS sampled.
	Controller ProcStats `json:"controller"`
	CPUSeconds float64   `json:"controller_cpu_seconds"`
	// CPUPerThousand is CPUSeconds per 1,000 Nodes moved.
	CPUPerThousand float64 `json:"controller_cpu_seconds_per_1000_nodes"`
	PeakRSSMiB     float64 `json:"controller_peak_rss_mib"`
	// Requests are the controller's requests during the rollout by verb
	// and resource, counted on the wire.
	Requests map[string]int `json:"controller_requests"`
	// Rejected are those of Requests the apiserver answered 429 (its
	// priority and fairness: the controller's queues full), which
	// client-go sends again after the Retry-After; an assignment's are
	// counted apart.
	Rejected map[string]int `json:"controller_requests_rejected"`
	// NodeChanges is the controller's own nodeguard_rollout_node_changes_total
	// by action and result (conflicts are patches it retried).
	NodeChanges map[string]float64 `json:"controller_node_changes"`
	// Syncs is the controller's nodeguard_rollout_syncs_total by result;
	// "waiting" syncs were held back until its caches showed its own writes.
	Syncs map[string]float64 `json:"controller_syncs"`
	// PriorityLevels are the controller's requests by the priority level
	// that served them, by name.
	PriorityLevels map[string]int `json:"controller_priority_levels"`
	// APIPriority says manifests/components/api-priority was installed,
	// ControllerNice the nice value of the controller and the proxy.
	APIPriority    bool `json:"api_priority"`
	ControllerNice int  `json:"controller_nice"`
	// ControllerBinary is the controller run, when not this tree's.
	ControllerBinary string `json:"controller_binary,omitempty"`
	// QueueWaitMs and SyncMs are the mean time a rollout waited in the
	// controller's workqueue and the mean sync, from its workqueue metrics.
	QueueWaitMs float64 `json:"controller_queue_wait_ms"`
	SyncMs      float64 `json:"controller_sync_ms"`
	// Throttle is the controller's wait in its client's rate limiter,
	// EventThrottle its Events' in theirs.
	Throttle      ClientThrottle `json:"controller_client_throttle"`
	EventThrottle ClientThrottle `json:"controller_event_throttle"`
	// TimedReactions is the controller's own timing of its reactions.
	TimedReactions TimedReactions `json:"controller_timed_reactions"`
}

// RequestsPerNode is the controller's requests per Node moved, without
// leader-election renewals (which depend on time, not on Nodes).
func (r RolloutResult) RequestsPerNode() float64 {
	n := 0
	for k, v := range r.Requests {
		if !strings.HasSuffix(k, " leases") {
			n += v
		}
	}
	return float64(n) / float64(r.Nodes)
}

const (
	rolloutName      = "scale-rollout"
	rolloutConfigMap = "scale-rollout-v2"
	rssSampleEvery   = 250 * time.Millisecond
	agentStartBatch  = 100
)

// RunRollout starts a cluster with nodeguard as shipped, the rollout
// controller as its own process with its ServiceAccount's token (behind a
// counting proxy), N simulated kubelets each with a simulated agent, then
// rolls a new configuration out over all of them and measures it.
func RunRollout(ctx context.Context, o RolloutOptions) (_ RolloutResult, err error) {
	r := RolloutResult{Nodes: o.Nodes, Batch: o.Batch(), TrialSeconds: o.Trial.Seconds(), TrialsOnPath: o.TrialsOnPath(), ControllerBinary: o.ControllerBinary, APIPriority: o.APIPriority, ControllerNice: o.ControllerNice,
		LeasePeriodSeconds: o.Period.Seconds(), StatusPeriodSeconds: o.fleetOptions().statusPeriod().Seconds()}
	if err := o.validate(); err != nil {
		return r, fmt.Errorf("rollout options: %w", err)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	logf(o.Progress, "rollout: starting a control plane with nodeguard installed in %s", o.WorkDir)
	var components []string
	if o.APIPriority {
		dir, err := manifests.Dir("components/api-priority")
		if err != nil {
			return r, err
		}
		components = append(components, dir)
	}
	c, err := startCluster(ctx, filepath.Join(o.WorkDir, "cluster"), ModeShipped, components...)
	if err != nil {
		return r, err
	}
	defer c.stop()
	f, err := startFleet(ctx, c, o.fleetOptions(), newRecorder())
	if err != nil {
		return r, err
	}
	defer f.stop()
	agents := make([]*agent, len(f.kubelets))
	for i, k := range f.kubelets {
		if agents[i], err = newAgent(k, o.Trial, o.DrainTime); err != nil {
			return r, err
		}
	}
	// The agents start agentStartBatch at a time, each batch once the one
	// before has reported: thousands of first watches and reports at once
	// are a start-up storm, not the steady state the rollout runs in.
	for batch := range slices.Chunk(agents, agentStartBatch) {
		for _, a := range batch {
			f.goRun(func() { a.run(f.runCtx) })
		}
		for _, a := range batch {
			select {
			case <-a.reported:
			case <-ctx.Done():
				return r, ctx.Err()
			}
		}
	}
	logf(o.Progress, "rollout: %d kubelets and agents report the local configuration", o.Nodes)
	if err := f.pool(ctx, c.admin, rolloutPool); err != nil {
		return r, err
	}

	// The simulated agents' trial is the period the controller counts a
	// Node's trial as lasting (its --trial-period), and its Lease has the
	// shipped timings (framework's are short, for failover tests, and a
	// busy apiserver would cost it the Lease); later flags win.
	controllerArgs := append([]string{"--trial-period=" + o.Trial.String(), "--leader-elect-lease-duration=15s",
		"--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}, o.ControllerArgs...)
	proxy, ctrl, ctrlPID, err := startController(ctx, c, o.WorkDir, o.ControllerBinary, controllerArgs)
	if err != nil {
		return r, err
	}
	defer proxy.stop()
	if o.ControllerNice != 0 {
		for _, pid := range []int{ctrlPID, proxy.cmd.Process.Pid} {
			if err := renice(pid, o.ControllerNice); err != nil {
				return r, err
			}
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\nthe rollout controller's log ends:\n%s", err, ctrl.LogTail(20))
		}
	}()

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutConfigMap, Namespace: configNamespace, Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data:       map[string]string{contract.ConfigMapKey: kubeletConfig + "serializeImagePulls: false\n"},
		Immutable:  ptrTo(true),
	}
	created, err := c.admin.CoreV1().ConfigMaps(configNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return r, fmt.Errorf("creating the configuration to roll out: %w", err)
	}
	target := contract.ConfigMapVersion{Namespace: created.Namespace, Name: created.Name, UID: string(created.UID), ResourceVersion: created.ResourceVersion}
	obs := newObserver(target)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	listed, obsErr := make(chan struct{}), make(chan error, 1)
	go func() { obsErr <- obs.run(obsCtx, c.admin, listed) }()
	select {
	case <-listed:
	case err := <-obsErr:
		return r, err
	}
	nodeguard, err := versioned.NewForConfig(c.cp.AdminConfig())
	if err != nil {
		return r, fmt.Errorf("KubeletConfigRollout client: %w", err)
	}
	rollouts := nodeguard.NodeguardV1alpha1().KubeletConfigRollouts()
	before, err := readProc(ctrlPID)
	if err != nil {
		return r, err
	}
	peak := before.rssByte
	admitBefore, err := takeAdmissionTime(ctx, c)
	if err != nil {
		return r, err
	}
	if err := proxy.start(ctx); err != nil {
		return r, err
	}
	r.Start = time.Now()
	logf(o.Progress, "rollout: creating %s (canary %d, maxUnavailable %d%% = %d, trial %s)", rolloutName, o.Canary, o.MaxUnavailablePercent, r.Batch, o.Trial)
	if err := createRollout(ctx, rollouts, o); err != nil {
		return r, err
	}
	end, complete, err := waitRollout(ctx, rollouts, o.Timeout, func() error {
		if !ctrl.Running() {
			// A replica that loses its leader Lease (an apiserver too slow
			// to renew it, on an overloaded machine) exits for its
			// Deployment to restart; nothing restarts it here, so the
			// rollout would wait out the timeout.
			return errors.New("the rollout controller exited during the rollout")
		}
		if !proxy.running() {
			return errors.New("the counting proxy exited during the rollout")
		}
		if s, err := readProc(ctrlPID); err == nil {
			peak = max(peak, s.rssByte)
		}
		return nil
	}, o.Progress, obs)
	if complete {
		// The rollout's status and the Nodes come through two watches,
		// which are not ordered: the Complete status can arrive before
		// the last Node's update. The controller saw that update; give
		// the harness's Node watch the moment it needs to see it too.
		catchUp(ctx, obs, o.Nodes, 10*time.Second)
	}
	wire, werr := proxy.record(ctx)
	if werr != nil {
		return r, werr
	}
	r.Requests, r.Rejected = wire.Counts, wire.Rejected
	if r.PriorityLevels, werr = priorityLevelNames(ctx, c.admin, wire.Levels); werr != nil {
		return r, werr
	}
	admitAfter, aerr := takeAdmissionTime(ctx, c)
	err = errors.Join(err, aerr)
	r.Admission = admissionStats(admitBefore, admitAfter)
	readControllerMetrics(ctx, ctrl.URL+"/metrics", &r)
	after, perr := readProc(ctrlPID)
	r.Complete = complete
	r.TotalSeconds = end.Sub(r.Start).Seconds()
	onPath := float64(r.TrialsOnPath) * o.Wave().Seconds()
	r.BeyondTrialsSeconds = r.TotalSeconds - onPath
	r.OverTrials = r.TotalSeconds / onPath
	if perr == nil {
		r.Controller = procStats(before, after)
		r.CPUSeconds = (after.cpu - before.cpu).Seconds()
		r.CPUPerThousand = 1000 * r.CPUSeconds / float64(o.Nodes)
		r.PeakRSSMiB = float64(max(peak, after.rssByte)) / (1 << 20)
	}
	select {
	case oerr := <-obsErr:
		err = errors.Join(err, oerr)
	default:
	}
	s := obs.snapshot()
	r.MaxUnavailable, r.Updated = s.maxUnavailable, s.updated
	if o.Drain {
		r.Drain = &s.drain
	}
	r.Assigned = map[int]int{}
	for _, k := range f.kubelets {
		r.Assigned[s.assignments[k.name]]++
	}
	r.Reactions = latencyStats(reactions(s.events))
	r.ReactionSplit = newReactionSplit(s.events, wire.Patches, wire.nodeEvents())
	r.WriteToWatch = latencyStats(writesToWatch(s.events, agents))
	if r.WriteToWatch.OK > 0 {
		r.ApiserverFloorSeconds = float64(r.TrialsOnPath) * (o.Wave().Seconds() + r.WriteToWatch.P99Ms/1000)
		r.OverFloor = r.TotalSeconds / r.ApiserverFloorSeconds
	}
	for _, a := range agents {
		r.ReadRetries += a.readRetries.Load()
	}
	err = errors.Join(err, perr)
	return r, err
}

// writesToWatch times each Node's Updated, as the harness's watch showed
// it, from when its agent sent the write that made it so.
func writesToWatch(events []nodeEvent, agents []*agent) []time.Duration {
	sent := make(map[string]time.Time, len(agents))
	for _, a := range agents {
		sent[a.k.name] = a.updatedWriteSent()
	}
	var out []time.Duration
	for _, e := range events {
		if at := sent[e.node]; e.updated && !at.IsZero() && at.Before(e.at) {
			out = append(out, e.at.Sub(at))
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// startController starts one replica of cmd/rollout-controller (this
// tree's, or binary when set) with the shipped flags that matter here
// (workers) and framework's, talking to the apiserver through a counting
// proxy (a process of its own) with its ServiceAccount's token.
func startController(ctx context.Context, c *cluster, dir, binary string, extra []string) (*proxyProcess, *framework.RolloutController, int, error) {
	cfg, err := c.env.RolloutControllerConfig(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	proxy, err := startProxyProcess(ctx, dir, cfg)
	if err != nil {
		return nil, nil, 0, err
	}
	kubeconfig := filepath.Join(dir, "rollout-controller-via-proxy.kubeconfig")
	// The proxy adds the token.
	viaProxy := &rest.Config{Host: proxy.URL, TLSClientConfig: rest.TLSClientConfig{CAData: proxy.CAData}}
	if err := controlplane.WriteKubeconfig(kubeconfig, viaProxy); err != nil {
		proxy.stop()
		return nil, nil, 0, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--workers=2"}, extra...)
	var ctrl *framework.RolloutController
	if binary != "" {
		ctrl, err = c.env.StartRolloutControllerBinary(ctx, binary, "scale", args...)
	} else {
		ctrl, err = c.env.StartRolloutController(ctx, "scale", args...)
	}
	if err != nil {
		proxy.stop()
		return nil, nil, 0, err
	}
	pid := ctrl.PID()
	if pid == 0 {
		proxy.stop()
		return nil, nil, 0, fmt.Errorf("the rollout controller exited at start:\n%s", ctrl.LogTail(20))
	}
	return proxy, ctrl, pid, nil
}

// rolloutPool is the pool the administrator puts every node of the fleet in,
// and the rollout selects.
const rolloutPool = "scale"

func createRollout(ctx context.Context, rollouts nodeguardclient.KubeletConfigRolloutInterface, o RolloutOptions) error {
	mu := intstr.FromString(fmt.Sprintf("%d%%", o.MaxUnavailablePercent))
	canary := o.Canary
	ro := &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutName},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector:   metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: rolloutPool}},
			ConfigMapRef:   contract.ConfigMapRef{Namespace: configNamespace, Name: rolloutConfigMap},
			Canary:         &canary,
			MaxUnavailable: &mu,
		},
	}
	if o.Drain {
		ro.Spec.Drain = v1alpha1.DrainAlways
	}
	if _, err := rollouts.Create(ctx, ro, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the rollout: %w", err)
	}
	return nil
}

// priorityLevelNames turns counts by priority level UID into counts by the
// level's name; a level deleted since keeps its UID.
func priorityLevelNames(ctx context.Context, admin kubernetes.Interface, byUID map[string]int) (map[string]int, error) {
	levels, err := admin.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the priority levels: %w", err)
	}
	names := map[string]string{}
	for _, l := range levels.Items {
		names[string(l.UID)] = l.Name
	}
	out := make(map[string]int, len(byUID))
	for uid, n := range byUID {
		name, ok := names[uid]
		if !ok {
			name = uid
		}
		out[name] += n
	}
	return out, nil
}
