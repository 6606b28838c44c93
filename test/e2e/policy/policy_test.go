package policy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const maintenanceLabel = "nodeguard.dev/maintenance"

// forbiddenBy asserts err is the apiserver relaying a webhook refusal whose
// message names who decided.
func forbiddenBy(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s: err = %v, want Forbidden", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %v\ndoes not mention %q", what, err, w)
		}
	}
}

func TestShippedAdmissionPolicies(t *testing.T) {
	s := newScenario(t)
	elsewhere := s.tempNamespace()

	// config_namespaces: the same valid configuration is refused outside
	// the allowed namespaces and accepted inside.
	err := s.createConfigMap(kubeletConfigMap(elsewhere, "kubelet-a", goodConfig, nil))
	forbiddenBy(t, "eligible ConfigMap outside the allowed namespaces", err,
		"nodeguard policy nodeguard.admission/config_namespaces: ", "may not live in namespace "+elsewhere, configNamespace)
	s.mustCreateConfigMap(kubeletConfigMap(configNamespace, s.pfx+"-a", goodConfig, nil))

	// The built-in rules judge first, and their refusal stands.
	err = s.createConfigMap(kubeletConfigMap(elsewhere, "kubelet-b", goodConfig+"maxPodz: 1\n", nil))
	forbiddenBy(t, "invalid configuration outside the allowed namespaces", err, "nodeguard rule 6 (config-content): ", "maxPodz")
	if strings.Contains(err.Error(), "nodeguard policy") {
		t.Fatalf("policies were consulted after a built-in refusal: %v", err)
	}

	// dangerous_fields: a valid but dangerous configuration is refused,
	// and allowed with a warning once annotated.
	dangerous := goodConfig + "readOnlyPort: 10255\nfailSwapOn: false\n"
	err = s.createConfigMap(kubeletConfigMap(configNamespace, s.pfx+"-ro", dangerous, nil))
	forbiddenBy(t, "configuration with a read-only port", err, "nodeguard policy nodeguard.admission/dangerous_fields: ", "readOnlyPort")
	s.warnings.take()
	s.mustCreateConfigMap(kubeletConfigMap(configNamespace, s.pfx+"-ro", dangerous, map[string]string{"nodeguard.dev/allow-dangerous-fields": "true"}))
	warnings := strings.Join(s.warnings.take(), "\n")
	for _, want := range []string{
		"nodeguard policy nodeguard.admission/dangerous_fields: kubelet configuration " + configNamespace + "/" + s.pfx + "-ro sets readOnlyPort, allowed by annotation",
		"nodeguard policy nodeguard.admission/dangerous_fields: kubelet configuration " + configNamespace + "/" + s.pfx + "-ro sets failSwapOn",
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings:\n%s\nlack %q", warnings, want)
		}
	}

	// config_namespaces for assignments: an administrator's assignment from
	// elsewhere is refused, which rule 5 alone lets through with a warning.
	node := s.node("assign", "")
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, elsewhere+"/kubelet-a")
	_, err = s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	forbiddenBy(t, "assignment from outside the allowed namespaces", err,
		"nodeguard policy nodeguard.admission/config_namespaces: ", "Node "+node+" may not be assigned kubelet configuration "+elsewhere+"/kubelet-a")
	patch = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, configNamespace+"/"+s.pfx+"-a")
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("assignment from an allowed namespace: %v", err)
	}
}

// maintenanceScenario is a node assigned a configuration, with a pod of its
// own using another ConfigMap, put in maintenance once it can read both.
type maintenanceScenario struct {
	*scenario
	nodeName, config, appConfig string
	// client is the node's one client: the apiserver caches the webhook's
	// answers per credential, and a kubelet keeps its certificate.
	client kubernetes.Interface
}

func newMaintenanceScenario(t *testing.T) *maintenanceScenario {
	s := &maintenanceScenario{scenario: newScenario(t)}
	s.config, s.appConfig = s.pfx+"-mw", s.pfx+"-app"
	s.mustCreateConfigMap(kubeletConfigMap(configNamespace, s.config, goodConfig, nil))
	s.mustCreateConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: s.appConfig}})
	s.nodeName = s.node("mw", configNamespace+"/"+s.config)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: s.pfx + "-app"},
		Spec: corev1.PodSpec{NodeName: s.nodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.appConfig}}}}}}}
	if _, err := s.admin.CoreV1().Pods(configNamespace).Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Admin.CoreV1().Pods(configNamespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	s.client = s.nodeClient(s.nodeName)
	s.readAllowed(s.client, configNamespace, s.config)
	s.readAllowed(s.client, configNamespace, s.appConfig)

	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, maintenanceLabel)
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, s.nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

const maintenanceDenial = "nodeguard policy nodeguard.authz/maintenance_window: node "

func TestMaintenanceWindowDeniesTheAssignedConfig(t *testing.T) {
	s := newMaintenanceScenario(t)
	c := s.client
	// Past the apiserver's cached Allow of the read above.
	s.readDenied(c, configNamespace, s.config, maintenanceDenial+s.nodeName+" is in a maintenance window")
	// The graph still connects the two: without the policy, this is an Allow.
	st := s.authorize(s.nodeName, configNamespace, s.config)
	if st.Allowed || !st.Denied || !strings.HasPrefix(st.Reason, maintenanceDenial) {
		t.Fatalf("/authorize = %+v, want a policy denial", st)
	}
	// Reads for its pods are left alone.
	if _, err := c.CoreV1().ConfigMaps(configNamespace).Get(s.ctx, s.appConfig, metav1.GetOptions{}); err != nil {
		t.Fatalf("node in maintenance reading its pod's ConfigMap: %v", err)
	}
	// The decision log (--decision-log=denials) names the policy.
	s.eventually("decision logged", reloadDeadline, func() error {
		log := env.WebhookLogTail(400)
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, `"Decision"`) && strings.Contains(line, `user="system:node:`+s.nodeName+`"`) &&
				strings.Contains(line, `decidedBy="policy"`) && strings.Contains(line, "maintenance_window") && strings.Contains(line, "latency=") {
				return nil
			}
		}
		return fmt.Errorf("no decision line for %s in the webhook log", s.nodeName)
	})
}

// TestPolicyDirectoryChangesWithoutRestart breaks the policy directory and
// then changes the maintenance policy, under a running webhook.
func TestPolicyDirectoryChangesWithoutRestart(t *testing.T) {
	s := newMaintenanceScenario(t)
	c := s.client
	s.readDenied(c, configNamespace, s.config, maintenanceDenial)
	started, err := metric("process_start_time_seconds")
	if err != nil {
		t.Fatal(err)
	}
	failures, err := metric("nodeguard_policy_load_errors_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.RemovePolicyFile("broken.rego")
		if err := env.WritePolicyFile("maintenance_window.rego", shipped["maintenance_window.rego"]); err != nil {
			t.Error(err)
		}
	})

	// A file that does not parse: the set in service keeps serving, the
	// webhook stays ready, and the problem shows.
	if err := env.WritePolicyFile("broken.rego", "package nodeguard.authz\n\ndeny contains msg if {\n"); err != nil {
		t.Fatal(err)
	}
	s.eventually("the broken set reported in metrics", reloadDeadline, func() error {
		ok, err := metric("nodeguard_policy_last_load_success")
		if err != nil {
			return err
		}
		errs, err := metric("nodeguard_policy_load_errors_total")
		if err != nil {
			return err
		}
		if ok != 0 || errs <= failures {
			return fmt.Errorf("last_load_success %v, load_errors_total %v (was %v)", ok, errs, failures)
		}
		return nil
	})
	code, body, err := get("/readyz?verbose")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/readyz?verbose with a broken policy file: %d %v\n%s", code, err, body)
	}
	if !strings.Contains(body, "[!]policies degraded: the last good policy set") || !strings.Contains(body, "broken.rego:") || !strings.Contains(body, "[+]policies ok") {
		t.Fatalf("/readyz?verbose does not show the broken file:\n%s", body)
	}
	if st := s.authorize(s.nodeName, configNamespace, s.config); !st.Denied || !strings.HasPrefix(st.Reason, maintenanceDenial) {
		t.Fatalf("with a broken file, /authorize = %+v, want the old set's denial", st)
	}
	_, err = c.CoreV1().ConfigMaps(configNamespace).Get(s.ctx, s.config, metav1.GetOptions{})
	forbiddenBy(t, "read with a broken policy file", err, maintenanceDenial)

	// Fixed, with the maintenance window keyed on another label: the
	// node's label no longer matters.
	if err := env.RemovePolicyFile("broken.rego"); err != nil {
		t.Fatal(err)
	}
	frozen := strings.Replace(shipped["maintenance_window.rego"], `maintenance_window_label := "nodeguard.dev/maintenance"`,
		`maintenance_window_label := "nodeguard.dev/frozen"`, 1)
	if frozen == shipped["maintenance_window.rego"] {
		t.Fatal("maintenance_window.rego no longer defines maintenance_window_label as expected")
	}
	if err := env.WritePolicyFile("maintenance_window.rego", frozen); err != nil {
		t.Fatal(err)
	}
	s.eventually("the fixed set loaded", reloadDeadline, func() error {
		ok, err := metric("nodeguard_policy_last_load_success")
		if err != nil || ok != 1 {
			return fmt.Errorf("last_load_success %v, %v", ok, err)
		}
		if code, body, err := get("/readyz?verbose"); err != nil || code != http.StatusOK || strings.Contains(body, "degraded") {
			return fmt.Errorf("/readyz?verbose %d %v:\n%s", code, err, body)
		}
		return nil
	})
	s.readAllowed(c, configNamespace, s.config)
	if st := s.authorize(s.nodeName, configNamespace, s.config); !st.Allowed || st.Denied {
		t.Fatalf("after the change, /authorize = %+v, want allowed", st)
	}
	if now, err := metric("process_start_time_seconds"); err != nil || now != started {
		t.Fatalf("the webhook restarted (process_start_time_seconds %v, then %v, %v)", started, now, err)
	}
}

// TestEvaluationErrorsFollowTheFailurePolicies adds policies that fail at
// evaluation time: admission fails closed, authorization has no opinion,
// and both say why.
func TestEvaluationErrorsFollowTheFailurePolicies(t *testing.T) {
	s := newScenario(t)
	cfg := s.pfx + "-err"
	s.mustCreateConfigMap(kubeletConfigMap(configNamespace, cfg, goodConfig, nil))
	node := s.node("err", configNamespace+"/"+cfg)
	s.readAllowed(s.nodeClient(node), configNamespace, cfg)

	// Two values for one complete rule: a conflict OPA reports only when
	// both bodies hold, here for this test's objects alone.
	conflict := fmt.Sprintf(`package nodeguard.admission

conflict_test_value := 1 if input.request.name == %[1]q

conflict_test_value := 2 if input.request.name == %[1]q

deny contains "never" if {
	input.request.resource.resource == "configmaps"
	conflict_test_value == 3
}
`, cfg+"-b")
	authzConflict := fmt.Sprintf(`package nodeguard.authz

allow if input.spec.resourceAttributes.name == %[1]q

allow := false if input.spec.resourceAttributes.name == %[1]q
`, cfg)
	t.Cleanup(func() {
		_ = env.RemovePolicyFile("conflict_admission.rego")
		_ = env.RemovePolicyFile("conflict_authz.rego")
	})
	if err := env.WritePolicyFile("conflict_admission.rego", conflict); err != nil {
		t.Fatal(err)
	}
	if err := env.WritePolicyFile("conflict_authz.rego", authzConflict); err != nil {
		t.Fatal(err)
	}

	s.eventually("authorization evaluation error reported", reloadDeadline, func() error {
		st := s.authorize(node, configNamespace, cfg)
		if !st.Allowed || st.Denied || !strings.Contains(st.EvaluationError, "nodeguard policy evaluation failed") {
			return fmt.Errorf("/authorize = %+v, want the built-in Allow with an evaluation error", st)
		}
		return nil
	})
	s.eventually("admission refused on an evaluation error", reloadDeadline, func() error {
		err := s.createConfigMap(kubeletConfigMap(configNamespace, cfg+"-b", goodConfig, nil))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "nodeguard policy evaluation failed: ") &&
			strings.Contains(err.Error(), "fail closed") {
			return nil
		}
		return fmt.Errorf("create answers %v", err)
	})
	if errs, err := metric(`nodeguard_policy_evaluations_total{outcome="error",package="nodeguard.admission"}`); err != nil || errs < 1 {
		t.Errorf("admission evaluation errors counted: %v, %v", errs, err)
	}
	if errs, err := metric(`nodeguard_policy_evaluations_total{outcome="error",package="nodeguard.authz"}`); err != nil || errs < 1 {
		t.Errorf("authorization evaluation errors counted: %v, %v", errs, err)
	}
}
