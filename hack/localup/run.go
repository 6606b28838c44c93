package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// options are localup's settings.
type options struct {
	demoOnly          bool
	keep              bool
	trialPeriod       time.Duration
	minKubeletVersion string
	// runtime is --runtime: auto, containerd or fakecri.
	runtime string
	// tempRoot is where the work directory is made; empty means the
	// system's temporary directory. Tests point it at their own.
	tempRoot string
}

func defaultOptions() options {
	return options{trialPeriod: 8 * time.Second, minKubeletVersion: "1.34.0", runtime: runtimeAuto}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.demoOnly, "demo-only", o.demoOnly, "Exit after the demonstration instead of waiting for Ctrl-C.")
	fs.BoolVar(&o.keep, "keep", o.keep, "Keep the work directory (certificates, kubeconfigs, logs, the nodes' files) after exit.")
	fs.DurationVar(&o.trialPeriod, "trial-period", o.trialPeriod, "The simulated agents' --trial-period; seconds, so the demonstration does not take the agent's default of 5m.")
	fs.StringVar(&o.runtime, "runtime", o.runtime, "What the nodes' kubelets run pods on: containerd (real containers: containerd and runc, each node its own, pods as processes in the node's own cgroup; needs root and cgroup v1), fakecri (the kubelet's fake runtime: nothing executes), or auto: containerd when the machine allows it, else fakecri, said on screen.")
	fs.StringVar(&o.minKubeletVersion, "min-kubelet-version", o.minKubeletVersion, "minKubeletVersion of the webhook's policy (the shipped manifests/base/policy.yaml has 1.34.0). The demonstration's too-old node reports 1.29.4, so keep it above that.")
}

func (o *options) validate() error {
	if err := validateRuntime(o.runtime); err != nil {
		return err
	}
	if o.trialPeriod <= 0 {
		return fmt.Errorf("--trial-period %v: must be positive", o.trialPeriod)
	}
	v, err := version.ParseGeneric(o.minKubeletVersion)
	if err != nil {
		return fmt.Errorf("--min-kubelet-version %q: %w", o.minKubeletVersion, err)
	}
	if !version.MustParseGeneric(oldKubeletVersion).LessThan(v) {
		return fmt.Errorf("--min-kubelet-version %s: the demonstration's too-old node reports %s, which must be below it", o.minKubeletVersion, oldKubeletVersion)
	}
	if version.MustParseGeneric(framework.DefaultKubeletVersion).LessThan(v) {
		return fmt.Errorf("--min-kubelet-version %s: the simulated nodes report %s, which must not be below it", o.minKubeletVersion, framework.DefaultKubeletVersion)
	}
	return nil
}

// run does everything and undoes it all before it returns, whatever
// happens: processes are stopped in reverse order of starting, then the
// work directory goes (unless --keep).
func run(ctx context.Context, opts options, out io.Writer) (err error) {
	c := newConsole(out)
	dir, err := os.MkdirTemp(opts.tempRoot, "nodeguard-localup-")
	if err != nil {
		return fmt.Errorf("creating the work directory: %w", err)
	}
	var cleanups []func()
	defer func() {
		if err != nil && ctx.Err() != nil {
			// However the cancellation surfaced (an API client's error,
			// say), say it was one.
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if len(cleanups) > 0 {
			c.step("stopping the nodes, the rollout controller, the webhook, kube-scheduler, kube-controller-manager, kube-apiserver and etcd")
		}
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if opts.keep {
			c.step("kept the work directory %s", dir)
			return
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("removing the work directory: %w", rmErr))
			return
		}
		c.step("removed %s; nothing is left running", dir)
	}()

	if err := c.slow(ctx, "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet "+controlplane.KubernetesVersion+": using the cached build, or building them (hack/testbin.sh; the first time takes about 10 minutes)",
		func(ctx context.Context) error { return ensureControlPlaneBinaries(ctx, c) }); err != nil {
		return err
	}
	var binaries framework.NodeBinaries
	if err := c.slow(ctx, "building the node agent (cmd/agent) and the kubelet's stand-in systemd unit (test/kubeletunit)", func(ctx context.Context) error {
		var err error
		binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin"))
		return err
	}); err != nil {
		return err
	}
	settings, err := demoSettings(opts.minKubeletVersion)
	if err != nil {
		return err
	}
	// What the webhook serves without --policy-dir, as installed from the
	// manifests; the e2e suites' default is a neutral set instead.
	regoPolicies, err := framework.ShippedPolicyFiles()
	if err != nil {
		return err
	}
	var env *framework.Env
	if err := c.slow(ctx, "starting etcd and kube-apiserver with nodeguard in their authorization and admission chains (manifests/control-plane, manifests/base),\n"+
		"    kube-controller-manager (its node lifecycle controller marks a silent kubelet's Node NotReady; its workload controllers make\n"+
		"    the pods), kube-scheduler (it places them on the nodes, and elsewhere when a node is drained), and the nodeguard webhook",
		func(ctx context.Context) error {
			var err error
			env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env"), Settings: settings, PolicyFiles: regoPolicies,
				ControllerManager: true, Scheduler: true})
			return err
		}); err != nil {
		return err
	}
	cleanups = append(cleanups, env.Stop)
	if err := c.slow(ctx, "building and starting the rollout controller (cmd/rollout-controller) with a token of its ServiceAccount, so that the shipped RBAC is what it may do",
		func(ctx context.Context) error {
			// The agents' trial period, so that the controller counts a Node
			// updated no sooner than its agent could honestly say so.
			controller, err := env.StartRolloutController(ctx, "localup", "--trial-period="+opts.trialPeriod.String())
			if err != nil {
				return err
			}
			cleanups = append(cleanups, controller.Stop)
			return nil
		}); err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			c.detail("webhook log, last lines:\n%s", env.WebhookLogTail(15))
		}
	}()
	c.detail("policy file: manifests/base/policy.yaml with minKubeletVersion %s; Rego policies: the shipped ones (policies/)", opts.minKubeletVersion)

	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, env.CP.AdminConfig()); err != nil {
		return err
	}
	adminConfig := env.CP.AdminConfig()
	adminConfig.WarningHandlerWithContext = warningPrinter{c}
	admin, err := kubernetes.NewForConfig(adminConfig)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	nodeguard, err := versioned.NewForConfig(adminConfig)
	if err != nil {
		return fmt.Errorf("admin KubeletConfigRollout client: %w", err)
	}
	s := &story{c: c, env: env, admin: admin, rollouts: nodeguard.NodeguardV1alpha1().KubeletConfigRollouts(), kubeconfig: kubeconfig, binaries: binaries, opts: opts}
	defer func() {
		if err != nil && ctx.Err() == nil {
			s.printNodeLogs()
		}
	}()
	if err := s.chooseRuntime(ctx, dir); err != nil {
		return err
	}
	if err := s.startNodes(ctx, &cleanups); err != nil {
		return err
	}
	if err := s.tell(ctx); err != nil {
		return err
	}

	c.chapter("nodeguard is running")
	plugin := "go run ./cmd/kubectl-nodeguard --kubeconfig " + kubeconfig
	c.printf("etcd, kube-apiserver (%s), kube-controller-manager, kube-scheduler, the webhook, the rollout controller and %d nodes, each a real kubelet on\n"+
		"%s with an agent (trial %s) beside it.\n", env.CP.URL(), len(s.nodes), s.runtimeWords(), opts.trialPeriod)
	c.printf("Admin kubeconfig:\n    %s\n", kubeconfig)
	c.printf("From the repository root, try:\n    %s status\n    %s rollout status %s\n    %s assign %s/pool-blue node-3\n    %s explain node-3 %s/pool-blue\n",
		plugin, plugin, rolloutName, plugin, configNamespace, plugin, configNamespace)
	c.printf("or any kubectl with --kubeconfig %s.\n", kubeconfig)
	c.printf("Logs (removed on exit unless --keep): %s/env/webhook.log, %s/env/controlplane/, %s/env/nodes/NODE/{agent,kubelet,%s}.log\n", dir, dir, dir, s.runtime)
	if opts.demoOnly {
		return nil
	}
	if opts.keep {
		c.printf("Press Ctrl-C to stop; everything above is then stopped (the work directory stays: --keep).\n")
	} else {
		c.printf("Press Ctrl-C to stop; everything above is then stopped and removed.\n")
	}
	<-ctx.Done()
	c.printf("\n")
	return nil
}

// ensureControlPlaneBinaries runs hack/testbin.sh, which returns at once when
// the cached etcd and kube-apiserver are up to date and builds them
// otherwise. Its progress lines go to the console.
func ensureControlPlaneBinaries(ctx context.Context, c *console) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "testbin.sh"))
	cmd.Dir = root
	// The script's go build has children of its own: stop them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = indented{c}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/testbin.sh: %w", err)
	}
	c.detail("using %s", strings.TrimSpace(stdout.String()))
	return nil
}

// indented passes output through the console as detail lines.
type indented struct{ c *console }

func (w indented) Write(p []byte) (int, error) {
	w.c.detail("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// oldKubeletVersion is what the demonstration's too-old node reports.
const oldKubeletVersion = "v1.29.4"

// demoSettings are the shipped settings (the NodeguardPolicy of
// manifests/base/policy.yaml) with the minimum kubelet version given.
func demoSettings(minKubeletVersion string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	shipped, err := os.ReadFile(filepath.Join(root, "manifests", "base", "policy.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading the shipped policy: %w", err)
	}
	return rewriteSettings(shipped, minKubeletVersion)
}
