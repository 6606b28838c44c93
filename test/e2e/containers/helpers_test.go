package containers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/cpuset"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitTimeout bounds each wait: drains, kubelet restarts with real
// containers, trials and rescheduling on a busy two-core machine.
const waitTimeout = 4 * time.Minute

// configNamespace holds the tests' eligible ConfigMaps (manifests/base
// creates it).
const configNamespace = "kubelet-configs"

// trialPeriod leaves a restarted kubelet time to start the pods it is
// given and report.
const trialPeriod = 5 * time.Second

// startPool starts count nodes on real containers, named <pool>-a, -b, ...,
// labelled by the administrator into the pool. When the test ends each is
// stopped and must have left nothing on the host.
func startPool(t *testing.T, pool string, count int, agentArgs ...string) []*framework.Node {
	t.Helper()
	var nodes []*framework.Node
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
			_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
			left, err := n.Leftovers(context.Background())
			if err != nil {
				t.Errorf("%s: looking for what it left on the host: %v", n.Name, err)
			}
			for _, l := range left {
				t.Errorf("%s left on the host after it stopped: %s", n.Name, l)
			}
		}
	})
	for i := range count {
		n, err := framework.StartNode(t.Context(), env, framework.NodeOptions{
			Name: fmt.Sprintf("%s-%c", pool, 'a'+i), Binaries: binaries, TrialPeriod: trialPeriod,
			Runtime:     framework.RuntimeContainerd,
			AdminLabels: map[string]string{contract.PoolLabel: pool},
			AgentArgs:   append([]string{"--drain-poll-period=1s"}, agentArgs...),
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	// Ready and untainted, every one, before a test places pods: the
	// scheduler would otherwise put them all on the first.
	for _, n := range nodes {
		err := framework.Eventually(t.Context(), waitTimeout, n.Name+" Ready and untainted", func(ctx context.Context) (bool, string, error) {
			node, err := env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ready := framework.NodeReadyCondition(node)
			return ready != nil && ready.Status == corev1.ConditionTrue && len(node.Spec.Taints) == 0,
				fmt.Sprintf("Ready %v, taints %v", ready, node.Spec.Taints), nil
		})
		if err != nil {
			t.Fatalf("%v\nkubelet log:\n%s", err, n.KubeletLogTail(20))
		}
	}
	return nodes
}

// namespace creates a namespace that goes when the test ends.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if _, err := env.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Admin.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// deployment runs replicas pods of test/workload (args are its flags) on
// the pool, spread one per schedulable node, each container asking for
// resources (none: BestEffort; requests equal to limits: Guaranteed).
// minAvailable > 0 adds a PodDisruptionBudget.
func deployment(t *testing.T, ns, name, pool string, replicas int32, minAvailable int, resources corev1.ResourceRequirements, args ...string) {
	t.Helper()
	labels := map[string]string{"app": name}
	container := framework.WorkloadContainer("work", args...)
	container.Resources = resources
	spec := framework.WorkloadPodSpec(container)
	spec.NodeSelector = map[string]string{contract.PoolLabel: pool}
	honor := corev1.NodeInclusionPolicyHonor
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: &honor,
	}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if _, err := env.Admin.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if minAvailable == 0 {
		return
	}
	min := intstr.FromInt(minAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := env.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// guaranteed asks for cpu whole CPUs and 64Mi, as requests equal to limits.
func guaranteed(cpu int64) corev1.ResourceRequirements {
	list := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return corev1.ResourceRequirements{Requests: list, Limits: list}
}

// runningPod is a pod of a test's workload whose container runs: its
// cgroup on its node and the processes in it.
type runningPod struct {
	pod    *corev1.Pod
	node   *framework.Node
	cgroup framework.Cgroup
	pids   []int
}

func (p runningPod) String() string {
	return fmt.Sprintf("%s on %s (cgroup %s, pids %v)", p.pod.Name, p.node.Name, p.cgroup.Path, p.pids)
}

// waitRunning waits until exactly count pods of app in ns run, none other
// left (evicted and terminating, or pending), each container's process in
// its cgroup on the node the pod is bound to; and returns them by name.
func waitRunning(t *testing.T, ns, app string, count int, nodes ...*framework.Node) map[string]runningPod {
	t.Helper()
	var running map[string]runningPod
	err := framework.Eventually(t.Context(), waitTimeout, fmt.Sprintf("%d %s pods running with their processes", count, app), func(ctx context.Context) (bool, string, error) {
		list, err := env.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		running = map[string]runningPod{}
		var states []string
		for i := range list.Items {
			p := &list.Items[i]
			state := fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				if rp, err := containerOf(p, nodes); err == nil {
					running[p.Name] = rp
				} else {
					state += ": " + err.Error()
				}
			}
			states = append(states, state)
		}
		return len(running) == count && len(list.Items) == count, strings.Join(states, "; "), nil
	})
	if err != nil {
		for _, n := range nodes {
			t.Logf("%s kubelet log:\n%s", n.Name, n.KubeletLogTail(20))
		}
		t.Fatal(err)
	}
	return running
}

// containerOf finds the running container "work" of p: its cgroup on its
// node and the processes in it.
func containerOf(p *corev1.Pod, nodes []*framework.Node) (runningPod, error) {
	i := slices.IndexFunc(nodes, func(n *framework.Node) bool { return n.Name == p.Spec.NodeName })
	if i < 0 {
		return runningPod{}, fmt.Errorf("bound to %q, not a node of the test", p.Spec.NodeName)
	}
	cg, err := nodes[i].ContainerCgroup(p, "work")
	if err != nil {
		return runningPod{}, err
	}
	pids, err := cg.PIDs()
	if err != nil {
		return runningPod{}, err
	}
	if len(pids) == 0 {
		return runningPod{}, fmt.Errorf("no process in %s", cg.Path)
	}
	return runningPod{pod: p, node: nodes[i], cgroup: cg, pids: pids}, nil
}

// onNode picks the running pods bound to n.
func onNode(pods map[string]runningPod, n *framework.Node) []runningPod {
	var on []runningPod
	for _, p := range pods {
		if p.node == n {
			on = append(on, p)
		}
	}
	slices.SortFunc(on, func(a, b runningPod) int { return strings.Compare(a.pod.Name, b.pod.Name) })
	return on
}

// waitCPUs waits until the container's cgroup allows exactly cpus, and
// the kernel lets its processes run on those alone.
func waitCPUs(t *testing.T, p runningPod, cpus cpuset.CPUSet) {
	t.Helper()
	err := framework.Eventually(t.Context(), waitTimeout, p.pod.Name+"'s container on CPUs "+cpus.String(), func(context.Context) (bool, string, error) {
		got, err := p.cgroup.CPUs()
		if err != nil {
			return false, "", err
		}
		ok := got.Equals(cpus)
		var affinity []string
		for _, pid := range p.pids {
			a, err := framework.ProcessCPUs(pid)
			if err != nil {
				return false, "", err
			}
			ok = ok && a.Equals(cpus)
			affinity = append(affinity, a.String())
		}
		return ok, fmt.Sprintf("cpuset.cpus %q, processes' affinity %v", got, affinity), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// allCPUs is the host's CPUs: the root cpuset's.
func allCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	cpus, err := framework.Cgroup{Path: "/"}.CPUs()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

func configMap(t *testing.T, name, config string) *corev1.ConfigMap {
	t.Helper()
	cm, err := framework.PutKubeletConfigMap(t.Context(), env.Admin, configNamespace, name, config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Admin.CoreV1().ConfigMaps(configNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return cm
}

// rollOut points the pool's rollout at cm (creating the rollout, canary 1
// and one node at a time, the first time) and waits until it is Complete
// for cm.
func rollOut(t *testing.T, pool string, cm *corev1.ConfigMap) {
	t.Helper()
	ref := contract.ConfigMapRef{Namespace: configNamespace, Name: cm.Name}
	existing, err := rollouts.Get(t.Context(), pool, metav1.GetOptions{})
	if err == nil {
		existing.Spec.ConfigMapRef = ref
		if _, err := rollouts.Update(t.Context(), existing, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pointing rollout %s at %s: %v", pool, cm.Name, err)
		}
	} else {
		one := int32(1)
		mu := intstr.FromInt(1)
		r := &v1alpha1.KubeletConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: v1alpha1.KubeletConfigRolloutSpec{
				NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: pool}},
				ConfigMapRef: ref, Canary: &one, MaxUnavailable: &mu,
				// The workloads' emptyDirs hold only the heartbeat the
				// tests read, which may go with an evicted pod, as
				// kubectl drain --delete-emptydir-data says.
				DrainOptions: &contract.DrainOptions{DeleteEmptyDirData: true},
			},
		}
		if _, err := rollouts.Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating rollout %s: %v", pool, err)
		}
		t.Cleanup(func() { _ = rollouts.Delete(context.Background(), pool, metav1.DeleteOptions{}) })
	}
	err = framework.Eventually(t.Context(), waitTimeout, "rollout "+pool+" Complete with "+cm.Name, func(ctx context.Context) (bool, string, error) {
		r, err := rollouts.Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionFailed) {
			return false, "", fmt.Errorf("rollout %s failed: %s", pool, framework.DescribeRollout(r))
		}
		return r.Spec.ConfigMapRef == ref && r.Status.ObservedGeneration == r.Generation &&
			meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionComplete), framework.DescribeRollout(r), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPolicy waits until each node's kubelet runs the CPU manager policy,
// by its /configz and its checkpoint.
func waitPolicy(t *testing.T, policy string, nodes ...*framework.Node) {
	t.Helper()
	for _, n := range nodes {
		err := framework.Eventually(t.Context(), waitTimeout, n.Name+" to run the "+policy+" CPU manager", func(ctx context.Context) (bool, string, error) {
			configz, err := n.Configz(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			kc, _ := configz["kubeletconfig"].(map[string]any)
			running, _ := kc["cpuManagerPolicy"].(string)
			st, err := n.CPUManagerState()
			if err != nil && !os.IsNotExist(err) {
				return false, err.Error(), nil
			}
			return strings.EqualFold(running, policy) && strings.EqualFold(st.PolicyName, policy),
				fmt.Sprintf("/configz %q, checkpoint %q", running, st.PolicyName), nil
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s\nkubelet log:\n%s", err, n.AgentLogTail(30), n.KubeletLogTail(30))
		}
	}
}

// ended waits until none of the processes runs any more.
func ended(t *testing.T, what string, pids []int) {
	t.Helper()
	err := framework.Eventually(t.Context(), waitTimeout, what+" to end", func(context.Context) (bool, string, error) {
		var alive []int
		for _, pid := range pids {
			if framework.ProcessRunning(pid) {
				alive = append(alive, pid)
			}
		}
		return len(alive) == 0, fmt.Sprintf("still running: %v", alive), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// beating waits until the pod's heartbeat in its emptyDir has advanced by
// at least two beats: its process runs and writes, seen from the host.
func beating(t *testing.T, p runningPod) {
	t.Helper()
	_, first, _ := p.node.Heartbeat(p.pod)
	err := framework.Eventually(t.Context(), waitTimeout, p.pod.Name+"'s heartbeat on "+p.node.Name, func(context.Context) (bool, string, error) {
		_, count, err := p.node.Heartbeat(p.pod)
		if err != nil {
			return false, err.Error(), nil
		}
		return count >= first+2, fmt.Sprintf("count %d (first seen %d)", count, first), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assign assigns cm to n and waits until its agent reports it active and
// last-known-good, done with any drain.
func assign(t *testing.T, n *framework.Node, cm *corev1.ConfigMap) {
	t.Helper()
	// The workloads' emptyDirs hold only the heartbeat the tests read, which
	// may go with an evicted pod, as kubectl drain --delete-emptydir-data
	// says; the switch goes in the same patch as the assignment.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		contract.ConfigSourceAnnotation:            configNamespace + "/" + cm.Name,
		contract.DrainDeleteEmptyDirDataAnnotation: "true",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.CoreV1().Nodes().Patch(t.Context(), n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("assigning %s to %s: %v", cm.Name, n.Name, err)
	}
	if _, err := n.WaitReport(t.Context(), waitTimeout, cm.Name+" active", func(r framework.Report) bool {
		return framework.RefersTo(r.Status.LastKnownGood, cm) && r.Status.Phase == "" && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
	}); err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
	}
}
