package manifests

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/settings"
)

const (
	agentContainer = "agent"
	securePort     = 8443
)

func agentDaemonSet(o objects) (*appsv1.DaemonSet, *corev1.Container, error) {
	ds, err := typed[appsv1.DaemonSet](o, "DaemonSet", agentName)
	if err != nil {
		return nil, nil, err
	}
	c := container(&ds.Spec.Template.Spec, agentContainer)
	if c == nil {
		return nil, nil, fmt.Errorf("DaemonSet %s has no container %s", agentName, agentContainer)
	}
	return ds, c, nil
}

// checkWebhookHardened: the webhook's pods meet Pod Security's "restricted"
// level on the points that matter, whichever level (pod or container) sets
// them.
func checkWebhookHardened(o objects) error {
	deploy, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	pod := deploy.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	var errs []error
	if !effective(csc.RunAsNonRoot, psc.RunAsNonRoot) {
		errs = append(errs, errors.New("runAsNonRoot is not true"))
	}
	if uid := firstSet(csc.RunAsUser, psc.RunAsUser); uid != nil && *uid == 0 {
		errs = append(errs, errors.New("runAsUser is 0"))
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		errs = append(errs, errors.New("readOnlyRootFilesystem is not true"))
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		errs = append(errs, errors.New("allowPrivilegeEscalation is not false"))
	}
	if csc.Privileged != nil && *csc.Privileged {
		errs = append(errs, errors.New("privileged"))
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		errs = append(errs, errors.New("capabilities: want drop [ALL] and nothing added"))
	}
	seccomp := psc.SeccompProfile
	if csc.SeccompProfile != nil {
		seccomp = csc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errs = append(errs, errors.New("seccompProfile is not RuntimeDefault"))
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		errs = append(errs, errors.New("uses a host namespace"))
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			errs = append(errs, fmt.Errorf("volume %s is a hostPath", v.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("Deployment %s: %w", webhookName, err)
	}
	return nil
}

func effective(container, pod *bool) bool {
	if container != nil {
		return *container
	}
	return pod != nil && *pod
}

func firstSet[T any](values ...*T) *T {
	for _, v := range values {
		if v != nil {
			return v
		}
	}
	return nil
}

// containerPort resolves a probe's or Service's port (a number or a name)
// to a port the container declares.
func containerPort(c *corev1.Container, port intstr.IntOrString) (int32, error) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %s is not a port of container %s", port.String(), c.Name)
}

func checkHTTPSProbe(c *corev1.Container, probe *corev1.Probe, kind, wantPath string) error {
	if probe == nil || probe.HTTPGet == nil {
		return fmt.Errorf("no HTTP %s probe", kind)
	}
	get := probe.HTTPGet
	if get.Scheme != corev1.URISchemeHTTPS || get.Path != wantPath {
		return fmt.Errorf("%s probe %s %s: want HTTPS %s", kind, get.Scheme, get.Path, wantPath)
	}
	port, err := containerPort(c, get.Port)
	if err != nil {
		return fmt.Errorf("%s probe: %w", kind, err)
	}
	if port != securePort {
		return fmt.Errorf("%s probe on port %d: want the webhook's --secure-port %d", kind, port, securePort)
	}
	return nil
}

// checkWebhookProbes: ready means informers synced and policies compiled
// (/readyz); alive is /livez, which does not fail while the graph syncs.
func checkWebhookProbes(o objects) error {
	_, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	return errors.Join(checkHTTPSProbe(c, c.ReadinessProbe, "readiness", "/readyz"), checkHTTPSProbe(c, c.LivenessProbe, "liveness", "/livez"))
}

// checkWebhookReplicas: two replicas, kept on different nodes.
func checkWebhookReplicas(o objects) error {
	deploy, _, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 {
		return fmt.Errorf("replicas %s: want 2", ptrString(deploy.Spec.Replicas))
	}
	pod := deploy.Spec.Template
	podLabels := labels.Set(pod.Labels)
	for _, spread := range pod.Spec.TopologySpreadConstraints {
		selector, err := metav1.LabelSelectorAsSelector(spread.LabelSelector)
		if err == nil && spread.TopologyKey == corev1.LabelHostname && spread.WhenUnsatisfiable == corev1.DoNotSchedule && spread.MaxSkew == 1 && selector.Matches(podLabels) {
			return nil
		}
	}
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.PodAntiAffinity != nil {
		for _, term := range affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if err == nil && term.TopologyKey == corev1.LabelHostname && selector.Matches(podLabels) {
				return nil
			}
		}
	}
	return errors.New("no topologySpreadConstraint (maxSkew 1, DoNotSchedule) or required anti-affinity keeps the webhook's replicas on different nodes")
}

// checkWebhookPDB: a PodDisruptionBudget keeps one webhook pod through
// voluntary disruptions, and selects no other pods.
func checkWebhookPDB(o objects) error {
	deploy, _, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	ds, _, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	for _, obj := range o.ofKind("PodDisruptionBudget") {
		pdb, err := typed[policyv1.PodDisruptionBudget](o, "PodDisruptionBudget", obj.GetName())
		if err != nil {
			return err
		}
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Namespace != deploy.Namespace || !selector.Matches(labels.Set(deploy.Spec.Template.Labels)) {
			continue
		}
		if selector.Matches(labels.Set(ds.Spec.Template.Labels)) {
			return fmt.Errorf("PodDisruptionBudget %s also selects the agent's pods", pdb.Name)
		}
		if minAvailable := pdb.Spec.MinAvailable; minAvailable == nil || minAvailable.Type != intstr.Int || minAvailable.IntVal != 1 {
			return fmt.Errorf("PodDisruptionBudget %s: minAvailable %v, want 1", pdb.Name, minAvailable)
		}
		return nil
	}
	return fmt.Errorf("no PodDisruptionBudget selects the pods of Deployment %s", webhookName)
}

// checkWebhookService: the Service selects the webhook's pods (only them)
// and each of its ports leads to the container's HTTPS port.
func checkWebhookService(o objects) error {
	svc, err := typed[corev1.Service](o, "Service", webhookName)
	if err != nil {
		return err
	}
	deploy, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	ds, _, err := agentDaemonSet(o)
	if err != nil {
		return err
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	if len(svc.Spec.Selector) == 0 || svc.Namespace != deploy.Namespace || !selector.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		return fmt.Errorf("Service %s/%s (selector %v) does not select the webhook's pods", svc.Namespace, svc.Name, svc.Spec.Selector)
	}
	if selector.Matches(labels.Set(ds.Spec.Template.Labels)) {
		return fmt.Errorf("Service %s also selects the agent's pods", svc.Name)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 443 }) {
		return fmt.Errorf("Service %s has no port 443", svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port)
		}
		port, err := containerPort(c, target)
		if err != nil {
			return fmt.Errorf("Service %s port %d: %w", svc.Name, p.Port, err)
		}
		if port != securePort {
			return fmt.Errorf("Service %s port %d targets container port %d, want %d", svc.Name, p.Port, port, securePort)
		}
	}
	return nil
}

// fileSource is where a file flag's file must come from: a Secret or a
// ConfigMap.
type fileSource struct {
	flag      string
	secret    string
	configMap string
}

func (f fileSource) source() string {
	if f.secret != "" {
		return "Secret " + f.secret
	}
	return "ConfigMap " + f.configMap
}

var webhookFiles = []fileSource{
	{flag: "tls-cert-file", secret: "nodeguard-webhook-tls"},
	{flag: "tls-private-key-file", secret: "nodeguard-webhook-tls"},
	{flag: "client-ca-file", secret: "nodeguard-apiserver-client-ca"},
	{flag: "settings", configMap: "nodeguard-policy"},
}

// checkWebhookArgs: every argument is a flag of cmd/webhook; --secure-port is
// the container's port; each file flag names a file in a read-only,
// whole-volume mount of the right Secret or ConfigMap.
func checkWebhookArgs(t *testing.T, o objects) error {
	deploy, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	args, err := checkArgsAreFlags(t, "webhook", c.Args)
	if err != nil {
		return err
	}
	if len(c.Command) > 0 {
		return fmt.Errorf("container %s overrides the image's command %v", c.Name, c.Command)
	}
	if args["secure-port"] != fmt.Sprint(securePort) {
		return fmt.Errorf("--secure-port=%s: want %d", args["secure-port"], securePort)
	}
	if _, err := containerPort(c, intstr.FromInt32(securePort)); err != nil {
		return err
	}
	var errs []error
	for _, want := range webhookFiles {
		file, ok := args[want.flag]
		if !ok {
			errs = append(errs, fmt.Errorf("--%s is not set", want.flag))
			continue
		}
		mount, key, err := mountFor(c, file)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s=%s: %w", want.flag, file, err))
			continue
		}
		if !mount.ReadOnly || mount.SubPath != "" || mount.SubPathExpr != "" {
			errs = append(errs, fmt.Errorf("--%s: mount %s must be read-only and of the whole volume (a subPath is never updated, and the webhook reloads on change)", want.flag, mount.Name))
		}
		if err := checkVolumeSource(deploy.Spec.Template.Spec.Volumes, mount.Name, key, want); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", want.flag, err))
		}
	}
	return errors.Join(errs...)
}

// mountFor finds the mount holding file and the file's name inside it.
func mountFor(c *corev1.Container, file string) (*corev1.VolumeMount, string, error) {
	for i, m := range c.VolumeMounts {
		if dir, key := path.Split(file); path.Clean(dir) == path.Clean(m.MountPath) {
			return &c.VolumeMounts[i], key, nil
		}
	}
	return nil, "", errors.New("no volume is mounted at its directory")
}

func checkVolumeSource(volumes []corev1.Volume, name, key string, want fileSource) error {
	for _, v := range volumes {
		if v.Name != name {
			continue
		}
		var items []corev1.KeyToPath
		switch {
		case want.secret != "" && v.Secret != nil && v.Secret.SecretName == want.secret:
			items = v.Secret.Items
		case want.configMap != "" && v.ConfigMap != nil && v.ConfigMap.Name == want.configMap:
			items = v.ConfigMap.Items
		default:
			return fmt.Errorf("volume %s is not %s", name, want.source())
		}
		if len(items) > 0 && !slices.ContainsFunc(items, func(item corev1.KeyToPath) bool { return item.Path == key }) {
			return fmt.Errorf("volume %s does not project %s", name, key)
		}
		return nil
	}
	return fmt.Errorf("no volume %s", name)
}

// checkTerminationGrace: the kubelet's SIGKILL comes after the webhook's
// drain and shutdown, not in the middle of in-flight reviews.
func checkTerminationGrace(t *testing.T, o objects) error {
	deploy, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	args, err := checkArgsAreFlags(t, "webhook", c.Args)
	if err != nil {
		return err
	}
	// cmd/webhook's defaults.
	drain, shutdown := 5*time.Second, 30*time.Second
	for flag, d := range map[string]*time.Duration{"shutdown-drain-duration": &drain, "shutdown-timeout": &shutdown} {
		if value, ok := args[flag]; ok {
			if *d, err = time.ParseDuration(value); err != nil {
				return fmt.Errorf("--%s=%s: %w", flag, value, err)
			}
		}
	}
	grace := deploy.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= drain+shutdown {
		return fmt.Errorf("terminationGracePeriodSeconds %s: want more than --shutdown-drain-duration + --shutdown-timeout = %v", ptrString(grace), drain+shutdown)
	}
	return nil
}

// checkPolicyConfigMap: the settings (the NodeguardPolicy of the
// nodeguard-policy ConfigMap) the webhook starts with are ones it accepts.
func checkPolicyConfigMap(t *testing.T, o objects) error {
	_, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	args, err := checkArgsAreFlags(t, "webhook", c.Args)
	if err != nil {
		return err
	}
	cm, err := typed[corev1.ConfigMap](o, "ConfigMap", "nodeguard-policy")
	if err != nil {
		return err
	}
	key := path.Base(args["settings"])
	data, ok := cm.Data[key]
	if !ok {
		return fmt.Errorf("ConfigMap %s has no key %s, the file --settings names", cm.Name, key)
	}
	if _, err := settings.Parse([]byte(data), "ConfigMap "+cm.Name); err != nil {
		return err
	}
	return nil
}

// checkWebhookGC: the webhook's collector runs less often than Go's
// default (its heap is mostly the long-lived graph; docs/benchmarks.md),
// and no GOMEMLIMIT makes it run back to back after the graph is built
// (docs/install.md).
func checkWebhookGC(o objects) error {
	_, c, err := webhookDeployment(o)
	if err != nil {
		return err
	}
	env := gcEnv(c)
	if gogc, err := strconv.Atoi(env["GOGC"]); err != nil || gogc <= 100 {
		return fmt.Errorf("GOGC %q: want a number above Go's default of 100", env["GOGC"])
	}
	if limit, set := env["GOMEMLIMIT"]; set {
		return fmt.Errorf("GOMEMLIMIT %q is set", limit)
	}
	return nil
}

// setEnv sets, or with value "" removes, a container's variable.
func setEnv(c *corev1.Container, name, value string) {
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if value != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}
