package manifests

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func checkPriorityClasses(o objects) error {
	deploy, _, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	ds, _, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	var errs []error
	if got := deploy.Spec.Template.Spec.PriorityClassName; got != "system-cluster-critical" {
		errs = append(errs, fmt.Errorf("webhook priorityClassName %q: want system-cluster-critical", got))
	}
	if got := ds.Spec.Template.Spec.PriorityClassName; got != "system-node-critical" {
		errs = append(errs, fmt.Errorf("agent priorityClassName %q: want system-node-critical", got))
	}
	return errors.Join(errs...)
}

// checkResources: requests so the scheduler reserves room, and a memory
// limit so a leak cannot take the node down; the webhook, on the path of
// every node request, also has a CPU limit.
func checkResources(o objects) error {
	_, webhook, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	ds, agent, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	type want struct {
		c                *corev1.Container
		requests, limits []corev1.ResourceName
	}
	checks := []want{
		{webhook, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}},
		{agent, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, []corev1.ResourceName{corev1.ResourceMemory}},
	}
	for i := range ds.Spec.Template.Spec.InitContainers {
		checks = append(checks, want{&ds.Spec.Template.Spec.InitContainers[i], []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, []corev1.ResourceName{corev1.ResourceMemory}})
	}
	var errs []error
	for _, w := range checks {
		for _, name := range w.requests {
			if q, ok := w.c.Resources.Requests[name]; !ok || q.IsZero() {
				errs = append(errs, fmt.Errorf("container %s: no %s request", w.c.Name, name))
			}
		}
		for _, name := range w.limits {
			limit, ok := w.c.Resources.Limits[name]
			if !ok || limit.IsZero() {
				errs = append(errs, fmt.Errorf("container %s: no %s limit", w.c.Name, name))
				continue
			}
			if request := w.c.Resources.Requests[name]; limit.Cmp(request) < 0 {
				errs = append(errs, fmt.Errorf("container %s: %s limit %s below its request %s", w.c.Name, name, limit.String(), request.String()))
			}
		}
	}
	return errors.Join(errs...)
}

// readVerbs are all the webhook may do: its informers list and watch.
var readVerbs = []string{"get", "list", "watch"}

// checkRBAC: nodeguard's roles read, never write, and never touch Secrets;
// the webhook runs as the account they are bound to. The rollout
// controller's roles, which must write, are held to exactly what it needs
// instead (checkRolloutControllerRBAC).
func checkRBAC(o objects) error {
	var errs []error
	roles := append(o.ofKind("ClusterRole"), o.ofKind("Role")...)
	if len(roles) == 0 {
		return errors.New("no roles")
	}
	for _, obj := range roles {
		if isRolloutController(obj.GetLabels()) {
			continue
		}
		rules, err := roleRules(o, obj.GetKind(), obj.GetName())
		if err != nil {
			return err
		}
		for i, rule := range rules {
			for _, verb := range rule.Verbs {
				if !slices.Contains(readVerbs, verb) && !asksTheAuthorizers(rule, verb) {
					errs = append(errs, fmt.Errorf("%s %s rules[%d]: verb %q, want only %v", obj.GetKind(), obj.GetName(), i, verb, readVerbs))
				}
			}
			for _, resource := range rule.Resources {
				base, _, _ := strings.Cut(resource, "/")
				if base == "secrets" || base == "*" {
					errs = append(errs, fmt.Errorf("%s %s rules[%d]: resource %q", obj.GetKind(), obj.GetName(), i, resource))
				}
			}
			if slices.Contains(rule.APIGroups, "*") || len(rule.NonResourceURLs) > 0 {
				errs = append(errs, fmt.Errorf("%s %s rules[%d]: want named API groups and no non-resource URLs", obj.GetKind(), obj.GetName(), i))
			}
		}
	}
	deploy, _, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	binding, err := typed[rbacv1.ClusterRoleBinding](o, "ClusterRoleBinding", webhookName)
	if err != nil {
		return err
	}
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa || binding.Subjects[0].Namespace != deploy.Namespace {
		errs = append(errs, fmt.Errorf("ClusterRoleBinding %s binds %v, want only the webhook's ServiceAccount %s/%s", binding.Name, binding.Subjects, deploy.Namespace, sa))
	}
	return errors.Join(errs...)
}

// asksTheAuthorizers is the one write the standalone component grants the
// webhook: creating SubjectAccessReviews, which stores nothing and only asks
// the apiserver's authorizers what NodeRestriction asks its own (whether a
// node may request a token audience or a pod certificate signer).
func asksTheAuthorizers(rule rbacv1.PolicyRule, verb string) bool {
	return verb == "create" && slices.Equal(rule.APIGroups, []string{"authorization.k8s.io"}) &&
		slices.Equal(rule.Resources, []string{"subjectaccessreviews"})
}

func roleRules(o objects, kind, name string) ([]rbacv1.PolicyRule, error) {
	if kind == "Role" {
		role, err := typed[rbacv1.Role](o, kind, name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	}
	role, err := typed[rbacv1.ClusterRole](o, kind, name)
	if err != nil {
		return nil, err
	}
	if role.AggregationRule != nil {
		return nil, fmt.Errorf("ClusterRole %s aggregates other roles, whose rules this test cannot see", name)
	}
	return role.Rules, nil
}

// checkAgent: the agent runs on every node, as that node, with the kubelet's
// files where its flags say they are.
func checkAgent(t *testing.T, o objects) error {
	ds, c, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	pod := ds.Spec.Template.Spec
	var errs []error
	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		errs = append(errs, errors.New("no toleration of every taint (operator Exists, no key, no effect)"))
	}
	if !pod.HostNetwork {
		errs = append(errs, errors.New("not on the host network: the kubelet's healthz is on the node's 127.0.0.1"))
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		errs = append(errs, errors.New("mounts a service account token; the agent uses the kubelet's credentials"))
	}
	args, err := checkArgsAreFlags(t, "agent", c.Args)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if args["node-name"] != "$(NODE_NAME)" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		errs = append(errs, fmt.Errorf("--node-name=%s: want $(NODE_NAME) from fieldRef spec.nodeName", args["node-name"]))
	}
	hostPaths := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath
		}
	}
	// Each path flag must be visible in the container at the same path as
	// on the host, writable where the agent writes.
	// The agent seeds --local-config-file when it is missing.
	for flag, writable := range map[string]bool{"kubeconfig": false, "state-dir": true, "kubelet-config-file": true, "local-config-file": true} {
		value, ok := args[flag]
		if !ok {
			errs = append(errs, fmt.Errorf("--%s is not set", flag))
			continue
		}
		if err := checkHostMount(c, hostPaths, value, writable); err != nil {
			errs = append(errs, fmt.Errorf("--%s=%s: %w", flag, value, err))
		}
	}
	return errors.Join(errs...)
}

// checkHostMount finds the deepest mount holding file and checks that it is
// the same host path, read-only unless writable is wanted.
func checkHostMount(c *corev1.Container, hostPaths map[string]*corev1.HostPathVolumeSource, file string, writable bool) error {
	best := deepestMount(c, file)
	if best == nil {
		return errors.New("not under any mount")
	}
	hp, ok := hostPaths[best.Name]
	if !ok {
		return fmt.Errorf("mount %s is not a hostPath", best.Name)
	}
	if hp.Path != best.MountPath {
		return fmt.Errorf("mount %s shows host path %s at %s; the agent and the kubelet must agree on paths", best.Name, hp.Path, best.MountPath)
	}
	if writable == best.ReadOnly {
		return fmt.Errorf("mount %s: readOnly %v, want %v", best.Name, best.ReadOnly, !writable)
	}
	return nil
}

// deepestMount is the mount that shows file in the container, or nil.
func deepestMount(c *corev1.Container, file string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if (file == m.MountPath || strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	return best
}

// checkNamespaced: every namespaced object is in nodeguard's namespace,
// except the agent's, which are in the agent's; the rendering creates both.
func checkNamespaced(o objects) error {
	var errs []error
	for _, ns := range []string{namespace, agentNamespace} {
		if _, err := o.get("Namespace", ns); err != nil {
			errs = append(errs, err)
		}
	}
	clusterScoped := []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "CustomResourceDefinition",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	for _, obj := range o {
		if isRolloutControllerEventsGrant(obj) {
			continue
		}
		want := namespace
		if slices.Contains(clusterScoped, obj.GetKind()) {
			want = ""
		} else if isAgent(obj.GetLabels()) {
			want = agentNamespace
		}
		if obj.GetNamespace() != want {
			errs = append(errs, fmt.Errorf("%s %s in namespace %q, want %q", obj.GetKind(), obj.GetName(), obj.GetNamespace(), want))
		}
	}
	return errors.Join(errs...)
}

func isAgent(labels map[string]string) bool {
	return labels["app.kubernetes.io/component"] == "agent"
}
