package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/test/manifests"
)

// TestChartLints: helm lint --strict passes at the defaults and with the
// settings the overlays share.
func TestChartLints(t *testing.T) {
	f := newFixture(t)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		flags := append(f.chartFlags(s), s.values...)
		if _, err := RunHelm(append([]string{"lint", "--strict", dir}, flags...)...); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
}

// TestChartRefusesWhatItCannotHonour: values the chart cannot install are
// refused when it renders, with an error that names the value and says
// what to do; nothing is half rendered.
func TestChartRefusesWhatItCannotHonour(t *testing.T) {
	f := newFixture(t)
	images := []string{"-f", f.values}
	cases := []struct {
		name  string
		flags []string
		want  string
	}{
		{"no image digest", nil, "images.webhook: set digest"},
		{"a digest that is not one", append(images, "--set", "images.agent.digest=latest"), "images.agent.digest"},
		{"static certificates without the files", append(images, "--set", "certificates.source=static"), "certificates.static.servingCA is required"},
		{"an unknown certificate source", append(images, "--set", "certificates.source=vault"), "certificates.source"},
		{"a drain mode the agent does not know", append(images, "--set", "agent.drain=Sometimes"), "agent.drain"},
		{"a misspelt value", append(images, "--set", "webhook.replica=3"), "replica"},
		{"no replica", append(images, "--set", "webhook.replicas=0"), "webhook.replicas"},
		{"a kubelet file outside the kubelet's directory", append(images, "--set", "agent.kubelet.configFile=/etc/kubernetes/kubelet-config.yaml"), "agent.kubelet.configFile"},
		{"a duration that is not one", append(images, "--set", "agent.drainTimeout=five minutes"), "agent.drainTimeout"},
		{"a priority level switch that is not one", append(images, "--set-string", "rolloutController.apiPriority.enabled=yes"), "rolloutController.apiPriority.enabled"},
		{"a priority level setting the chart does not have", append(images, "--set", "rolloutController.apiPriority.shares=40"), "shares"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := Template(c.flags...)
			if err == nil {
				t.Fatalf("rendered %d objects, want a refusal naming %q", len(objs), c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused with %v\nwant it to name %q", err, c.want)
			}
		})
	}
	t.Run("a release namespace the chart creates", func(t *testing.T) {
		dir, err := Dir()
		if err != nil {
			t.Fatal(err)
		}
		_, err = RunHelm("template", "nodeguard", dir, "--namespace", "nodeguard", "-f", f.values)
		if err == nil || !strings.Contains(err.Error(), "install the release into another namespace") {
			t.Errorf("release namespace nodeguard: %v, want a refusal saying where to install instead", err)
		}
	})
}

// TestChartValues: the values operators set reach the objects: replicas,
// resources, where the agents run, the agents' flags, the trial and drain
// defaults, the policy (whose content names the agents' ConfigMap as
// kustomize would), a pinned ClusterIP, the alerts' thresholds, and the
// scrape annotations.
func TestChartValues(t *testing.T) {
	f := newFixture(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	policyText := "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nminKubeletVersion: \"1.35.0\"\nallowNodeSelfAssignment: false\n"
	if err := os.WriteFile(policy, []byte(policyText), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := Template("-f", f.values,
		"--set", "webhook.replicas=3",
		"--set", "webhook.resources.limits.memory=1Gi",
		"--set", "webhook.service.clusterIP=10.96.0.40",
		"--set", "rolloutController.replicas=1",
		"--set", "agent.nodeSelector.node-role\\.example\\.com/pool=blue",
		"--set", "agent.tolerations[0].key=dedicated,agent.tolerations[0].operator=Exists,agent.tolerations[0].effect=NoSchedule",
		"--set", "agent.drain=Never",
		"--set", "agent.drainTimeout=10m",
		"--set", "agent.trial.period=2m",
		"--set", "agent.trial.failureThreshold=5",
		"--set", "agent.extraArgs={--kubelet-restart-timeout=3m}",
		"--set", "agent.kubelet.rootDir=/var/lib/k8s/kubelet",
		"--set", "agent.kubelet.configFile=/var/lib/k8s/kubelet/config.yaml",
		"--set", "certificates.certManager.ipAddresses={10.96.0.40}",
		"--set-file", "policy="+policy,
		"--set", "metrics.scrapeAnnotations=false",
		"--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.prometheusRule.labels.release=monitoring",
		"--set", "alerts.nodeLeftCordonedFor=45m",
	)
	if err != nil {
		t.Fatal(err)
	}
	webhook := typed[appsv1.Deployment](t, objs, "Deployment nodeguard/nodeguard-webhook")
	if *webhook.Spec.Replicas != 3 || webhook.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("webhook: replicas %d, limits %v", *webhook.Spec.Replicas, webhook.Spec.Template.Spec.Containers[0].Resources.Limits)
	}
	if len(webhook.Spec.Template.Annotations) != 0 {
		t.Errorf("webhook pods annotated %v with scrapeAnnotations false", webhook.Spec.Template.Annotations)
	}
	if c := typed[appsv1.Deployment](t, objs, "Deployment nodeguard/nodeguard-rollout-controller"); *c.Spec.Replicas != 1 {
		t.Errorf("rollout controller: replicas %d", *c.Spec.Replicas)
	}
	agent := typed[appsv1.DaemonSet](t, objs, "DaemonSet nodeguard-agent/nodeguard-agent")
	spec := agent.Spec.Template.Spec
	if spec.NodeSelector["node-role.example.com/pool"] != "blue" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" {
		t.Errorf("agent: nodeSelector %v, tolerations %v", spec.NodeSelector, spec.Tolerations)
	}
	args := spec.Containers[0].Args
	for _, want := range []string{"--drain=Never", "--drain-timeout=10m", "--trial-period=2m", "--trial-failure-threshold=5",
		"--kubelet-restart-timeout=3m", "--kubelet-root-dir=/var/lib/k8s/kubelet", "--kubelet-config-file=/var/lib/k8s/kubelet/config.yaml"} {
		if !slices.Contains(args, want) {
			t.Errorf("agent args %v lack %s", args, want)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--trial-grace-period") }) {
		t.Errorf("agent args %v set a trial grace period nobody asked for", args)
	}
	var mounts []string
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	if !slices.Contains(mounts, "/var/lib/k8s/kubelet") || !slices.Contains(mounts, "/var/lib/k8s/kubelet/pki") {
		t.Errorf("agent mounts %v, want the kubelet's directory and its pki", mounts)
	}
	svc := get(t, objs, "Service nodeguard/nodeguard-webhook")
	if ip, _, _ := unstructured.NestedString(svc.Object, "spec", "clusterIP"); ip != "10.96.0.40" {
		t.Errorf("webhook Service clusterIP %q", ip)
	}
	cert := get(t, objs, "Certificate nodeguard/nodeguard-webhook")
	if ips, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "ipAddresses"); !slices.Equal(ips, []string{"10.96.0.40"}) {
		t.Errorf("serving Certificate ipAddresses %v", ips)
	}

	// The policy: the same content for the webhook and the agents, and the
	// agents' ConfigMap named as kustomize's generator names that content.
	var agentPolicy string
	for _, v := range spec.Volumes {
		if v.Name == "policy" {
			agentPolicy = v.ConfigMap.Name
		}
	}
	for _, key := range []string{"ConfigMap nodeguard/nodeguard-policy", "ConfigMap nodeguard-agent/" + agentPolicy} {
		if got, _, _ := unstructured.NestedString(get(t, objs, key).Object, "data", "policy.yaml"); got != policyText {
			t.Errorf("%s holds %q, want the given policy", key, got)
		}
	}
	if want := kustomizeName(t, policyText); agentPolicy != want {
		t.Errorf("the agents' policy ConfigMap is %s; kustomize names that content %s", agentPolicy, want)
	}

	rule := get(t, objs, "PrometheusRule nodeguard/nodeguard")
	if rule.GetLabels()["release"] != "monitoring" {
		t.Errorf("PrometheusRule labels %v", rule.GetLabels())
	}
	data, err := rule.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"for":"45m"`) || !strings.Contains(string(data), "for longer than 45m.") {
		t.Errorf("NodeguardNodeLeftCordoned does not wait the 45m set")
	}
	if !strings.Contains(string(data), "{{ $labels") {
		t.Errorf("the alerts' own templates ({{ $labels.node }}) did not survive helm's")
	}
}

// kustomizeName is the name kustomize's configMapGenerator gives the
// agents' policy ConfigMap with the given content.
func kustomizeName(t *testing.T, policy string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	k := "configMapGenerator:\n  - name: nodeguard-policy\n    namespace: nodeguard-agent\n    files: [policy.yaml]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Render(dir)
	if err != nil || len(objs) != 1 {
		t.Fatalf("kustomize: %d objects, %v", len(objs), err)
	}
	return objs[0].GetName()
}

func get(t *testing.T, objs []*unstructured.Unstructured, key string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if Key(o) == key {
			return o
		}
	}
	t.Fatalf("the chart rendered no %s (it rendered %v)", key, Keys(objs))
	return nil
}

func typed[T any](t *testing.T, objs []*unstructured.Unstructured, key string) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(get(t, objs, key).Object, &out, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return &out
}

// TestChartInstallsInTwoSteps: webhook.register=false renders everything
// but the admission webhooks' registration, which an upgrade with true then
// adds, as the kustomize install applies it last.
func TestChartInstallsInTwoSteps(t *testing.T) {
	f := newFixture(t)
	all, err := Template("-f", f.values)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Template("-f", f.values, "--set", "webhook.register=false")
	if err != nil {
		t.Fatal(err)
	}
	const registration = "ValidatingWebhookConfiguration nodeguard"
	want := slices.DeleteFunc(Keys(all), func(k string) bool { return k == registration })
	if got := Keys(first); !slices.Equal(got, want) || len(want) != len(all)-1 {
		t.Errorf("with webhook.register=false the chart renders %v, want everything but the %s: %v", got, registration, want)
	}
}
