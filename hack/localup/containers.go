package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The --runtime values: what the nodes' kubelets run pods on.
const (
	runtimeAuto       = "auto"
	runtimeContainerd = string(framework.RuntimeContainerd)
	runtimeFake       = string(framework.RuntimeFake)
)

// pinnedName is part 4's Guaranteed Deployment: one pod asking a whole
// CPU, which the static policy gives it for itself.
const pinnedName = "pinned"

func validateRuntime(runtime string) error {
	switch runtime {
	case runtimeAuto, runtimeContainerd, runtimeFake:
		return nil
	}
	return fmt.Errorf("--runtime %q: want %s, %s or %s", runtime, runtimeAuto, runtimeContainerd, runtimeFake)
}

// chooseRuntime settles what the nodes run pods on, and says so: real
// containers (containerd and runc, each node its own, in its own cgroup)
// when asked or, with auto, when the machine allows them; the kubelet's
// fake runtime otherwise.
func (s *story) chooseRuntime(ctx context.Context, dir string) error {
	if s.opts.runtime == runtimeFake {
		s.runtime = framework.RuntimeFake
		s.c.detail("the nodes run the kubelet's fake container runtime (--runtime=%s): pods go Running and nothing executes", runtimeFake)
		return nil
	}
	err := s.c.slow(ctx, "building the image of test/workload, the pause and workload containers of the real-container nodes (no registry: it is\n"+
		"    imported into each node's containerd)", func(ctx context.Context) error {
		var err error
		s.binaries.Containers, err = framework.BuildContainerBinaries(ctx, filepath.Join(dir, "bin"))
		return err
	})
	switch {
	case err == nil:
		s.runtime = framework.RuntimeContainerd
		s.c.detail("the nodes run real containers: each its own containerd and runc, state and cgroup (%s<node>-...); pods are processes", framework.NodeCgroupPrefix)
		return nil
	case ctx.Err() != nil || s.opts.runtime == runtimeContainerd:
		return err
	}
	s.runtime = framework.RuntimeFake
	s.c.detail("this machine runs no real containers (%v):\n"+
		"    the nodes run the kubelet's fake container runtime instead (fakecri): pods go Running, nothing executes, no cgroup is made,\n"+
		"    and part 4 shows the CPU manager's checkpoint where it would show the containers' cpusets", err)
	return nil
}

// realContainers reports whether the nodes run real containers.
func (s *story) realContainers() bool { return s.runtime == framework.RuntimeContainerd }

// demoPodSpec is the spec of part 4's pods, one container "app" asking
// for resources: a pause container on the fake runtime; on real
// containers test/workload's image, on the host's network (the nodes have
// no pod network).
func (s *story) demoPodSpec(resources corev1.ResourceRequirements) corev1.PodSpec {
	if !s.realContainers() {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: resources}}}
	}
	container := framework.WorkloadContainer("app")
	container.Resources = resources
	return framework.WorkloadPodSpec(container)
}

// createPinned creates part 4's Guaranteed Deployment on the blue pool:
// one pod asking a whole CPU and 64Mi, requests equal to limits.
func (s *story) createPinned(ctx context.Context) error {
	labels := map[string]string{"app": pinnedName}
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	spec := s.demoPodSpec(corev1.ResourceRequirements{Requests: list, Limits: list})
	spec.NodeSelector = map[string]string{contract.PoolLabel: "blue"}
	spec.AutomountServiceAccountToken, spec.TerminationGracePeriodSeconds = new(false), new(int64(1))
	one := int32(1)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNamespace, Name: pinnedName},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if _, err := s.admin.AppsV1().Deployments(workloadNamespace).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", workloadNamespace, pinnedName, err)
	}
	return nil
}

// showCPUs shows, for each running pod of part 4 on the blue pool, the CPUs
// its container may run on: on real containers, its cgroup's cpuset.cpus
// and the kernel's affinity of its process; on the fake runtime, what
// cpu_manager_state records (nothing runs there). Before the static policy
// every container must be on every CPU; with pinnedToItsOwn, each on what
// its node's checkpoint says: the pinned one on its own CPU, the others on
// the shared pool.
func (s *story) showCPUs(ctx context.Context, blue []*framework.Node, pinnedToItsOwn bool) error {
	return s.c.slow(ctx, "reading where each container of "+workloadNamespace+" may run", func(ctx context.Context) error {
		all, err := framework.Cgroup{Path: "/"}.CPUs()
		if err != nil && s.realContainers() {
			return err
		}
		for _, app := range []string{pinnedName, workloadName} {
			list, err := s.admin.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return err
			}
			for i := range list.Items {
				p := &list.Items[i]
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				n := s.nodeNamed(blue, p.Spec.NodeName)
				if n == nil {
					continue
				}
				line, err := s.podCPUs(ctx, n, p, all, pinnedToItsOwn)
				if err != nil {
					return err
				}
				s.c.detail("%s/%s on %s: %s", p.Namespace, p.Name, n.Name, line)
			}
		}
		return nil
	})
}

// podCPUs describes, and with pinnedToItsOwn checks, the CPUs of p's
// container on n.
func (s *story) podCPUs(ctx context.Context, n *framework.Node, p *corev1.Pod, all cpuset.CPUSet, pinnedToItsOwn bool) (string, error) {
	st, err := n.CPUManagerState()
	if err != nil {
		return "", err
	}
	exclusive := ""
	for uid, containers := range st.Entries {
		if uid == string(p.UID) {
			exclusive = containers["app"]
		}
	}
	record := "cpu_manager_state gives it no CPU of its own (policy " + st.PolicyName + ", shared pool " + orAll(st.DefaultCPUSet) + ")"
	if exclusive != "" {
		record = "cpu_manager_state gives it CPU " + exclusive + " for itself"
	}
	if !s.realContainers() {
		return record + " (the fake runtime runs nothing: no cgroup to read)", nil
	}
	var words string
	err = framework.Eventually(ctx, waitTimeout, "the cpuset of "+p.Name, func(context.Context) (bool, string, error) {
		cg, err := n.ContainerCgroup(p, "app")
		if err != nil {
			return false, err.Error(), nil
		}
		cpus, err := cg.CPUs()
		if err != nil {
			return false, err.Error(), nil
		}
		pids, err := cg.PIDs()
		if err != nil || len(pids) == 0 {
			return false, fmt.Sprintf("no process in %s yet (%v)", cg.Path, err), nil
		}
		affinity, err := framework.ProcessCPUs(pids[0])
		if err != nil {
			return false, err.Error(), nil
		}
		words = fmt.Sprintf("its container's cgroup has cpuset.cpus %s, and the kernel lets its process (pid %d) run on CPUs %s; %s", cpus, pids[0], affinity, record)
		want := all
		if pinnedToItsOwn {
			// The static policy: the pinned container on its own CPU,
			// the others on that node on the shared pool.
			if def, err := cpuset.Parse(st.DefaultCPUSet); err == nil && st.DefaultCPUSet != "" {
				want = def
			}
			if exclusive != "" {
				want, _ = cpuset.Parse(exclusive)
			}
		}
		return cpus.Equals(want) && affinity.Equals(want), words, nil
	})
	return words, err
}

func orAll(set string) string {
	if set == "" {
		return "all CPUs"
	}
	return set
}

func (s *story) nodeNamed(nodes []*framework.Node, name string) *framework.Node {
	i := slices.IndexFunc(nodes, func(n *framework.Node) bool { return n.Name == name })
	if i < 0 {
		return nil
	}
	return nodes[i]
}

// runtimeWords names what the nodes run pods on, for the story's text.
func (s *story) runtimeWords() string {
	if s.realContainers() {
		return "real containers (its own containerd and runc)"
	}
	return "the kubelet's own fake container runtime"
}

// idleWords says why the shipped workloads placed on the nodes do no work
// here.
func (s *story) idleWords() string {
	if s.realContainers() {
		return strings.Join([]string{"not running: their images are not on the nodes and no registry is reached, and the webhook's and",
			"the rollout controller's want a pod network the nodes do not have; the webhook, the rollout controller and the agents at work",
			"here are processes"}, "\n")
	}
	return "idle on the fake runtime: the webhook, the rollout\ncontroller and the agents at work here are processes"
}
