package manifests

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The rollout controller's workload and identity, as manifests/base names
// them.
const (
	rolloutControllerName      = "nodeguard-rollout-controller"
	rolloutControllerContainer = "rollout-controller"
	rolloutControllerComponent = "rollout-controller"
	// rolloutControllerEvents is the Role (and RoleBinding) for Events,
	// which for cluster-scoped objects live in the default namespace.
	rolloutControllerEvents = "nodeguard-rollout-controller-events"
)

func isRolloutController(labels map[string]string) bool {
	return labels["app.kubernetes.io/component"] == rolloutControllerComponent
}

// isRolloutControllerEventsGrant is the one nodeguard object outside its
// namespace: the controller's Events Role and its binding in default.
func isRolloutControllerEventsGrant(obj *unstructured.Unstructured) bool {
	return (obj.GetKind() == "Role" || obj.GetKind() == "RoleBinding") && obj.GetName() == rolloutControllerEvents &&
		obj.GetNamespace() == "default" && isRolloutController(obj.GetLabels())
}

// rolloutControllerGrants are all the controller may do, one line per
// (role, API group, resource, resource name, verb).
var rolloutControllerGrants = []string{
	"ClusterRole nodeguard-rollout-controller: nodeguard.dev/kubeletconfigrollouts get",
	"ClusterRole nodeguard-rollout-controller: nodeguard.dev/kubeletconfigrollouts list",
	"ClusterRole nodeguard-rollout-controller: nodeguard.dev/kubeletconfigrollouts watch",
	"ClusterRole nodeguard-rollout-controller: nodeguard.dev/kubeletconfigrollouts/status update",
	"ClusterRole nodeguard-rollout-controller: /nodes get",
	"ClusterRole nodeguard-rollout-controller: /nodes list",
	"ClusterRole nodeguard-rollout-controller: /nodes watch",
	"ClusterRole nodeguard-rollout-controller: /nodes patch",
	"ClusterRole nodeguard-rollout-controller: /configmaps get",
	"ClusterRole nodeguard-rollout-controller: /configmaps list",
	"ClusterRole nodeguard-rollout-controller: /configmaps watch",
	"ClusterRole nodeguard-rollout-controller: /pods list",
	"ClusterRole nodeguard-rollout-controller: /pods watch",
	"Role nodeguard/nodeguard-rollout-controller-leader-election: coordination.k8s.io/leases create",
	"Role nodeguard/nodeguard-rollout-controller-leader-election: coordination.k8s.io/leases[nodeguard-rollout-controller] get",
	"Role nodeguard/nodeguard-rollout-controller-leader-election: coordination.k8s.io/leases[nodeguard-rollout-controller] update",
	"Role default/nodeguard-rollout-controller-events: events.k8s.io/events create",
	"Role default/nodeguard-rollout-controller-events: events.k8s.io/events patch",
}

// grants spells out a rule as rolloutControllerGrants lines.
func grants(role string, rule rbacv1.PolicyRule) []string {
	var out []string
	names := rule.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	for _, group := range rule.APIGroups {
		for _, resource := range rule.Resources {
			for _, name := range names {
				what := group + "/" + resource
				if name != "" {
					what += "[" + name + "]"
				}
				for _, verb := range rule.Verbs {
					out = append(out, fmt.Sprintf("%s: %s %s", role, what, verb))
				}
			}
		}
	}
	return out
}

// checkRolloutControllerRBAC: the controller's roles grant exactly
// rolloutControllerGrants, and are bound to its ServiceAccount only, which
// its Deployment runs as.
func checkRolloutControllerRBAC(o objects) error {
	var errs []error
	var got []string
	for _, obj := range append(o.ofKind("ClusterRole"), o.ofKind("Role")...) {
		if !isRolloutController(obj.GetLabels()) {
			continue
		}
		rules, err := roleRules(o, obj.GetKind(), obj.GetName())
		if err != nil {
			return err
		}
		role := obj.GetKind() + " " + obj.GetName()
		if obj.GetNamespace() != "" {
			role = obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
		}
		for i, rule := range rules {
			if len(rule.NonResourceURLs) > 0 {
				errs = append(errs, fmt.Errorf("%s rules[%d]: non-resource URLs", role, i))
			}
			got = append(got, grants(role, rule)...)
		}
	}
	for _, g := range got {
		if !slices.Contains(rolloutControllerGrants, g) {
			errs = append(errs, fmt.Errorf("the rollout controller may %q, more than it needs", g))
		}
	}
	for _, want := range rolloutControllerGrants {
		if !slices.Contains(got, want) {
			errs = append(errs, fmt.Errorf("the rollout controller may not %q, which it needs", want))
		}
	}
	deploy, _, err := rolloutControllerDeployment(o)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if sa != rolloutControllerName {
		errs = append(errs, fmt.Errorf("the rollout controller runs as %q, want %s", sa, rolloutControllerName))
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, obj := range o.ofKind(kind) {
			if !isRolloutController(obj.GetLabels()) {
				continue
			}
			var subjects []rbacv1.Subject
			if kind == "ClusterRoleBinding" {
				b, err := typed[rbacv1.ClusterRoleBinding](o, kind, obj.GetName())
				if err != nil {
					return err
				}
				subjects = b.Subjects
			} else {
				b, err := typedIn[rbacv1.RoleBinding](o, kind, obj.GetNamespace(), obj.GetName())
				if err != nil {
					return err
				}
				subjects = b.Subjects
			}
			if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != rolloutControllerName || subjects[0].Namespace != deploy.Namespace {
				errs = append(errs, fmt.Errorf("%s %s binds %v, want only the controller's ServiceAccount %s/%s", kind, obj.GetName(), subjects, deploy.Namespace, rolloutControllerName))
			}
		}
	}
	return errors.Join(errs...)
}

// typedIn is typed for a name that may repeat across namespaces.
func typedIn[T any](o objects, kind, namespace, name string) (*T, error) {
	var in objects
	for _, obj := range o.ofKind(kind) {
		if obj.GetNamespace() == namespace {
			in = append(in, obj)
		}
	}
	return typed[T](in, kind, name)
}

func rolloutControllerDeployment(o objects) (*appsv1.Deployment, *corev1.Container, error) {
	deploy, err := typed[appsv1.Deployment](o, "Deployment", rolloutControllerName)
	if err != nil {
		return nil, nil, err
	}
	c := container(&deploy.Spec.Template.Spec, rolloutControllerContainer)
	if c == nil {
		return nil, nil, fmt.Errorf("Deployment %s has no container %s", rolloutControllerName, rolloutControllerContainer)
	}
	return deploy, c, nil
}

// checkRolloutControllerPolicy: the ValidatingAdmissionPolicy that confines
// the controller's token to its own nodeguard.dev/ annotations
// (checkControllerWritable) judges every Node write (nodes and
// nodes/status) of the ServiceAccount its Deployment runs as, fails
// closed, and is bound to deny. TestRolloutControllerTokenIsConfined shows
// what it refuses on a real apiserver.
func checkRolloutControllerPolicy(o objects) error {
	policy, err := typed[admissionregistrationv1.ValidatingAdmissionPolicy](o, "ValidatingAdmissionPolicy", rolloutControllerPolicy)
	if err != nil {
		return err
	}
	deploy, _, err := rolloutControllerDeployment(o)
	if err != nil {
		return err
	}
	var errs []error
	if err := checkControllerWritable(policy); err != nil {
		errs = append(errs, err)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		errs = append(errs, errors.New("failurePolicy: want Fail, or an expression that cannot be evaluated lets the write through"))
	}
	covered := map[string]bool{}
	if mc := policy.Spec.MatchConstraints; mc != nil {
		for _, rule := range mc.ResourceRules {
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Operations, admissionregistrationv1.Update) {
				for _, r := range rule.Resources {
					covered[r] = true
				}
			}
		}
	}
	for _, r := range []string{nodesResource, nodesStatus} {
		if !covered[r] {
			errs = append(errs, fmt.Errorf("UPDATE of %s is not judged", r))
		}
	}
	user := "'system:serviceaccount:" + deploy.Namespace + ":" + deploy.Spec.Template.Spec.ServiceAccountName + "'"
	if !slices.ContainsFunc(policy.Spec.MatchConditions, func(c admissionregistrationv1.MatchCondition) bool {
		return strings.Contains(c.Expression, "request.userInfo.username == "+user)
	}) {
		errs = append(errs, fmt.Errorf("no matchCondition selects the controller's user %s", user))
	}
	bound := false
	for _, obj := range o.ofKind("ValidatingAdmissionPolicyBinding") {
		b, err := typed[admissionregistrationv1.ValidatingAdmissionPolicyBinding](o, obj.GetKind(), obj.GetName())
		if err != nil {
			return err
		}
		if b.Spec.PolicyName == policy.Name && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) && b.Spec.ParamRef == nil && b.Spec.MatchResources == nil {
			bound = true
		}
	}
	if !bound {
		errs = append(errs, fmt.Errorf("no binding makes %s deny", policy.Name))
	}
	return errors.Join(errs...)
}

// checkRolloutControllerWorkload: two leader-elected replicas under the
// restricted Pod Security profile, with flags the binary knows, probes on
// its health endpoints, and its symbolic image.
func checkRolloutControllerWorkload(t *testing.T, o objects) error {
	deploy, c, err := rolloutControllerDeployment(o)
	if err != nil {
		return err
	}
	var errs []error
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas < 2 {
		errs = append(errs, errors.New("fewer than two replicas: a failed leader would stop every rollout until it is rescheduled"))
	}
	args, err := checkArgsAreFlags(t, "rollout-controller", c.Args)
	if err != nil {
		errs = append(errs, err)
	} else if args["leader-elect"] != "true" {
		errs = append(errs, fmt.Errorf("--leader-elect=%q with several replicas: both would decide", args["leader-elect"]))
	}
	pod := deploy.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		errs = append(errs, errors.New("the pod may run as root"))
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errs = append(errs, errors.New("no RuntimeDefault seccomp profile"))
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		errs = append(errs, errors.New("shares a host namespace"))
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		errs = append(errs, errors.New("the container has no securityContext"))
	default:
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			errs = append(errs, errors.New("writable root filesystem"))
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			errs = append(errs, errors.New("privilege escalation allowed"))
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			errs = append(errs, errors.New("capabilities: want drop [ALL] and nothing added"))
		}
	}
	for what, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/livez"}[what]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			errs = append(errs, fmt.Errorf("no %s probe on %s", what, want))
		}
	}
	if c.Image != rolloutControllerImage {
		errs = append(errs, fmt.Errorf("image %s: want the symbolic %s, which an images component sets", c.Image, rolloutControllerImage))
	}
	return errors.Join(errs...)
}

// rolloutControllerInvariants are added to invariants().
func rolloutControllerInvariants() []invariant {
	editRole := func(t *testing.T, o objects, mutate func(*rbacv1.ClusterRole)) {
		edit(t, o, "ClusterRole", rolloutControllerName, mutate)
	}
	editController := func(t *testing.T, o objects, mutate func(*appsv1.Deployment, *corev1.Container)) {
		edit(t, o, "Deployment", rolloutControllerName, func(d *appsv1.Deployment) {
			mutate(d, container(&d.Spec.Template.Spec, rolloutControllerContainer))
		})
	}
	return []invariant{
		{
			name:  "the rollout controller may do exactly what it needs",
			check: plain(checkRolloutControllerRBAC),
			breaks: []breakage{
				{name: "delete nodes", apply: func(t *testing.T, o objects) {
					editRole(t, o, func(r *rbacv1.ClusterRole) { r.Rules[2].Verbs = append(r.Rules[2].Verbs, "delete") })
				}},
				{name: "update nodes instead of patch", apply: func(t *testing.T, o objects) {
					editRole(t, o, func(r *rbacv1.ClusterRole) { r.Rules[2].Verbs = []string{"list", "watch", "update"} })
				}},
				{name: "cannot write status", apply: func(t *testing.T, o objects) {
					editRole(t, o, func(r *rbacv1.ClusterRole) { r.Rules = slices.Delete(r.Rules, 1, 2) })
				}},
				{name: "secrets", apply: func(t *testing.T, o objects) {
					editRole(t, o, func(r *rbacv1.ClusterRole) { r.Rules[3].Resources = append(r.Rules[3].Resources, "secrets") })
				}},
				{name: "any lease", apply: func(t *testing.T, o objects) {
					edit(t, o, "Role", "nodeguard-rollout-controller-leader-election", func(r *rbacv1.Role) { r.Rules[1].ResourceNames = nil })
				}},
				{name: "bound to the default account", apply: func(t *testing.T, o objects) {
					edit(t, o, "ClusterRoleBinding", rolloutControllerName, func(b *rbacv1.ClusterRoleBinding) { b.Subjects[0].Name = "default" })
				}},
				{name: "runs as the webhook", apply: func(t *testing.T, o objects) {
					editController(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Template.Spec.ServiceAccountName = webhookName })
				}},
			},
		},
		{
			name:  "the rollout controller's token changes only its own nodeguard.dev/ annotations on Nodes",
			check: plain(checkRolloutControllerPolicy),
			breaks: []breakage{
				{name: "the drain mode not writable", apply: func(t *testing.T, o objects) {
					editWritable(t, o, func(e string) string { return strings.Replace(e, ", 'nodeguard.dev/drain'", "", 1) })
				}},
				{name: "the agent's cordon mark writable", apply: func(t *testing.T, o objects) {
					editWritable(t, o, func(e string) string { return strings.Replace(e, "]", ", 'nodeguard.dev/cordoned']", 1) })
				}},
				{name: "any nodeguard.dev/ annotation writable", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
						for i := range p.Spec.Validations {
							p.Spec.Validations[i].Expression = strings.ReplaceAll(p.Spec.Validations[i].Expression, "k in variables.writable", "k.startsWith('nodeguard.dev/')")
						}
					})
				}},
				{name: "no policy", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Name = "other" })
				}},
				{name: "warns only", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicyBinding", rolloutControllerPolicy, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
						b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
					})
				}},
				{name: "fails open", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
						p.Spec.FailurePolicy = ptr(admissionregistrationv1.Ignore)
					})
				}},
				{name: "nodes/status not judged", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
						p.Spec.MatchConstraints.ResourceRules[0].Resources = []string{nodesResource}
					})
				}},
				{name: "another account", apply: func(t *testing.T, o objects) {
					edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
						p.Spec.MatchConditions[0].Expression = "request.userInfo.username == 'system:serviceaccount:nodeguard:nodeguard-webhook'"
					})
				}},
				{name: "the controller runs as another account", apply: func(t *testing.T, o objects) {
					editController(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Template.Spec.ServiceAccountName = "other" })
				}},
			},
		},
		{
			name:  "the rollout controller runs leader-elected and restricted",
			check: checkRolloutControllerWorkload,
			breaks: []breakage{
				{name: "one replica", apply: func(t *testing.T, o objects) {
					editController(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Replicas = ptr[int32](1) })
				}},
				{name: "no leader election", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setArg(c, "leader-elect", "false") })
				}},
				{name: "an unknown flag", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setArg(c, "lease-name", "x") })
				}},
				{name: "writable root filesystem", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.ReadOnlyRootFilesystem = ptr(false) })
				}},
				{name: "capabilities kept", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.Capabilities = nil })
				}},
				{name: "no seccomp profile", apply: func(t *testing.T, o objects) {
					editController(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						d.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
					})
				}},
				{name: "may run as root", apply: func(t *testing.T, o objects) {
					editController(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
					})
				}},
				{name: "an image from a registry", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						c.Image = "docker.io/someone/rollout-controller:latest"
					})
				}},
				{name: "the webhook's image", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.Image = webhookImage })
				}},
				{name: "readiness on /healthz", apply: func(t *testing.T, o objects) {
					editController(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.ReadinessProbe.HTTPGet.Path = "/healthz" })
				}},
			},
		},
	}
}
