package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitTimeout bounds each wait: a whole pool moves through drains, trials
// and rescheduling within it on a busy two-core machine.
const waitTimeout = 4 * time.Minute

// configNamespace holds the tests' eligible ConfigMaps (manifests/base
// creates it).
const configNamespace = "kubelet-configs"

// trialPeriod leaves the restarted kubelet time to admit the pods it finds
// and report; short enough for a pool of three in a few minutes.
const trialPeriod = 8 * time.Second

// staticPolicy pins CPUs: the static CPU manager with CPU 0 reserved for
// the system. Every host here has at least two CPUs.
const staticPolicy = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"

// startPool starts count real nodes named <pool>-a, -b, ..., labelled by
// the administrator into the pool, with agentArgs added to each agent's
// flags. Everything goes when the test ends.
func startPool(t *testing.T, pool string, count int, agentArgs ...string) []*framework.Node {
	t.Helper()
	var nodes []*framework.Node
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
			_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	for i := range count {
		n, err := framework.StartNode(t.Context(), env, framework.NodeOptions{
			Name: fmt.Sprintf("%s-%c", pool, 'a'+i), Binaries: binaries, TrialPeriod: trialPeriod,
			AdminLabels: map[string]string{contract.PoolLabel: pool},
			AgentArgs:   append([]string{"--drain-poll-period=1s"}, agentArgs...),
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
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

func podTemplate(pool string, labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{contract.PoolLabel: pool},
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
}

// workload runs, in ns on the pool: a Deployment web of replicas pods
// under a PodDisruptionBudget of minAvailable, and a DaemonSet node-agent.
func workload(t *testing.T, ns, pool string, replicas int32, minAvailable int) {
	t.Helper()
	web := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: web}, Template: podTemplate(pool, web)},
	}
	if _, err := env.Admin.AppsV1().Deployments(ns).Create(t.Context(), deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	min := intstr.FromInt(minAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: web}},
	}
	if _, err := env.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := map[string]string{"app": "node-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: podTemplate(pool, agent)},
	}
	if _, err := env.Admin.AppsV1().DaemonSets(ns).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPods lists the pods of app in ns that run, by name.
func runningPods(ctx context.Context, ns, app string) (map[string]*corev1.Pod, error) {
	pods, err := env.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	running := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running[p.Name] = p
		}
	}
	return running, nil
}

// waitRunning waits until count pods of app run in ns and returns them.
func waitRunning(t *testing.T, ns, app string, count int) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	err := framework.Eventually(t.Context(), waitTimeout, fmt.Sprintf("%d %s pods to run", count, app), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = runningPods(ctx, ns, app); err != nil {
			return false, err.Error(), nil
		}
		return len(pods) == count, fmt.Sprintf("%d running", len(pods)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
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

// createRollout rolls cm out over the pool one node at a time, deleted
// when the test ends; onFailure empty is the default, Revert. edits change
// the spec further.
func createRollout(t *testing.T, name, pool, cm string, onFailure v1alpha1.FailurePolicy, edits ...func(*v1alpha1.KubeletConfigRolloutSpec)) {
	t.Helper()
	one := int32(1)
	mu := intstr.FromInt(1)
	r := &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector:   metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: pool}},
			ConfigMapRef:   contract.ConfigMapRef{Namespace: configNamespace, Name: cm},
			Canary:         &one,
			MaxUnavailable: &mu,
			OnFailure:      onFailure,
		},
	}
	for _, edit := range edits {
		edit(&r.Spec)
	}
	if _, err := rollouts.Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating rollout %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = rollouts.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitRollout waits until the rollout's condition kind is True.
func waitRollout(t *testing.T, name, kind string) *v1alpha1.KubeletConfigRollout {
	t.Helper()
	var last *v1alpha1.KubeletConfigRollout
	err := framework.Eventually(t.Context(), waitTimeout, "rollout "+name+" "+kind, func(ctx context.Context) (bool, string, error) {
		r, err := rollouts.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		last = r
		return meta.IsStatusConditionTrue(r.Status.Conditions, kind), framework.DescribeRollout(r), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// cpuManagerState is the kubelet's own checkpoint of its CPU manager.
type cpuManagerState struct {
	PolicyName    string `json:"policyName"`
	DefaultCPUSet string `json:"defaultCpuSet"`
}

func readCPUManagerState(n *framework.Node) (cpuManagerState, error) {
	var st cpuManagerState
	root, err := n.KubeletRootDir()
	if err != nil {
		return st, err
	}
	data, err := os.ReadFile(filepath.Join(root, "cpu_manager_state"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

// runsPolicy reports whether the node's kubelet runs the CPU manager
// policy: /configz says so, and the kubelet's own checkpoint was written
// for it.
func runsPolicy(ctx context.Context, n *framework.Node, policy string) (bool, string) {
	configz, err := n.Configz(ctx)
	if err != nil {
		return false, err.Error()
	}
	kc, _ := configz["kubeletconfig"].(map[string]any)
	running, _ := kc["cpuManagerPolicy"].(string)
	st, err := readCPUManagerState(n)
	if err != nil {
		return false, fmt.Sprintf("/configz %q, checkpoint: %v", running, err)
	}
	return strings.EqualFold(running, policy) && strings.EqualFold(st.PolicyName, policy),
		fmt.Sprintf("/configz %q, checkpoint %q", running, st.PolicyName)
}

// waitPolicy waits until every node runs the CPU manager policy.
func waitPolicy(t *testing.T, policy string, nodes ...*framework.Node) {
	t.Helper()
	for _, n := range nodes {
		err := framework.Eventually(t.Context(), waitTimeout, n.Name+" to run the "+policy+" CPU manager", func(ctx context.Context) (bool, string, error) {
			ok, detail := runsPolicy(ctx, n, policy)
			return ok, detail, nil
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s\nkubelet log:\n%s", err, n.AgentLogTail(30), n.KubeletLogTail(30))
		}
	}
}

// uncordoned waits until no node is cordoned, nor marked.
func uncordoned(t *testing.T, nodes ...*framework.Node) {
	t.Helper()
	for _, n := range nodes {
		err := framework.Eventually(t.Context(), waitTimeout, n.Name+" uncordoned", func(ctx context.Context) (bool, string, error) {
			node, err := env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			_, marked := node.Annotations[contract.CordonedAnnotation]
			return !node.Spec.Unschedulable && !marked, fmt.Sprintf("unschedulable=%v marked=%v", node.Spec.Unschedulable, marked), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// cordonWatch records, for every node it watches, whether it was ever
// seen cordoned by its agent and which phases its status went through.
type cordonWatch struct {
	cordoned map[string]bool
	phases   map[string][]string
	stop     context.CancelFunc
	done     chan struct{}
}

func watchCordons(t *testing.T, nodes ...*framework.Node) *cordonWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &cordonWatch{cordoned: map[string]bool{}, phases: map[string][]string{}, stop: cancel, done: make(chan struct{})}
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.Name] = true
	}
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			list, err := env.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: contract.PoolLabel})
			if err != nil {
				continue
			}
			for _, node := range list.Items {
				if !names[node.Name] {
					continue
				}
				if _, marked := node.Annotations[contract.CordonedAnnotation]; marked && node.Spec.Unschedulable {
					w.cordoned[node.Name] = true
				}
				var st contract.ConfigStatus
				if json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &st) == nil && st.Phase != "" {
					seen := w.phases[node.Name]
					if len(seen) == 0 || seen[len(seen)-1] != st.Phase {
						w.phases[node.Name] = append(seen, st.Phase)
					}
				}
			}
		}
	}()
	return w
}

// end stops the watch; its maps are the test's to read afterwards.
func (w *cordonWatch) end() {
	w.stop()
	<-w.done
}

// patchNode merge-patches a Node as the administrator.
func patchNode(t *testing.T, name string, patch map[string]any) {
	t.Helper()
	body, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
