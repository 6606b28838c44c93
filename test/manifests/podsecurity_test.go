package manifests

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The symbolic images of manifests/base: an images component (`make
// images`, or a release's) maps each to a digest.
const (
	webhookImage           = "nodeguard-webhook"
	rolloutControllerImage = "nodeguard-rollout-controller"
	agentImage             = "nodeguard-agent"
)

// workloadImages is the image of each workload's containers.
var workloadImages = map[string]string{
	"Deployment/" + webhookName:           webhookImage,
	"Deployment/" + rolloutControllerName: rolloutControllerImage,
	"DaemonSet/" + agentName:              agentImage,
}

// The agent's restart over D-Bus, as manifests/base sets it.
const (
	systemBusAddress = "unix:path=/run/dbus/system_bus_socket"
	kubeletUnit      = "kubelet.service"
)

// podSecurityLabels are the Pod Security levels of nodeguard's namespaces,
// by mode. Every mode also names its version.
var podSecurityLabels = map[string]map[string]string{
	namespace:      {"enforce": "restricted", "warn": "restricted", "audit": "restricted"},
	agentNamespace: {"enforce": "privileged", "warn": "baseline", "audit": "baseline"},
}

const podSecurityPrefix = "pod-security.kubernetes.io/"

// pinnedVersion is a Pod Security version other than latest.
var pinnedVersion = regexp.MustCompile(`^v1\.[0-9]+$`)

// workload is a pod template and what holds it.
type workload struct {
	kind, namespace, name string
	template              corev1.PodTemplateSpec
}

// workloads are the pod templates of every kind that holds one; a kind this
// does not know carrying containers would go unchecked, so it is an error.
func workloads(o objects) ([]workload, error) {
	var out []workload
	var errs []error
	for _, obj := range o {
		var template *corev1.PodTemplateSpec
		switch obj.GetKind() {
		case "Deployment":
			d, err := typedIn[appsv1.Deployment](o, obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return nil, err
			}
			template = &d.Spec.Template
		case "DaemonSet":
			d, err := typedIn[appsv1.DaemonSet](o, obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return nil, err
			}
			template = &d.Spec.Template
		case "StatefulSet":
			d, err := typedIn[appsv1.StatefulSet](o, obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return nil, err
			}
			template = &d.Spec.Template
		case "Job":
			j, err := typedIn[batchv1.Job](o, obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return nil, err
			}
			template = &j.Spec.Template
		case "Pod":
			p, err := typedIn[corev1.Pod](o, obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return nil, err
			}
			template = &corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
		default:
			if hasContainers(obj) {
				errs = append(errs, fmt.Errorf("%s %s holds containers this test does not check", obj.GetKind(), obj.GetName()))
			}
			continue
		}
		out = append(out, workload{kind: obj.GetKind(), namespace: obj.GetNamespace(), name: obj.GetName(), template: *template})
	}
	return out, errors.Join(errs...)
}

func hasContainers(obj *unstructured.Unstructured) bool {
	for _, path := range [][]string{{"spec", "containers"}, {"spec", "template", "spec", "containers"}, {"spec", "jobTemplate", "spec", "template", "spec", "containers"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, path...); found {
			return true
		}
	}
	return false
}

// allContainers are a pod's containers of every sort.
func allContainers(spec *corev1.PodSpec) []corev1.Container {
	all := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, e := range spec.EphemeralContainers {
		all = append(all, corev1.Container(e.EphemeralContainerCommon))
	}
	return all
}

// checkImages: every container of every workload runs its workload's
// symbolic image, and nothing runs a tool from the host's or another image
// (nsenter, busybox) to reach into the node.
func checkImages(o objects) error {
	list, err := workloads(o)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for _, w := range list {
		key := w.kind + "/" + w.name
		want, known := workloadImages[key]
		if !known {
			errs = append(errs, fmt.Errorf("%s %s/%s: not a nodeguard workload (want only %v)", w.kind, w.namespace, w.name, slices.Sorted(maps.Keys(workloadImages))))
		}
		seen[key] = true
		for _, c := range allContainers(&w.template.Spec) {
			if known && c.Image != want {
				errs = append(errs, fmt.Errorf("%s %s container %s: image %q, want the symbolic %q", w.kind, w.name, c.Name, c.Image, want))
			}
			for _, word := range append(append([]string{c.Image}, c.Command...), c.Args...) {
				for _, tool := range []string{"nsenter", "busybox"} {
					if strings.Contains(word, tool) {
						errs = append(errs, fmt.Errorf("%s %s container %s: %q uses %s", w.kind, w.name, c.Name, word, tool))
					}
				}
			}
		}
	}
	for key := range workloadImages {
		if !seen[key] {
			errs = append(errs, fmt.Errorf("no %s", key))
		}
	}
	return errors.Join(errs...)
}

// checkAgentUnprivileged: the agent is one container that restarts the
// kubelet through systemd over the host's system bus, as root (the owner
// of the kubelet's files, and trusted by systemd without polkit) but with no
// capability, no privilege and no host namespace but the network.
func checkAgentUnprivileged(t *testing.T, o objects) error {
	ds, c, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	pod := ds.Spec.Template.Spec
	var errs []error
	if len(pod.InitContainers) > 0 {
		errs = append(errs, fmt.Errorf("%d init containers: the agent seeds its local configuration itself", len(pod.InitContainers)))
	}
	if len(pod.Containers) != 1 {
		errs = append(errs, fmt.Errorf("%d containers, want the agent alone", len(pod.Containers)))
	}
	if pod.HostPID || pod.HostIPC {
		errs = append(errs, errors.New("shares the host's PID or IPC namespace; the restart goes over the bus"))
	}
	if pod.HostUsers != nil && !*pod.HostUsers {
		errs = append(errs, errors.New("a user namespace: the bus would not see uid 0, and the kubelet's files would not be its own"))
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	if csc.Privileged != nil && *csc.Privileged {
		errs = append(errs, errors.New("privileged"))
	}
	if uid := firstSet(csc.RunAsUser, psc.RunAsUser); uid == nil || *uid != 0 {
		errs = append(errs, fmt.Errorf("runAsUser %s: want 0, the owner of the kubelet's files and root on the system bus", ptrString(uid)))
	}
	if gid := firstSet(csc.RunAsGroup, psc.RunAsGroup); gid == nil || *gid != 0 {
		errs = append(errs, fmt.Errorf("runAsGroup %s: want 0", ptrString(gid)))
	}
	if effective(csc.RunAsNonRoot, psc.RunAsNonRoot) {
		errs = append(errs, errors.New("runAsNonRoot contradicts runAsUser 0"))
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		errs = append(errs, errors.New("allowPrivilegeEscalation is not false"))
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		errs = append(errs, errors.New("readOnlyRootFilesystem is not true"))
	}
	if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
		errs = append(errs, errors.New("capabilities: want drop [ALL] and nothing added"))
	}
	if seccomp := firstSet(csc.SeccompProfile, psc.SeccompProfile); seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errs = append(errs, errors.New("seccompProfile is not RuntimeDefault"))
	}
	args, err := checkArgsAreFlags(t, "agent", c.Args)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if command := args["kubelet-restart-command"]; command != "" {
		errs = append(errs, fmt.Errorf("--kubelet-restart-command=%s: want the restart over D-Bus", command))
	}
	if got := args["kubelet-unit"]; got != kubeletUnit {
		errs = append(errs, fmt.Errorf("--kubelet-unit=%q, want %s", got, kubeletUnit))
	}
	address := args["systemd-bus-address"]
	socket, ok := strings.CutPrefix(address, "unix:path=")
	if address != systemBusAddress || !ok {
		errs = append(errs, fmt.Errorf("--systemd-bus-address=%q, want %s", address, systemBusAddress))
		return errors.Join(errs...)
	}
	// The socket's directory, not the socket: a bus daemon restarted on the
	// host makes a new socket, which a mount of the old file would not show.
	volumes := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			volumes[v.Name] = v.HostPath
		}
	}
	if err := checkHostMount(c, volumes, socket, false); err != nil {
		errs = append(errs, fmt.Errorf("the system bus %s: %w", socket, err))
	} else if m := deepestMount(c, socket); m.MountPath != path.Dir(socket) {
		errs = append(errs, fmt.Errorf("the system bus %s: mount %s is at %s, want the socket's directory %s", socket, m.Name, m.MountPath, path.Dir(socket)))
	} else if hp := volumes[m.Name]; hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		errs = append(errs, fmt.Errorf("the system bus: volume %s is a hostPath of type %s, want Directory", m.Name, ptrString(hp.Type)))
	}
	return errors.Join(errs...)
}

// checkNamespaceLevels: nodeguard's namespace enforces restricted (at a
// pinned version, so an upgrade cannot refuse the webhook's new pods), the
// agent's enforces privileged and warns at baseline; every mode names its
// version.
func checkNamespaceLevels(o objects) error {
	var errs []error
	for ns, levels := range podSecurityLabels {
		obj, err := typed[corev1.Namespace](o, "Namespace", ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for mode, level := range levels {
			if got := obj.Labels[podSecurityPrefix+mode]; got != level {
				errs = append(errs, fmt.Errorf("Namespace %s: %s%s=%q, want %q", ns, podSecurityPrefix, mode, got, level))
			}
			version := obj.Labels[podSecurityPrefix+mode+"-version"]
			if version != "latest" && !pinnedVersion.MatchString(version) {
				errs = append(errs, fmt.Errorf("Namespace %s: %s%s-version=%q, want latest or v1.N", ns, podSecurityPrefix, mode, version))
			}
		}
		for key := range obj.Labels {
			if mode, ok := strings.CutPrefix(key, podSecurityPrefix); ok {
				if _, known := levels[strings.TrimSuffix(mode, "-version")]; !known {
					errs = append(errs, fmt.Errorf("Namespace %s: unexpected label %s", ns, key))
				}
			}
		}
		if ns == namespace && !pinnedVersion.MatchString(obj.Labels[podSecurityPrefix+"enforce-version"]) {
			errs = append(errs, fmt.Errorf("Namespace %s: enforce-version %q, want a pinned v1.N", ns, obj.Labels[podSecurityPrefix+"enforce-version"]))
		}
	}
	return errors.Join(errs...)
}

func setNamespaceLabel(t *testing.T, o objects, ns, key, value string) {
	t.Helper()
	edit(t, o, "Namespace", ns, func(n *corev1.Namespace) {
		if value == "" {
			delete(n.Labels, key)
			return
		}
		n.Labels[key] = value
	})
}

// podSecurityInvariants are about images, the agent's privileges and the
// namespaces' Pod Security levels.
func podSecurityInvariants() []invariant {
	editAgentMount := func(t *testing.T, o objects, mutate func(*corev1.PodSpec)) {
		editAgent(t, o, func(d *appsv1.DaemonSet, _ *corev1.Container) { mutate(&d.Spec.Template.Spec) })
	}
	return []invariant{
		{
			name:  "every container runs its workload's symbolic image, and none nsenter or busybox",
			check: plain(checkImages),
			breaks: []breakage{
				{name: "the agent from busybox", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.Image = "docker.io/library/busybox:1.37.0" })
				}},
				{name: "a placeholder tag", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.Image = "ghcr.io/nodeguard/webhook:v0.1.0" })
				}},
				{name: "the webhook from the agent's image", apply: func(t *testing.T, o objects) {
					editDeployment(t, o, func(_ *appsv1.Deployment, c *corev1.Container) { c.Image = agentImage })
				}},
				{name: "an init container", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(d *appsv1.DaemonSet, c *corev1.Container) {
						d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "seed", Image: agentImage, Command: []string{"/bin/sh", "-c", "busybox cp a b"}}}
					})
				}},
				{name: "nsenter in an arg", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						setArg(c, "kubelet-restart-command", "nsenter --target=1 --mount -- systemctl restart kubelet")
					})
				}},
				{name: "another workload", add: &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "batch/v1", "kind": "Job",
					"metadata": map[string]any{"name": "seed", "namespace": agentNamespace},
					"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
						"restartPolicy": "Never",
						"containers":    []any{map[string]any{"name": "seed", "image": agentImage}},
					}}},
				}}},
			},
		},
		{
			name:  "the agent is one unprivileged container restarting the kubelet over D-Bus",
			check: checkAgentUnprivileged,
			breaks: []breakage{
				{name: "an init container", apply: func(t *testing.T, o objects) {
					editAgentMount(t, o, func(p *corev1.PodSpec) {
						p.InitContainers = []corev1.Container{{Name: "seed", Image: agentImage}}
					})
				}},
				{name: "host PID namespace", apply: func(t *testing.T, o objects) {
					editAgentMount(t, o, func(p *corev1.PodSpec) { p.HostPID = true })
				}},
				{name: "a user namespace", apply: func(t *testing.T, o objects) {
					editAgentMount(t, o, func(p *corev1.PodSpec) { p.HostUsers = ptr(false) })
				}},
				{name: "privileged", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.Privileged = ptr(true) })
				}},
				{name: "CAP_SYS_ADMIN", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						c.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
					})
				}},
				{name: "non-root", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.RunAsUser = ptr[int64](65532) })
				}},
				{name: "root group unset", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.RunAsGroup = nil })
				}},
				{name: "privilege escalation", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = nil })
				}},
				{name: "writable root filesystem", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.ReadOnlyRootFilesystem = ptr(false) })
				}},
				{name: "no seccomp profile", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { c.SecurityContext.SeccompProfile = nil })
				}},
				{name: "a restart command", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
							return strings.HasPrefix(a, "--systemd-bus-address=") || strings.HasPrefix(a, "--kubelet-unit=")
						})
						setArg(c, "kubelet-restart-command", "systemctl restart kubelet")
					})
				}},
				{name: "the unit without .service", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) { setArg(c, "kubelet-unit", "kubelet") })
				}},
				{name: "the bus elsewhere", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						setArg(c, "systemd-bus-address", "unix:path=/var/run/dbus/system_bus_socket")
					})
				}},
				{name: "the bus not mounted", apply: func(t *testing.T, o objects) {
					editAgent(t, o, func(_ *appsv1.DaemonSet, c *corev1.Container) {
						c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/run/dbus" })
					})
				}},
				{name: "the socket file mounted", apply: func(t *testing.T, o objects) {
					editAgentMount(t, o, func(p *corev1.PodSpec) {
						for i := range p.Volumes {
							if p.Volumes[i].HostPath != nil && p.Volumes[i].HostPath.Path == "/run/dbus" {
								p.Volumes[i].HostPath.Type = ptr(corev1.HostPathSocket)
							}
						}
					})
				}},
				{name: "the bus from another host path", apply: func(t *testing.T, o objects) {
					editAgentMount(t, o, func(p *corev1.PodSpec) {
						for i := range p.Volumes {
							if p.Volumes[i].HostPath != nil && p.Volumes[i].HostPath.Path == "/run/dbus" {
								p.Volumes[i].HostPath.Path = "/var/run/dbus"
							}
						}
					})
				}},
			},
		},
		{
			name:  "nodeguard enforces restricted, nodeguard-agent privileged",
			check: plain(checkNamespaceLevels),
			breaks: []breakage{
				{name: "nodeguard privileged", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"enforce", "privileged")
				}},
				{name: "nodeguard enforces nothing", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"enforce", "")
				}},
				{name: "nodeguard enforces latest", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"enforce-version", "latest")
				}},
				{name: "a malformed version", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"audit-version", "1.37")
				}},
				{name: "no warnings in nodeguard", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"warn", "")
				}},
				{name: "the agent's namespace at baseline", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, agentNamespace, podSecurityPrefix+"enforce", "baseline")
				}},
				{name: "the agent's namespace silent", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, agentNamespace, podSecurityPrefix+"audit", "")
				}},
				{name: "an exemption label", apply: func(t *testing.T, o objects) {
					setNamespaceLabel(t, o, namespace, podSecurityPrefix+"exempt", "true")
				}},
			},
		},
	}
}
