package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const (
	// workloadNamespace holds the demonstration's workload on the blue
	// pool: the Deployment workloadName under a PodDisruptionBudget of
	// the same name.
	workloadNamespace = "demo"
	workloadName      = "web"
	workloadReplicas  = 2
	// staticConfigName is the blue pool's configuration with the static
	// CPU manager policy; it keeps pool-blue's maxPods.
	staticConfigName = "pool-blue-v3"
	// Half a CPU reserved for the system, which the policy rounds up to
	// one whole CPU kept for the shared pool: not reservedSystemCPUs,
	// which on a two-CPU machine would leave one allocatable CPU, not
	// enough for the pinned pod beside the others' requests.
	staticConfig = "maxPods: 150\ncpuManagerPolicy: static\nsystemReserved:\n  cpu: 500m\n"
	// drainPollPeriod is the agents' --drain-poll-period here: how often
	// a drain asks again for an eviction the budget refused. A real
	// agent's default is 5s.
	drainPollPeriod = time.Second
)

// drainForStaticCPUs is part 4: a change a kubelet restart cannot carry
// (the CPU manager's static policy: the kubelet refuses to start while its
// checkpoint records another policy) rolled out across the blue pool, each
// Node drained by its own agent while a Deployment under a
// PodDisruptionBudget keeps running on the pool.
func (s *story) drainForStaticCPUs(ctx context.Context) error {
	s.c.chapter("4. A change a restart cannot carry: the static CPU manager policy, through a drain")
	blue := s.pool("blue")
	s.c.step("creating namespace %s with Deployment %s: %d replicas (pause containers asking for 100m CPU each), pinned to the blue pool by\n"+
		"    nodeSelector %s=blue and spread one per schedulable Node, under PodDisruptionBudget %s: minAvailable 1; and Deployment %s:\n"+
		"    one Guaranteed pod asking a whole CPU (requests equal to limits), on the blue pool too",
		workloadNamespace, workloadName, workloadReplicas, contract.PoolLabel, workloadName, pinnedName)
	if err := s.createWorkload(ctx); err != nil {
		return err
	}
	if err := s.createPinned(ctx); err != nil {
		return err
	}
	var pods []*corev1.Pod
	if err := s.c.slow(ctx, "waiting for kube-scheduler to place them and the kubelets to run them", func(ctx context.Context) error {
		var err error
		pods, err = s.waitRunning(ctx)
		return err
	}); err != nil {
		return err
	}
	for _, p := range pods {
		s.c.detail("%s/%s: Running on %s", p.Namespace, p.Name, p.Spec.NodeName)
	}
	others, err := s.otherPods(ctx, blue)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		s.c.detail("also on them, from manifests/base and placed by kube-scheduler (%s):", s.idleWords())
		for _, p := range others {
			s.c.detail("    %s/%s on %s (%s)", p.Namespace, p.Name, p.Spec.NodeName, drainFate(p))
		}
	}
	for _, n := range blue {
		running, err := s.cpuManager(ctx, n)
		if err != nil {
			return err
		}
		s.c.detail("%s: %s", n.Name, running)
	}

	s.c.step("under the none policy every container may run on every CPU:")
	if err := s.showCPUs(ctx, blue, false); err != nil {
		return err
	}
	s.c.step("creating ConfigMap %s/%s: maxPods: 150 as before, and cpuManagerPolicy: static with systemReserved cpu: 500m (one whole\n"+
		"    CPU kept for the shared pool)", configNamespace, staticConfigName)
	cm, err := s.createConfig(ctx, staticConfigName, staticConfig, nil)
	if err != nil {
		return err
	}
	s.c.detail("a kubelet restart cannot carry it: the kubelet refuses to start while its cpu_manager_state records another policy.\n" +
		"    The rollout's spec.drain is Auto (its default), so each agent sees that the change needs a drain (docs/disruptive-changes.md):\n" +
		"    it cordons its Node, evicts its pods through the Eviction API (the budget says how many may go at once; DaemonSet pods stay),\n" +
		"    stops the kubelet, removes cpu_manager_state, starts it, runs the trial, and uncordons")
	w, err := s.watchPool(ctx, blue)
	if err != nil {
		return err
	}
	defer w.stop()
	w.begin()
	if err := s.retarget(ctx, cm.Name); err != nil {
		return err
	}
	if err := s.rolloutStatus(ctx, false); err != nil {
		return err
	}
	if err := s.c.slow(ctx, "checking that "+names(blue)+" run the static policy and are uncordoned, and that every "+workloadName+" pod runs", func(ctx context.Context) error {
		for _, n := range blue {
			if _, err := n.WaitReport(ctx, waitTimeout, n.Name+" to be done with "+cm.Name, func(r framework.Report) bool {
				return framework.RefersTo(r.Status.LastKnownGood, cm) && r.Status.Phase == "" && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
			}); err != nil {
				return err
			}
			if err := framework.Eventually(ctx, waitTimeout, n.Name+" to run the static CPU manager", func(ctx context.Context) (bool, string, error) {
				running, err := s.cpuManager(ctx, n)
				if err != nil {
					return false, err.Error(), nil
				}
				return running.runs("static"), running.String(), nil
			}); err != nil {
				return err
			}
			if err := s.waitUncordoned(ctx, n); err != nil {
				return err
			}
		}
		var err error
		pods, err = s.waitRunning(ctx)
		return err
	}); err != nil {
		return err
	}
	w.stop()
	s.c.step("what a watch on the blue Nodes and on the %s pods saw meanwhile (seconds since the rollout was pointed at %s):", workloadNamespace, cm.Name)
	for _, line := range w.lines() {
		s.c.detail("%s", line)
	}
	if err := s.kubectl(ctx, "status"); err != nil {
		return err
	}
	for _, n := range blue {
		running, err := s.cpuManager(ctx, n)
		if err != nil {
			return err
		}
		s.c.detail("%s: %s", n.Name, running)
	}
	for _, n := range blue {
		s.c.detail("%s: schedulable again: uncordoned by its agent, which lifts only a cordon it set", n.Name)
	}
	s.c.step("under the static policy the Guaranteed container has a CPU of its own, and the others on its Node have lost it:")
	if err := s.showCPUs(ctx, blue, true); err != nil {
		return err
	}
	for _, p := range pods {
		s.c.detail("%s/%s: Running on %s", p.Namespace, p.Name, p.Spec.NodeName)
	}
	now, err := s.otherPods(ctx, blue)
	if err != nil {
		return err
	}
	for _, p := range others {
		if leaves, _ := drain.MustLeave(p); leaves {
			continue
		}
		if !slices.ContainsFunc(now, func(n *corev1.Pod) bool { return n.UID == p.UID }) {
			return fmt.Errorf("%s/%s on %s is gone: a drain leaves %s", p.Namespace, p.Name, p.Spec.NodeName, drainFate(p))
		}
		s.c.detail("%s/%s (%s): on %s throughout, never evicted", p.Namespace, p.Name, drainFate(p), p.Spec.NodeName)
	}
	return nil
}

// createWorkload creates the demonstration's namespace, Deployment and
// PodDisruptionBudget.
func (s *story) createWorkload(ctx context.Context) error {
	if _, err := s.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", workloadNamespace, err)
	}
	labels := map[string]string{"app": workloadName}
	honor := corev1.NodeInclusionPolicyHonor
	replicas := int32(workloadReplicas)
	spec := s.demoPodSpec(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}})
	spec.NodeSelector = map[string]string{contract.PoolLabel: "blue"}
	// One per Node that takes pods, so that each Node has one to evict: a
	// cordoned Node (its unschedulable taint honoured) does not count, so
	// the pods of a drained Node go to the other.
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: &honor,
	}}
	spec.AutomountServiceAccountToken, spec.TerminationGracePeriodSeconds = new(false), new(int64(1))
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNamespace, Name: workloadName},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := s.admin.AppsV1().Deployments(workloadNamespace).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", workloadNamespace, workloadName, err)
	}
	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNamespace, Name: workloadName},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := s.admin.PolicyV1().PodDisruptionBudgets(workloadNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating PodDisruptionBudget %s/%s: %w", workloadNamespace, workloadName, err)
	}
	return nil
}

// waitRunning waits until every replica of the two Deployments runs and no other
// pod of it is left (an evicted one terminating, a new one pending), and
// returns them by name.
func (s *story) waitRunning(ctx context.Context) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	// The pinned pod too: part 4 reads its CPUs next, and a pod not running
	// yet would be left out of that reading.
	want := workloadReplicas + 1
	err := framework.Eventually(ctx, waitTimeout, fmt.Sprintf("%d %s pods and the %s pod to run", workloadReplicas, workloadName, pinnedName), func(ctx context.Context) (bool, string, error) {
		list, err := s.admin.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("app in (%s,%s)", workloadName, pinnedName)})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = pods[:0]
		var states []string
		for i := range list.Items {
			p := &list.Items[i]
			states = append(states, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		return len(pods) == want && len(list.Items) == want, strings.Join(states, ", "), nil
	})
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, err
}

// otherPods are the pods on nodes that are not the workload's.
func (s *story) otherPods(ctx context.Context, nodes []*framework.Node) ([]*corev1.Pod, error) {
	var others []*corev1.Pod
	for _, n := range nodes {
		list, err := s.admin.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return nil, fmt.Errorf("listing the pods on %s: %w", n.Name, err)
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Namespace != workloadNamespace && p.DeletionTimestamp == nil {
				others = append(others, p)
			}
		}
	}
	return others, nil
}

// drainFate says what a drain does with a pod, by the agent's own rule
// (pkg/nodeagent/drain): DaemonSet, mirror and finished pods stay, the rest
// are evicted.
func drainFate(p *corev1.Pod) string {
	if leaves, why := drain.MustLeave(p); !leaves {
		return why
	}
	return "evicted like any pod"
}

// cpuManagerView is the CPU manager a node's kubelet runs, in the kubelet's
// own words: what its /configz serves, and the checkpoint it wrote under its
// root directory.
type cpuManagerView struct {
	policy, reserved string
	// statePolicy and defaultCPUSet are cpu_manager_state's; stateErr says
	// why it could not be read.
	statePolicy, defaultCPUSet string
	stateErr                   error
}

// runs reports whether the kubelet runs policy and its checkpoint was
// written for it.
func (v cpuManagerView) runs(policy string) bool {
	return strings.EqualFold(v.policy, policy) && strings.EqualFold(v.statePolicy, policy)
}

func (v cpuManagerView) String() string {
	words := "its /configz says cpuManagerPolicy: " + v.policy
	if v.reserved != "" {
		words += ", " + v.reserved
	}
	if v.stateErr != nil {
		return words + "; its cpu_manager_state: " + v.stateErr.Error()
	}
	words += "; its cpu_manager_state records policyName " + v.statePolicy
	if v.defaultCPUSet != "" {
		words += ", defaultCpuSet " + v.defaultCPUSet
	}
	return words
}

func (s *story) cpuManager(ctx context.Context, n *framework.Node) (cpuManagerView, error) {
	var v cpuManagerView
	configz, err := n.Configz(ctx)
	if err != nil {
		return v, err
	}
	kc, _ := configz["kubeletconfig"].(map[string]any)
	v.policy, _ = kc["cpuManagerPolicy"].(string)
	if cpus, _ := kc["reservedSystemCPUs"].(string); cpus != "" {
		v.reserved = fmt.Sprintf("reservedSystemCPUs: %q", cpus)
	} else if reserved, _ := kc["systemReserved"].(map[string]any); reserved["cpu"] != nil {
		v.reserved = fmt.Sprintf("systemReserved cpu: %v", reserved["cpu"])
	}
	st, err := n.CPUManagerState()
	if err != nil {
		// Missing, or caught half-written: a caller that waits asks again.
		v.stateErr = err
		return v, nil
	}
	v.statePolicy, v.defaultCPUSet = st.PolicyName, st.DefaultCPUSet
	return v, nil
}

// waitUncordoned waits until the Node takes pods again and its agent's
// cordon mark is gone.
func (s *story) waitUncordoned(ctx context.Context, n *framework.Node) error {
	return framework.Eventually(ctx, waitTimeout, n.Name+" to be uncordoned", func(ctx context.Context) (bool, string, error) {
		node, err := s.admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, marked := node.Annotations[contract.CordonedAnnotation]
		return !node.Spec.Unschedulable && !marked, fmt.Sprintf("unschedulable=%v, agent's mark=%v", node.Spec.Unschedulable, marked), nil
	})
}

// poolWatch records what an operator would see with `kubectl get nodes,pods
// --watch` on the pool and the workload: each Node's assignment, cordon,
// phase and KubeletConfigReady status, and the workload's pods leaving and
// running.
type poolWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	start  time.Time
	events []poolEvent
	// phase is each Node's last phase and pending pods, in words.
	phase map[string]string
	// running and leaving are the pods already recorded Running, and
	// leaving.
	running, leaving map[string]bool
}

type poolEvent struct {
	at            time.Duration
	subject, what string
}

// watchPool starts watching the nodes and the workload's pods, and returns
// once its caches hold them.
func (s *story) watchPool(ctx context.Context, nodes []*framework.Node) (*poolWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &poolWatch{cancel: cancel, done: make(chan struct{}), start: time.Now(),
		phase: map[string]string{}, running: map[string]bool{}, leaving: map[string]bool{}}
	inPool := map[string]bool{}
	for _, n := range nodes {
		inPool[n.Name] = true
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.admin, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = contract.PoolLabel + "=blue" }))
	podFactory := informers.NewSharedInformerFactoryWithOptions(s.admin, 0, informers.WithNamespace(workloadNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + workloadName }))
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	podInformer := podFactory.Core().V1().Pods().Informer()
	// Each handler's own registration says when it has seen the caches'
	// first lists.
	var nodesSeen, podsSeen cache.ResourceEventHandlerRegistration
	nodesSeen, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*corev1.Node); ok && inPool[node.Name] {
				w.node(nil, node)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.Node)
			if node, ok := newObj.(*corev1.Node); ok && old != nil && inPool[node.Name] {
				w.node(old, node)
			}
		},
	})
	if err == nil {
		podsSeen, err = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if pod, ok := obj.(*corev1.Pod); ok {
					w.pod(pod)
				}
			},
			UpdateFunc: func(_, newObj any) {
				if pod, ok := newObj.(*corev1.Pod); ok {
					w.pod(pod)
				}
			},
		})
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the blue Nodes and the %s pods: %w", workloadNamespace, err)
	}
	nodeFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		nodeFactory.Shutdown()
		podFactory.Shutdown()
		close(w.done)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), nodesSeen.HasSynced, podsSeen.HasSynced) {
		w.stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("watching the blue Nodes and the %s pods: the caches never synced", workloadNamespace)
	}
	return w, nil
}

// begin starts the clock and the record over: what the caches started with
// is not news.
func (w *poolWatch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start = time.Now()
	w.events = nil
}

// stop ends the watch; what it recorded stays.
func (w *poolWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *poolWatch) record(subject, format string, args ...any) {
	w.events = append(w.events, poolEvent{at: time.Since(w.start), subject: subject, what: fmt.Sprintf(format, args...)})
}

// node records what changed on a Node: its assignment, its cordon, the
// phase its agent reports, and its KubeletConfigReady status (a change of
// reason alone is left out: the phase says more).
func (w *poolWatch) node(old, node *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old == nil {
		w.phase[node.Name] = phaseWords(node)
		return
	}
	if source := node.Annotations[contract.ConfigSourceAnnotation]; source != old.Annotations[contract.ConfigSourceAnnotation] {
		w.record(node.Name, "assigned %s (%s, written by the rollout controller)", source, contract.ConfigSourceAnnotation)
	}
	if ready := kubeletConfigReady(node); ready != nil {
		if was := kubeletConfigReady(old); was == nil || was.Status != ready.Status {
			w.record(node.Name, "%s=%s (%s)", ready.Type, ready.Status, ready.Reason)
		}
	}
	if node.Spec.Unschedulable && !old.Spec.Unschedulable {
		by := ""
		if _, marked := node.Annotations[contract.CordonedAnnotation]; marked {
			by = " by its agent (" + contract.CordonedAnnotation + ")"
		}
		w.record(node.Name, "cordoned%s", by)
	}
	if phase := phaseWords(node); phase != w.phase[node.Name] {
		w.phase[node.Name] = phase
		w.record(node.Name, "%s", phase)
	}
	if !node.Spec.Unschedulable && old.Spec.Unschedulable {
		w.record(node.Name, "uncordoned")
	}
}

// phaseWords says where the Node's agent stands, as the PHASE and
// PENDING-PODS columns of kubectl nodeguard status do: its phase, and the
// pods a drain waits on.
func phaseWords(node *corev1.Node) string {
	var st contract.ConfigStatus
	_ = json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &st)
	if st.Phase == "" {
		return "phase <none>"
	}
	words := "phase " + st.Phase
	if len(st.PendingPods) > 0 {
		words += ", waiting on " + strings.Join(st.PendingPods, ", ")
	}
	return words
}

func kubeletConfigReady(node *corev1.Node) *corev1.NodeCondition {
	for i, c := range node.Status.Conditions {
		if c.Type == contract.ConditionKubeletConfigReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// pod records a workload pod leaving (evicted, or deleted), and a new one
// running.
func (w *poolWatch) pod(pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := pod.Namespace + "/" + pod.Name
	switch {
	case pod.DeletionTimestamp != nil && !w.leaving[name]:
		w.leaving[name] = true
		how := "deleted"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				how = "evicted (" + c.Reason + ")"
			}
		}
		w.record(name, "%s from %s", how, pod.Spec.NodeName)
	case pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && !w.running[name]:
		w.running[name] = true
		w.record(name, "Running on %s", pod.Spec.NodeName)
	}
}

// lines are the recorded events, one a line, in order.
func (w *poolWatch) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	width := 0
	for _, e := range w.events {
		width = max(width, len(e.subject))
	}
	var out []string
	for _, e := range w.events {
		out = append(out, fmt.Sprintf("%5.1fs  %-*s  %s", e.at.Seconds(), width, e.subject, e.what))
	}
	return out
}
