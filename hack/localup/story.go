package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const (
	// configNamespace holds the demonstration's kubelet configurations:
	// the namespace manifests/base creates for them, the only one the
	// shipped config_namespaces policy allows by default.
	configNamespace = "kubelet-configs"
	// waitTimeout bounds each wait of the story: generous, for a busy
	// two-core machine.
	waitTimeout = 2 * time.Minute
	oldNodeName = "node-old"
)

// story starts the simulated nodes and tells what nodeguard does with them.
type story struct {
	c   *console
	env *framework.Env
	// admin and rollouts are the administrator's clients, printing the
	// apiserver's warnings to the console.
	admin      kubernetes.Interface
	rollouts   nodeguardclient.KubeletConfigRolloutInterface
	kubeconfig string
	binaries   framework.NodeBinaries
	opts       options
	nodes      []*framework.Node
	// runtime is what the nodes run pods on (chooseRuntime).
	runtime framework.ContainerRuntime
}

// demoNodes are the simulated nodes and their pools.
func demoNodes() []struct{ name, pool string } {
	return []struct{ name, pool string }{{"node-1", "blue"}, {"node-2", "blue"}, {"node-3", "green"}}
}

// startNodes starts the nodes, adding what stops each to cleanups as soon as
// it runs, so that an interruption half-way stops what was started.
func (s *story) startNodes(ctx context.Context, cleanups *[]func()) error {
	what := fmt.Sprintf("starting %d nodes: each a real kubelet %s on %s, run by a stand-in\n"+
		"    systemd unit (Restart=always), registering its Node with its own client certificate (system:node:NAME), and the agent\n"+
		"    beside it with the same credentials, then put in its pool by the administrator (label %s, which no node may set\n"+
		"    on itself); trials last %s here (a real agent's default is 5m), and a drain asks again every %s (5s)",
		len(demoNodes()), framework.DefaultKubeletVersion, s.runtimeWords(), contract.PoolLabel, s.opts.trialPeriod, drainPollPeriod)
	err := s.c.slow(ctx, what, func(ctx context.Context) error {
		for _, d := range demoNodes() {
			n, err := framework.StartNode(ctx, s.env, framework.NodeOptions{
				Name: d.name, Binaries: s.binaries, AdminLabels: map[string]string{contract.PoolLabel: d.pool}, TrialPeriod: s.opts.trialPeriod,
				Runtime:     s.runtime,
				AgentArgs:   []string{"--drain-poll-period=" + drainPollPeriod.String()},
				KubeletArgs: kubeletArgs(d.name),
			})
			if err != nil {
				return err
			}
			*cleanups = append(*cleanups, n.Stop)
			s.nodes = append(s.nodes, n)
			flags := ""
			if args := kubeletArgs(d.name); len(args) > 0 {
				flags = "  kubelet flags " + strings.Join(args, " ")
			}
			s.c.detail("%s  "+contract.PoolLabel+"=%s  kubelet %s  (kubelet /healthz on 127.0.0.1:%d, its API on port %d, agent on 127.0.0.1:%d)%s",
				n.Name, d.pool, framework.DefaultKubeletVersion, n.KubeletHealthzPort, n.KubeletPort, n.AgentPort, flags)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.wait(ctx, "waiting for the agents' first reports", s.nodes, func(r framework.Report) bool {
		return r.ConditionIs(corev1.ConditionTrue, contract.ReasonLocalConfig)
	})
}

// tell is the story: a pool rollout, a bad one halted on its canary and
// reverted, what nodes may not do, a change that needs the pool's Nodes
// drained, and an assignment a kubelet flag shadows.
func (s *story) tell(ctx context.Context) error {
	if err := s.kubectl(ctx, "status"); err != nil {
		return err
	}
	// The manifests create it; a cluster without it gets one.
	_, err := s.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", configNamespace, err)
	}
	good, err := s.rollOutToPool(ctx)
	if err != nil {
		return err
	}
	if err := s.haltOnCanary(ctx, good); err != nil {
		return err
	}
	if err := s.refusals(ctx); err != nil {
		return err
	}
	if err := s.drainForStaticCPUs(ctx); err != nil {
		return err
	}
	return s.flagShadowsAssignment(ctx)
}

// rollOutToPool is part 1: a KubeletConfigRollout takes a configuration
// across nodeguard.dev/pool=blue, the canary first and alone through its trial, then
// the rest one at a time.
func (s *story) rollOutToPool(ctx context.Context) (*corev1.ConfigMap, error) {
	s.c.chapter("1. Roll a kubelet configuration out across a pool")
	s.c.step("creating ConfigMap %s/pool-blue: maxPods: 150, labelled %s=%s so that nodes may be given it",
		configNamespace, contract.EligibleLabel, contract.EligibleLabelValue)
	cm, err := s.createConfig(ctx, "pool-blue", "maxPods: 150\n", nil)
	if err != nil {
		return nil, err
	}
	if err := s.createRollout(ctx, cm.Name); err != nil {
		return nil, err
	}
	s.c.detail("the rollout controller assigns it to the canary (the first Node of the pool by name), waits for its agent to\n"+
		"    download, checkpoint, validate and write it, restart the kubelet and see it through its trial (%s here),\n"+
		"    and only then moves the next Node", s.opts.trialPeriod)
	if err := s.rolloutStatus(ctx, false); err != nil {
		return nil, err
	}
	blue := s.pool("blue")
	if err := s.wait(ctx, "checking that "+names(blue)+" report it active and last-known-good", blue, func(r framework.Report) bool {
		return framework.RefersTo(r.Status.LastKnownGood, cm) && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
	}); err != nil {
		return nil, err
	}
	if err := s.kubectl(ctx, "status"); err != nil {
		return nil, err
	}
	for _, n := range blue {
		s.c.detail("%s: %s is active and last-known-good (KubeletConfigReady=True, %s)", n.Name, refString(cm), contract.ReasonConfigActive)
	}
	if err := s.showCapacity(ctx, blue, 150); err != nil {
		return nil, err
	}
	s.c.detail("node-3 (%s=green) is not selected and keeps its local configuration", contract.PoolLabel)
	return cm, nil
}

// haltOnCanary is part 2: a configuration that makes the kubelet crash
// fails on the canary; the rollout stops there and reverts it, and the
// rest of the pool is never touched.
func (s *story) haltOnCanary(ctx context.Context, good *corev1.ConfigMap) error {
	s.c.chapter("2. Roll out a bad configuration: halted on the canary and reverted")
	crash := framework.CrashingKubelet()
	s.c.step("creating ConfigMap %s/pool-blue-v2: maxPods: 200, and %s    which passes admission (nothing in the configuration alone says it is wrong), but makes a real kubelet\n"+
		"    exit at start-up on this %d-CPU machine", configNamespace, crash, runtime.NumCPU())
	bad, err := s.createConfig(ctx, "pool-blue-v2", "maxPods: 200\n"+crash, nil)
	if err != nil {
		return err
	}
	canary, rest := s.node("node-1"), s.node("node-2")
	untouched, err := rest.KubeletRestarts()
	if err != nil {
		return err
	}
	if err := s.retarget(ctx, bad.Name); err != nil {
		return err
	}
	s.c.detail("a new target starts over from the canary; its kubelet has %s (the trial's grace period) to answer /healthz.\n"+
		"    Reserving CPUs also shrinks what the node holds, so its agent drains it first (docs/disruptive-changes.md; part 4 shows\n"+
		"    a drain in full): the pods kube-scheduler placed there are evicted before the kubelet restarts", framework.DefaultTrialGracePeriod)
	if err := s.rolloutStatus(ctx, true); err != nil {
		return err
	}
	var report framework.Report
	if err := s.c.slow(ctx, "waiting for "+canary.Name+" to be back on "+good.Name, func(ctx context.Context) error {
		var err error
		// The revert re-points the canary to its previous source, which is
		// its last-known-good: the agent takes it up without a trial.
		report, err = canary.WaitReport(ctx, waitTimeout, canary.Name+" to be reverted", func(r framework.Report) bool {
			return framework.RefersTo(r.Status.Assigned, good) && framework.RefersTo(r.Status.Active, good) &&
				r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
		})
		if err != nil {
			return err
		}
		return framework.Eventually(ctx, waitTimeout, "the kubelet of "+canary.Name+" to run "+good.Name+" again", func(context.Context) (bool, string, error) {
			restarts, err := canary.KubeletRestarts()
			if err != nil {
				return false, "", err
			}
			file, err := canary.KubeletConfig()
			if err != nil {
				return false, "", err
			}
			sum := sha256.Sum256([]byte(file))
			last := restarts[len(restarts)-1]
			return last.Behavior == framework.KubeletRunning && last.SHA256 == hex.EncodeToString(sum[:]) && lastCrashed(restarts),
				"last start: " + last.Cause + " -> " + last.Behavior, nil
		})
	}); err != nil {
		return err
	}
	s.c.detail("%s: the canary, reverted to %s (KubeletConfigReady=%s, %s)", canary.Name, refString(good), report.Condition.Status, report.Condition.Reason)
	if restarts, err := canary.KubeletRestarts(); err == nil {
		runs := make([]string, len(restarts))
		for i, r := range restarts {
			runs[i] = r.Cause + " -> " + r.Behavior
		}
		s.c.detail("%s: its kubelet, start by start (from its unit's journal): %s", canary.Name, strings.Join(runs, ", "))
	}
	if err := s.showCapacity(ctx, []*framework.Node{canary}, 150); err != nil {
		return err
	}
	node, err := s.admin.CoreV1().Nodes().Get(ctx, rest.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	restarts, err := rest.KubeletRestarts()
	if err != nil {
		return err
	}
	if source := node.Annotations[contract.ConfigSourceAnnotation]; source != configNamespace+"/"+good.Name || len(restarts) != len(untouched) {
		return fmt.Errorf("%s was touched by the failed rollout: config-source %q, %d kubelet starts (was %d)", rest.Name, source, len(restarts), len(untouched))
	}
	s.c.detail("%s: never touched: still assigned %s/%s, its kubelet not restarted (%d starts before and after)", rest.Name, configNamespace, good.Name, len(restarts))
	return nil
}

// lastCrashed reports whether a run before the last one crashed: the bad
// configuration's.
func lastCrashed(restarts []framework.KubeletRestart) bool {
	for _, r := range restarts[:len(restarts)-1] {
		if r.Behavior == framework.KubeletCrashed {
			return true
		}
	}
	return false
}

// showCapacity waits until each node's kubelet reports maxPods as its pod
// capacity, and says so: the kubelet's own account of what it runs.
func (s *story) showCapacity(ctx context.Context, nodes []*framework.Node, maxPods int64) error {
	for _, n := range nodes {
		var ready string
		err := framework.Eventually(ctx, waitTimeout, "the kubelet of "+n.Name+" to report capacity pods="+fmt.Sprint(maxPods), func(ctx context.Context) (bool, string, error) {
			node, err := s.admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			pods := node.Status.Capacity[corev1.ResourcePods]
			ready = "NotReady"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = "Ready"
				}
			}
			return pods.Value() == maxPods && ready == "Ready", fmt.Sprintf("capacity pods=%d, %s", pods.Value(), ready), nil
		})
		if err != nil {
			return err
		}
		s.c.detail("%s: the kubelet itself reports capacity pods=%d, and the Node is %s", n.Name, maxPods, ready)
	}
	return nil
}

// refusals is part 3: what the graph authorizer and admission refuse nodes.
func (s *story) refusals(ctx context.Context) error {
	s.c.chapter("3. What nodes may not do")
	s.c.step("each node reads %s/pool-blue with its own client certificate", configNamespace)
	for _, reader := range []struct {
		node     string
		expected func(error) bool
	}{
		{"node-1", func(err error) bool { return err == nil }},
		{"node-3", apierrors.IsForbidden},
	} {
		result, err := s.read(ctx, reader.node, reader.expected)
		if err != nil {
			return err
		}
		s.c.detail("%s GET configmaps %s/pool-blue: %s", reader.node, configNamespace, result)
	}

	s.c.step("node-3 labels itself into the blue pool (%s=blue) with its own client certificate, to be given pool-blue by the rollout", contract.PoolLabel)
	node3, err := s.env.NodeClient("node-3")
	if err != nil {
		return err
	}
	joinBlue := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"blue"}}}`, contract.PoolLabel)
	_, err = node3.CoreV1().Nodes().Patch(ctx, "node-3", types.MergePatchType, joinBlue, metav1.PatchOptions{})
	if err == nil {
		return fmt.Errorf("node-3 was allowed to label itself into the blue pool")
	}
	if !apierrors.IsForbidden(err) {
		return err
	}
	s.c.detail("node-3 PATCH nodes node-3 %s=blue: refused: %s", contract.PoolLabel, apiMessage(err))

	s.c.step("%s, whose kubelet reports %s (the policy's minimum is %s), registers with its own client certificate", oldNodeName, oldKubeletVersion, s.opts.minKubeletVersion)
	// Only kubelet v1.37.2 is built here: the registration is made as an
	// older kubelet would make it, with the node's own certificate.
	err = framework.RegisterNode(ctx, s.env, oldNodeName, oldKubeletVersion, nil)
	if err == nil {
		return fmt.Errorf("%s, with kubelet %s, was allowed to register", oldNodeName, oldKubeletVersion)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		return err
	}
	s.c.detail("%s registration: refused: %s", oldNodeName, apiMessage(err))

	s.c.step("had it registered before the minimum was raised (here, an administrator registers it, assigned pool-blue),\n" +
		"    the authorizer would still refuse it its configurations (and, with the opt-in authorization configuration, everything but its own Node)")
	oldNode := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: oldNodeName, Annotations: map[string]string{contract.ConfigSourceAnnotation: configNamespace + "/pool-blue"}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: oldKubeletVersion}},
	}
	if _, err := s.admin.CoreV1().Nodes().Create(ctx, oldNode, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering %s as an administrator: %w", oldNodeName, err)
	}
	// The webhook learns of the Node through its watch; until then the
	// read is refused all the same, but for want of an assignment.
	result, err := s.read(ctx, oldNodeName, func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "minimum")
	})
	if err != nil {
		return err
	}
	s.c.detail("%s GET configmaps %s/pool-blue: %s", oldNodeName, configNamespace, result)
	oldClient, err := s.env.NodeClient(oldNodeName)
	if err != nil {
		return err
	}
	if _, err := oldClient.CoreV1().Nodes().Get(ctx, oldNodeName, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("%s reading its own Node: %w", oldNodeName, err)
	}
	s.c.detail("%s GET nodes %s: allowed (so that it can still report)", oldNodeName, oldNodeName)
	if err := s.admin.CoreV1().Nodes().Delete(ctx, oldNodeName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting %s: %w", oldNodeName, err)
	}
	s.c.step("deleted %s", oldNodeName)
	return s.kubectl(ctx, "status")
}

// read has node GET pool-blue until the answer is the one expected (the authorizer's view of new objects lags their creation, and
// the apiserver caches its answers for seconds), and describes the answer.
func (s *story) read(ctx context.Context, node string, expected func(error) bool) (string, error) {
	client, err := s.env.NodeClient(node)
	if err != nil {
		return "", err
	}
	var last error
	err = framework.Eventually(ctx, waitTimeout, node+"'s read of pool-blue to be answered as expected", func(ctx context.Context) (bool, string, error) {
		_, last = client.CoreV1().ConfigMaps(configNamespace).Get(ctx, "pool-blue", metav1.GetOptions{})
		return expected(last), fmt.Sprint(last), nil
	})
	switch {
	case err != nil:
		return "", err
	case last == nil:
		return "allowed (it is assigned to " + node + ")", nil
	case apierrors.IsForbidden(last):
		// The apiserver puts each authorizer's reason on a line of its own.
		return "Forbidden: " + strings.ReplaceAll(apiMessage(last), "\n", "; "), nil
	}
	return "", last
}

// createConfig creates an eligible ConfigMap holding a KubeletConfiguration.
func (s *story) createConfig(ctx context.Context, name, config string, annotations map[string]string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: name, Annotations: annotations,
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: map[string]string{contract.ConfigMapKey: framework.KubeletConfigHeader + config},
	}
	created, err := s.admin.CoreV1().ConfigMaps(configNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ConfigMap %s/%s: %w", configNamespace, name, err)
	}
	return created, nil
}

// kubectl runs `kubectl nodeguard ARGS` in-process as the administrator, as
// a user would type it.
func (s *story) kubectl(ctx context.Context, args ...string) error {
	return s.kubectlExit(ctx, cli.ExitOK, args...)
}

// kubectlExit is kubectl for a command whose expected exit code is want.
func (s *story) kubectlExit(ctx context.Context, want int, args ...string) error {
	s.c.printf("$ kubectl nodeguard %s\n", strings.Join(args, " "))
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: s.c, ErrOut: s.c}
	if code := cli.Run(ctx, append([]string{"--kubeconfig", s.kubeconfig}, args...), streams); code != want {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("kubectl nodeguard %s: exit code %d, want %d", strings.Join(args, " "), code, want)
	}
	if want != cli.ExitOK {
		s.c.printf("(exit code %d)\n", want)
	}
	return nil
}

// wait waits until every node's report satisfies want.
func (s *story) wait(ctx context.Context, what string, nodes []*framework.Node, want func(framework.Report) bool) error {
	return s.c.slow(ctx, what, func(ctx context.Context) error {
		for _, n := range nodes {
			if _, err := n.WaitReport(ctx, waitTimeout, n.Name+": "+what, want); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *story) pool(pool string) []*framework.Node {
	var nodes []*framework.Node
	for i, d := range demoNodes() {
		if d.pool == pool && i < len(s.nodes) {
			nodes = append(nodes, s.nodes[i])
		}
	}
	return nodes
}

func (s *story) node(name string) *framework.Node {
	i := slices.IndexFunc(s.nodes, func(n *framework.Node) bool { return n.Name == name })
	return s.nodes[i]
}

// printNodeLogs shows the end of each agent's log after a failure, since
// the work directory is about to go.
func (s *story) printNodeLogs() {
	for _, n := range s.nodes {
		s.c.detail("agent log of %s, last lines:\n%s", n.Name, n.AgentLogTail(10))
	}
}

func names(nodes []*framework.Node) string {
	var list []string
	for _, n := range nodes {
		list = append(list, n.Name)
	}
	return strings.Join(list, " and ")
}

func refString(cm *corev1.ConfigMap) string {
	return cm.Namespace + "/" + cm.Name + "@" + cm.ResourceVersion
}

// apiMessage is the apiserver's message in an API error, without client-go's
// wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// warningPrinter shows the apiserver's warnings (admission webhooks answer
// with them) as details of the step that caused them.
type warningPrinter struct{ c *console }

func (w warningPrinter) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	if text != "" {
		w.c.detail("Warning: %s", text)
	}
}
