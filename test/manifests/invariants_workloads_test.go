package manifests

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// workloadInvariants are about the webhook's and the agent's pods, the
// objects around them, and RBAC.
func workloadInvariants() []invariant {
	return []invariant{
		{
			name:  "the webhook runs non-root with a read-only root filesystem",
			check: plain(checkWebhookHardened),
			breaks: []breakage{
				{name: "may run as root", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, c *corev1.Container) {
						d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
						d.Spec.Template.Spec.SecurityContext.RunAsUser = nil
					})
				}},
				{name: "writable root filesystem", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.ReadOnlyRootFilesystem = ptr(false) })
				}},
				{name: "privilege escalation", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = nil })
				}},
				{name: "capabilities kept", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.Capabilities = nil })
				}},
				{name: "no seccomp profile", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						d.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
					})
				}},
				{name: "host network", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Template.Spec.HostNetwork = true })
				}},
			},
		},
		{
			name:  "the webhook is probed on /readyz and /livez over HTTPS",
			check: plain(checkWebhookProbes),
			breaks: []breakage{
				{name: "readiness on /healthz", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.ReadinessProbe.HTTPGet.Path = "/healthz" })
				}},
				{name: "readiness over HTTP", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						c.ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
					})
				}},
				{name: "readiness on an undeclared port", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						c.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9443)
					})
				}},
				{name: "no liveness probe", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.LivenessProbe = nil })
				}},
			},
		},
		{
			name:  "the webhook's collector runs less often than Go's default, without a soft memory limit",
			check: plain(checkWebhookGC),
			breaks: []breakage{
				{name: "GOGC left to Go's default", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setEnv(c, "GOGC", "") })
				}},
				{name: "GOGC below the default", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setEnv(c, "GOGC", "50") })
				}},
				{name: "a GOMEMLIMIT", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setEnv(c, "GOMEMLIMIT", "400MiB") })
				}},
			},
		},
		{
			name:  "two webhook replicas on different nodes",
			check: plain(checkWebhookReplicas),
			breaks: []breakage{
				{name: "one replica", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Replicas = ptr[int32](1) })
				}},
				{name: "no spreading", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Template.Spec.TopologySpreadConstraints = nil })
				}},
				{name: "spreading by zone only", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						d.Spec.Template.Spec.TopologySpreadConstraints = d.Spec.Template.Spec.TopologySpreadConstraints[1:]
					})
				}},
			},
		},
		{
			name:  "a PodDisruptionBudget keeps one webhook pod",
			check: plain(checkWebhookPDB),
			breaks: []breakage{
				{name: "minAvailable 0", apply: func(t *testing.T, o objects) {
					edit(t, o, "PodDisruptionBudget", webhookName, func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromInt32(0)) })
				}},
				{name: "selects the agent", apply: func(t *testing.T, o objects) {
					edit(t, o, "PodDisruptionBudget", webhookName, func(p *policyv1.PodDisruptionBudget) {
						p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "agent"}}
					})
				}},
				{name: "selects every nodeguard pod", apply: func(t *testing.T, o objects) {
					edit(t, o, "PodDisruptionBudget", webhookName, func(p *policyv1.PodDisruptionBudget) {
						p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "nodeguard"}}
					})
				}},
			},
		},
		{
			name:  "the Service selects the webhook's pods and targets their HTTPS port",
			check: plain(checkWebhookService),
			breaks: []breakage{
				{name: "targets another port", apply: func(t *testing.T, o objects) {
					edit(t, o, "Service", webhookName, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9443) })
				}},
				{name: "targets a misspelt port name", apply: func(t *testing.T, o objects) {
					edit(t, o, "Service", webhookName, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") })
				}},
				{name: "selects the agent", apply: func(t *testing.T, o objects) {
					edit(t, o, "Service", webhookName, func(s *corev1.Service) { s.Spec.Selector["app.kubernetes.io/component"] = "agent" })
				}},
				{name: "selects every nodeguard pod", apply: func(t *testing.T, o objects) {
					edit(t, o, "Service", webhookName, func(s *corev1.Service) { delete(s.Spec.Selector, "app.kubernetes.io/component") })
				}},
			},
		},
		{
			name:  "the webhook's args are its flags, with files from the right mounts",
			check: checkWebhookArgs,
			breaks: []breakage{
				{name: "an unknown flag", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setArg(c, "tls-cert", "/etc/nodeguard/tls/tls.crt") })
				}},
				{name: "another port", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setArg(c, "secure-port", "9443") })
				}},
				{name: "settings outside their mount", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						setArg(c, "settings", "/etc/nodeguard/policy.yaml")
					})
				}},
				{name: "serving cert through a subPath", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.VolumeMounts[0].SubPath = "tls.crt" })
				}},
				{name: "client CA from the serving Secret", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						for i, v := range d.Spec.Template.Spec.Volumes {
							if v.Name == "client-ca" {
								d.Spec.Template.Spec.Volumes[i].Secret.SecretName = servingSecret
							}
						}
					})
				}},
				{name: "client CA file not projected", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						setArg(c, "client-ca-file", "/etc/nodeguard/client-ca/tls.crt")
					})
				}},
				{name: "no client CA", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--client-ca-file=") })
					})
				}},
			},
		},
		{
			name:  "the grace period outlasts the webhook's drain and shutdown",
			check: checkTerminationGrace,
			breaks: []breakage{
				{name: "30s grace", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) {
						d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr[int64](30)
					})
				}},
				{name: "a longer shutdown", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { setArg(c, "shutdown-timeout", "60s") })
				}},
			},
		},
		{
			name:  "critical priority classes",
			check: plain(checkPriorityClasses),
			breaks: []breakage{
				{name: "webhook without", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Template.Spec.PriorityClassName = "" })
				}},
				{name: "agent below node-critical", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) {
						d.Spec.Template.Spec.PriorityClassName = "system-cluster-critical"
					})
				}},
			},
		},
		{
			name:  "resource requests and limits",
			check: plain(checkResources),
			breaks: []breakage{
				{name: "webhook without limits", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.Resources.Limits = nil })
				}},
				{name: "agent without a memory limit", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { delete(c.Resources.Limits, corev1.ResourceMemory) })
				}},
				{name: "webhook limit below request", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) {
						c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
					})
				}},
			},
		},
		{
			name:  "the shipped policy parses",
			check: checkPolicyConfigMap,
			breaks: []breakage{
				{name: "bad version", apply: func(t *testing.T, o objects) {
					edit(t, o, "ConfigMap", "nodeguard-policy", func(cm *corev1.ConfigMap) {
						cm.Data["policy.yaml"] = strings.Replace(cm.Data["policy.yaml"], `minKubeletVersion: "1.34.0"`, `minKubeletVersion: "one.two"`, 1)
					})
				}},
				{name: "unknown field", apply: func(t *testing.T, o objects) {
					edit(t, o, "ConfigMap", "nodeguard-policy", func(cm *corev1.ConfigMap) { cm.Data["policy.yaml"] += "allowEverything: true\n" })
				}},
				{name: "not a top-level kubelet field", apply: func(t *testing.T, o objects) {
					edit(t, o, "ConfigMap", "nodeguard-policy", func(cm *corev1.ConfigMap) {
						cm.Data["policy.yaml"] = strings.Replace(cm.Data["policy.yaml"], "  - authentication\n", "  - authentication.webhook\n", 1)
					})
				}},
				{name: "under another key", apply: func(t *testing.T, o objects) {
					edit(t, o, "ConfigMap", "nodeguard-policy", func(cm *corev1.ConfigMap) {
						cm.Data["nodeguard.yaml"] = cm.Data["policy.yaml"]
						delete(cm.Data, "policy.yaml")
					})
				}},
			},
		},
		{
			name:  "RBAC reads, never writes, never Secrets",
			check: plain(checkRBAC),
			breaks: []breakage{
				{name: "create", apply: func(t *testing.T, o objects) {
					edit(t, o, "ClusterRole", webhookName, func(r *rbacv1.ClusterRole) { r.Rules[0].Verbs = append(r.Rules[0].Verbs, "create") })
				}},
				{name: "every verb", apply: func(t *testing.T, o objects) {
					edit(t, o, "ClusterRole", webhookName, func(r *rbacv1.ClusterRole) { r.Rules[1].Verbs = []string{"*"} })
				}},
				{name: "secrets", apply: func(t *testing.T, o objects) {
					edit(t, o, "ClusterRole", webhookName, func(r *rbacv1.ClusterRole) { r.Rules[1].Resources = append(r.Rules[1].Resources, "secrets") })
				}},
				{name: "bound to the default account", apply: func(t *testing.T, o objects) {
					edit(t, o, "ClusterRoleBinding", webhookName, func(b *rbacv1.ClusterRoleBinding) { b.Subjects[0].Name = "default" })
				}},
			},
		},
		{
			name:  "the agent runs on every node as that node, with the kubelet's files",
			check: checkAgent,
			breaks: []breakage{
				{name: "tolerates only some taints", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) {
						d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
					})
				}},
				{name: "pod network", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) { d.Spec.Template.Spec.HostNetwork = false })
				}},
				{name: "a service account token", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) {
						d.Spec.Template.Spec.AutomountServiceAccountToken = nil
					})
				}},
				{name: "the pod's name as node name", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						c.Env[0].ValueFrom.FieldRef.FieldPath = "metadata.name"
					})
				}},
				{name: "state on a read-only mount", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						for i := range c.VolumeMounts {
							if c.VolumeMounts[i].Name == "state" {
								c.VolumeMounts[i].ReadOnly = true
							}
						}
					})
				}},
				{name: "kubeconfig not mounted", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						setArg(c, "kubeconfig", "/var/lib/kubelet-conf/kubeconfig")
					})
				}},
				{name: "an unknown flag", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { setArg(c, "restart-command", "reboot") })
				}},
				{name: "local configuration on a read-only mount", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						for i := range c.VolumeMounts {
							if c.VolumeMounts[i].Name == "local-config" {
								c.VolumeMounts[i].ReadOnly = true
							}
						}
					})
				}},
			},
		},
		{
			name:  "everything namespaced is in nodeguard, the agent in nodeguard-agent",
			check: plain(checkNamespaced),
			breaks: []breakage{
				{name: "the agent in nodeguard", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) { d.Namespace = namespace })
				}},
				{name: "the agent's account in nodeguard", apply: func(t *testing.T, o objects) {
					edit(t, o, "ServiceAccount", agentName, func(sa *corev1.ServiceAccount) { sa.Namespace = namespace })
				}},
				{name: "the webhook in the agent's namespace", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(d *appsv1.Deployment, _ *corev1.Container) { d.Namespace = agentNamespace })
				}},
				{name: "Service in default", apply: func(t *testing.T, o objects) {
					edit(t, o, "Service", webhookName, func(s *corev1.Service) { s.Namespace = "default" })
				}},
				{name: "the controller's leader-election Role in default", apply: func(t *testing.T, o objects) {
					edit(t, o, "Role", "nodeguard-rollout-controller-leader-election", func(r *rbacv1.Role) { r.Namespace = "default" })
				}},
			},
		},
	}
}
