package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// crdFile is the CRD as shipped; the tests apply it, not a copy.
const crdFile = "manifests/base/crd/nodeguard.dev_kubeletconfigrollouts.yaml"

var crdOnce struct {
	sync.Once
	err error
}

// rolloutClient applies the shipped CRD once for the package, waits until
// the apiserver serves it, and returns a client of its rollouts.
func rolloutClient(t *testing.T) nodeguardclient.KubeletConfigRolloutInterface {
	t.Helper()
	client, err := env.Rollouts()
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() { crdOnce.err = applyCRD(client) })
	if crdOnce.err != nil {
		t.Fatal(crdOnce.err)
	}
	return client
}

func applyCRD(client nodeguardclient.KubeletConfigRolloutInterface) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, crdFile))
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		return err
	}
	ctx := context.Background()
	if err := manifests.Apply(ctx, env.CP.AdminConfig(), []*unstructured.Unstructured{crd}); err != nil {
		return err
	}
	// Established is not enough for the first request to find it, so
	// wait on the resource itself.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}

// ready reports the Node Ready, as its kubelet would.
func (s *scenario) ready(node string) {
	s.t.Helper()
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		s.t.Fatalf("reporting %s Ready: %v", node, err)
	}
}

func (s *scenario) getRollout(client nodeguardclient.KubeletConfigRolloutInterface, name string) *v1alpha1.KubeletConfigRollout {
	s.t.Helper()
	r, err := client.Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// createRollout creates rollout name of the scenario's ConfigMap v3 over
// the scenario's Nodes, deleted when the test ends.
func (s *scenario) createRollout(client nodeguardclient.KubeletConfigRolloutInterface, name string) {
	s.t.Helper()
	r := &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{scenarioLabel: s.ns}},
			ConfigMapRef: contract.ConfigMapRef{Namespace: s.ns, Name: "v3"},
		},
	}
	if _, err := client.Create(s.ctx, r, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = client.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// writeStatus writes the rollout's status as the controller would.
func (s *scenario) writeStatus(client nodeguardclient.KubeletConfigRolloutInterface, name string, st v1alpha1.KubeletConfigRolloutStatus) {
	s.t.Helper()
	r := s.getRollout(client, name)
	st.ObservedGeneration = r.Generation
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration, st.Conditions[i].LastTransitionTime = r.Generation, metav1.Now()
	}
	r.Status = st
	if _, err := client.UpdateStatus(s.ctx, r, metav1.UpdateOptions{}); err != nil {
		s.t.Fatalf("writing the status of %s: %v", name, err)
	}
}

func conditions(progressing, failed string) []metav1.Condition {
	cond := func(kind, spec string) metav1.Condition {
		parts := strings.SplitN(spec, "/", 3)
		return metav1.Condition{Type: kind, Status: metav1.ConditionStatus(parts[0]), Reason: parts[1], Message: parts[2]}
	}
	return []metav1.Condition{
		cond(v1alpha1.ConditionProgressing, progressing),
		cond(v1alpha1.ConditionComplete, "False/RollingOut/1 of 3 Nodes updated"),
		cond(v1alpha1.ConditionFailed, failed),
		cond(v1alpha1.ConditionPaused, "False/NotPaused/spec.paused is false"),
	}
}

// TestRollout drives a KubeletConfigRollout with the plugin against a real
// apiserver serving the shipped CRD. No rollout controller runs: the test
// writes the Nodes' bookkeeping and config-status, and the rollout's
// status, as the controller and the agents would, because what the plugin
// does (read them, judge the Nodes with pkg/rollout, write spec.paused and
// the Nodes' annotations) does not depend on a controller acting; undo's
// wait for one is turned off with --timeout=0.
func TestRollout(t *testing.T) {
	s := newScenario(t)
	client := rolloutClient(t)
	v2, v3 := s.configMap("v2", goodConfig, true), s.configMap("v3", goodConfig, true)
	a, b, c := s.node("a", "v1.37.2"), s.node("b", "v1.37.2"), s.node("c", "v1.37.2")
	name := s.ns

	// a: moved from v2, updated; b: moved from nothing, on trial; c: on v2,
	// its turn to come.
	s.annotate(a, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/v3", contract.RolloutAnnotation: name, contract.PreviousConfigSourceAnnotation: s.ns + "/v2"})
	s.report(a, contract.ConfigStatus{Assigned: pinned(v3), Active: pinned(v3), LastKnownGood: pinned(v3)}, corev1.ConditionTrue, contract.ReasonConfigActive, "active")
	s.annotate(b, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/v3", contract.RolloutAnnotation: name})
	s.report(b, contract.ConfigStatus{Assigned: pinned(v3), Active: pinned(v3), LastKnownGood: nil}, corev1.ConditionFalse, contract.ReasonTrialInProgress, "on trial")
	s.annotate(c, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/v2"})
	s.report(c, contract.ConfigStatus{Assigned: pinned(v2), Active: pinned(v2), LastKnownGood: pinned(v2)}, corev1.ConditionTrue, contract.ReasonConfigActive, "active")
	for _, n := range []string{a, b, c} {
		s.ready(n)
	}

	s.createRollout(client, name)
	s.writeStatus(client, name, v1alpha1.KubeletConfigRolloutStatus{Target: pinned(v3), Selected: 3, Updated: 1, InTrial: 1,
		Conditions: conditions("True/Canary/canary of 1: 1 of 3 Nodes updated; waiting on "+b, "False/NoFailure/no Node has failed")})

	t.Run("status", func(t *testing.T) {
		r := plugin(t, "rollout", "status", name)
		expect(t, "status", r, cli.ExitOK, "State:    Canary (progressing)", "Target:   "+s.ns+"/v3@"+v3.ResourceVersion,
			"Spec:     canary 1, maxUnavailable 1, onFailure Revert, drain Auto, paused false", "Nodes:    3 selected, 1 updated, 1 in trial, 0 failed",
			"waiting on "+b, "NODE ", "STATE ", "LAST-KNOWN-GOOD ", "READY ", "DETAIL")
		states := map[string]string{}
		for _, line := range strings.Split(r.out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], s.ns+"-") {
				states[f[0]] = f[1]
			}
		}
		if states[a] != "Updated" || states[b] != "InTrial" || states[c] != "Pending" {
			t.Errorf("states %v; %s", states, r)
		}

		r = plugin(t, "rollout", "status", name, "-o", "json")
		var doc cli.RolloutStatus
		if r.code != cli.ExitOK {
			t.Fatal(r)
		}
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatal(err)
		}
		// The apiserver defaulted what the spec left out.
		if len(doc.Nodes) != 3 || doc.Nodes[1].State != rollout.StateInTrial || doc.Spec.Canary == nil || *doc.Spec.Canary != 1 || doc.Spec.OnFailure != v1alpha1.FailureRevert {
			t.Errorf("-o json: %+v", doc)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		expect(t, "pause", plugin(t, "rollout", "pause", name), cli.ExitOK, name+": paused")
		got := s.getRollout(client, name)
		if !got.Spec.Paused || !managedBy(got, "kubectl-nodeguard") {
			t.Fatalf("after pause: paused %v, managers %v", got.Spec.Paused, got.ManagedFields)
		}
		gen := got.Generation
		expect(t, "pause again", plugin(t, "rollout", "pause", name), cli.ExitOK, "already paused")
		if again := s.getRollout(client, name); again.Generation != gen {
			t.Errorf("pausing again wrote: generation %d -> %d", gen, again.Generation)
		}
		expect(t, "resume", plugin(t, "rollout", "resume", name), cli.ExitOK, name+": resumed")
		if s.getRollout(client, name).Spec.Paused {
			t.Error("still paused after resume")
		}
		expect(t, "resume again", plugin(t, "rollout", "resume", name), cli.ExitOK, "already resumed")
	})

	t.Run("watch ends on failure with exit 3", func(t *testing.T) {
		r := plugin(t, "rollout", "status", name, "--watch", "--timeout=1s")
		if r.code != cli.ExitError || !strings.Contains(r.errOut, "timed out after 1s") || !strings.Contains(r.out, "Waiting for rollout") {
			t.Fatalf("a rollout still progressing: %s", r)
		}
		s.writeStatus(client, name, v1alpha1.KubeletConfigRolloutStatus{Target: pinned(v3), Selected: 3, Updated: 1, Failed: 1,
			Conditions: conditions("False/Halted/failed; onFailure is Halt", "True/TrialFailed/Node "+b+": TrialFailed: kubelet unhealthy")})
		r = plugin(t, "rollout", "status", name, "-w")
		if r.code != cli.ExitRolloutFailed || !strings.Contains(r.errOut, "TrialFailed") || !strings.Contains(r.out, "State:    Halted") {
			t.Fatalf("a failed rollout: %s", r)
		}
	})

	t.Run("undo", func(t *testing.T) {
		r := plugin(t, "rollout", "undo", name, "--dry-run")
		expect(t, "undo --dry-run", r, cli.ExitOK, "would be paused", "node/"+a+": "+s.ns+"/v3 -> "+s.ns+"/v2: would be reverted", "nothing was sent")
		if src, _ := s.assignment(a); src != s.ns+"/v3" || s.getRollout(client, name).Spec.Paused {
			t.Fatalf("--dry-run changed something: %s, %v", src, s.getRollout(client, name).Spec.Paused)
		}
		r = plugin(t, "rollout", "undo", name, "--dry-run=server")
		expect(t, "undo --dry-run=server", r, cli.ExitOK, "pause accepted by the server (dry run)", "node/"+b+": "+s.ns+"/v3 -> local: accepted by the server (dry run)")
		if src, _ := s.assignment(a); src != s.ns+"/v3" || s.getRollout(client, name).Spec.Paused {
			t.Fatalf("--dry-run=server changed something: %s, %v", src, s.getRollout(client, name).Spec.Paused)
		}

		r = plugin(t, "rollout", "undo", name, "--timeout=0")
		expect(t, "undo", r, cli.ExitOK, name+": paused", "node/"+a+": "+s.ns+"/v3 -> "+s.ns+"/v2: reverted",
			"node/"+b+": "+s.ns+"/v3 -> local: reverted", "2 node(s) moved by the rollout: 2 reverted, 0 left as it is", "stays paused")
		if strings.Contains(r.out, c) {
			t.Errorf("undo mentions %s, which the rollout never moved: %s", c, r)
		}
		if !s.getRollout(client, name).Spec.Paused {
			t.Error("the rollout is not paused after undo")
		}
		for node, want := range map[string]*string{a: ptr.To(s.ns + "/v2"), b: nil, c: ptr.To(s.ns + "/v2")} {
			n, err := s.admin.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			src, ok := n.Annotations[contract.ConfigSourceAnnotation]
			if ok != (want != nil) || (ok && src != *want) {
				t.Errorf("%s: config-source %q (present %v), want %v", node, src, ok, want)
			}
			for _, key := range []string{contract.RolloutAnnotation, contract.PreviousConfigSourceAnnotation} {
				if v, ok := n.Annotations[key]; ok {
					t.Errorf("%s: %s=%q left behind", node, key, v)
				}
			}
		}
		expect(t, "undo again", plugin(t, "rollout", "undo", name, "--timeout=0"), cli.ExitOK, "already paused", "nothing to undo")
	})
}

func managedBy(r *v1alpha1.KubeletConfigRollout, manager string) bool {
	for _, f := range r.ManagedFields {
		if f.Manager == manager {
			return true
		}
	}
	return false
}
