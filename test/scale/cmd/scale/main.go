// Command scale runs the scale harness of test/scale: N simulated kubelets
// against a real kube-apiserver with nodeguard installed as manifests/ say
// (or not at all, or with its webhook down), and a report of what their
// routine traffic cost. `make scale` runs it; --help lists the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nodeguard/nodeguard/test/scale"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: scale [flags]

Starts a real etcd and kube-apiserver on 127.0.0.1 for each mode, with nodeguard's
manifests as they are now, runs N simulated kubelets (own node certificates; Node
registration, a Lease renewal and a Node status patch every period, a watch on their own
Node; a tenth read an assigned kubelet configuration), and after a warm-up reports the
latency and errors of lease renewals and status patches over the window, webhook calls per
second per endpoint, and the CPU and RSS of the webhook, kube-apiserver and etcd. It stops
by itself, and on Ctrl-C or an error stops every process it started.

Modes: none (nodeguard in neither chain), shipped (as installed), min-version (as
installed, but for the opt-in authorization configuration that sends every request of a
node to the webhook to enforce the minimum kubelet version), webhook-down (as installed,
the webhook killed for the whole window; then an assignment and an eligible ConfigMap
edit are tried, which must be refused naming nodeguard, and again after the webhook is
started, which must go through).

With --rollout it measures a KubeletConfigRollout instead (the modes and the window flags
do not apply): one control plane with nodeguard as installed, cmd/rollout-controller as its
own process with its ServiceAccount's token behind a proxy that counts its requests, and
--nodes simulated kubelets each with a simulated agent that reports through the agent's own
status code with the node's credentials (a trial of --trial, never failed). It rolls a new
immutable ConfigMap out over every Node (canary --canary, maxUnavailable
--max-unavailable percent) and reports the total time and the time beyond the trials, the
controller's reaction from a Node's update to its next assignment (from the harness's own
Node watch) beside the apiserver's share in the same run (an agent's write until that watch
shows it), the controller's CPU and RSS, and its requests per Node moved; it fails if
the rollout does not complete, if more Nodes than maxUnavailable are ever unavailable, or
if a Node is assigned more than once. "make rollout-scale" runs it at 1,000 Nodes.
Unless --period or --status-period are given, a rollout run's kubelets renew their
Lease every 10s and patch their status as often up to 1,000 Nodes; above, the status
every 5m (a quiet cluster's) and the Lease period grows so that the fleet renews at
most 100 Leases a second (10s x Nodes/1,000). The report says the periods used. --drain makes the rollout drain-class; then it also fails unless every
Node was seen cordoned by its agent, counted unavailable while cordoned, and released.

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		modes      = fs.String("modes", "none,shipped,min-version,webhook-down", "Comma-separated modes to measure, one after another in this run, each on a fresh control plane (see --reuse-cluster): none, shipped, min-version, webhook-down.")
		mode       = fs.String("mode", "", "A single mode; overrides --modes.")
		nodes      = fs.Int("nodes", 100, "Number of simulated kubelets.")
		window     = fs.Duration("window", 2*time.Minute, "Length of the measured steady window, after the warm-up.")
		warmup     = fs.Duration("warmup", 30*time.Second, "Load before the window; at least --period, so that every kubelet's timers have fired.")
		period     = fs.Duration("period", 10*time.Second, "Each kubelet's lease renewal interval (the kubelet's default: 10s), and its status patch interval unless --status-period. With --rollout and unset: 10s, longer above 1,000 Nodes (see above).")
		statusPer  = fs.Duration("status-period", 0, "Each kubelet's status patch interval; 0 means --period. A real kubelet patches its status when it changed or every nodeStatusReportFrequency (5m by default): --period is the worst case of a status that keeps changing, 5m a quiet cluster. With --rollout and neither set: --period up to 1,000 Nodes, 5m above.")
		settle     = fs.Duration("down-settle", 10*time.Second, "In webhook-down, time between killing the webhook and the window, so that the apiserver's cached Allows (authorizedTTL, 10s as shipped) have expired.")
		fraction   = fs.Float64("config-fraction", 0.1, "Fraction of the nodes assigned a kubelet configuration, which they read by name (a get and a named watch).")
		reuse      = fs.Bool("reuse-cluster", false, "Measure webhook-down right after shipped on the same cluster and kubelets, killing the webhook after the shipped window; saves a start-up.")
		workDir    = fs.String("work-dir", "", "Directory for certificates and the processes' logs; empty means a temporary one, removed at the end unless --keep.")
		keep       = fs.Bool("keep", false, "Keep the temporary work directory (logs of etcd, kube-apiserver and the webhook).")
		jsonOutput = fs.String("json", "", "Also write the results as JSON to this file.")

		rollout        = fs.Bool("rollout", false, "Measure a KubeletConfigRollout over --nodes simulated kubelets and agents instead of the modes.")
		trial          = fs.Duration("trial", 2*time.Second, "With --rollout: each simulated agent's trial period.")
		maxUnavailable = fs.Int("max-unavailable", 10, "With --rollout: the rollout's maxUnavailable, as a percentage of the Nodes.")
		canary         = fs.Int("canary", 1, "With --rollout: the rollout's canary Nodes.")
		controllerArgs = fs.String("controller-flags", "", "With --rollout: flags added to cmd/rollout-controller's, space-separated, e.g. '--kube-api-qps=200 --kube-api-burst=400'; empty runs it with its defaults.")
		controllerBin  = fs.String("controller-binary", "", "With --rollout: a cmd/rollout-controller already built (e.g. from the tree before a change: go build -o /tmp/rc-before ./cmd/rollout-controller) to run instead of building this tree's. It is given the same flags: --kubeconfig, --listen-address, --leader-elect*, --resync-period, --trial-period, --workers, -v and --controller-flags.")
		drain          = fs.Bool("drain", false, "With --rollout: a drain-class rollout (spec.drain: Always): each simulated agent cordons its Node as the agent does, reports Draining for --drain-time, then runs its trial and lifts the cordon when it passes.")
		drainTime      = fs.Duration("drain-time", 0, "With --drain: how long each simulated drain takes (the harness runs no pods, so this stands for their evictions).")
		apiPriority    = fs.Bool("api-priority", false, "With --rollout: install manifests/components/api-priority with nodeguard, the rollout controller's own priority level at the apiserver's priority and fairness (and its Lease in leader-election); without it the controller's requests are one flow of workload-low, as in a cluster that installs the base alone.")
		ctrlNice       = fs.Int("controller-nice", 0, "With --rollout: the nice value (-20 to 19; below 0 needs root or CAP_SYS_NICE) of the controller and the counting proxy, set on every thread once they run. On one machine they share the CPUs with the control plane and the simulated fleet, which a controller in a cluster does not: a negative value keeps the time they wait for a CPU behind those out of the controller's own share; 0 leaves it in.")
		rolloutTimeout = fs.Duration("rollout-timeout", 15*time.Minute, "With --rollout: how long the rollout may take before the run fails.")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *rollout {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		lease, status := scale.RolloutPeriods(*nodes)
		if set["period"] {
			lease = *period
		}
		if set["status-period"] || set["period"] {
			status = *statusPer
		}
		if *drainTime != 0 && !*drain {
			return errors.New("--drain-time needs --drain")
		}
		return runRollout(scale.RolloutOptions{
			Nodes: *nodes, Trial: *trial, MaxUnavailablePercent: *maxUnavailable, Canary: int32(*canary),
			Period: lease, StatusPeriod: status, Timeout: *rolloutTimeout, ControllerArgs: strings.Fields(*controllerArgs),
			ControllerBinary: *controllerBin, Drain: *drain, DrainTime: *drainTime, APIPriority: *apiPriority, ControllerNice: *ctrlNice,
		}, *workDir, *keep, *jsonOutput, stdout, stderr)
	}
	list := *modes
	if *mode != "" {
		list = *mode
	}
	parsed, err := scale.ParseModes(list)
	if err != nil {
		return err
	}
	dir := *workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nodeguard-scale-"); err != nil {
			return fmt.Errorf("creating a work directory: %w", err)
		}
		if !*keep {
			defer os.RemoveAll(dir)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := scale.Run(ctx, scale.Options{
		Modes: parsed, Nodes: *nodes, Period: *period, StatusPeriod: *statusPer, Warmup: *warmup, Window: *window,
		DownSettle: *settle, ConfigFraction: *fraction, ReuseCluster: *reuse, WorkDir: dir, Progress: stderr,
	})
	if len(results) > 0 {
		if werr := scale.WriteReport(stdout, results); werr != nil {
			err = errors.Join(err, werr)
		}
		if *jsonOutput != "" {
			if werr := scale.WriteJSON(*jsonOutput, results); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if *keep || *workDir != "" {
		fmt.Fprintln(stderr, "work directory:", dir)
	}
	return err
}
