package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// startOwnPool starts real nodes of the test's own, named pool-a, pool-b,
// ..., each with the options opts gives it, and labels them (as the
// administrator) into the pool. Everything goes when the test ends.
func startOwnPool(t *testing.T, pool string, count int, opts func(name string, o *framework.NodeOptions)) map[string]*framework.Node {
	t.Helper()
	// Made before the cleanup that stops the nodes is registered, so that
	// it is removed after they stopped writing there.
	root := t.TempDir()
	started := map[string]*framework.Node{}
	t.Cleanup(func() {
		for name, n := range started {
			n.Stop()
			_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	for i := range count {
		name := fmt.Sprintf("%s-%c", pool, 'a'+i)
		o := framework.NodeOptions{Name: name, Binaries: binaries, TrialPeriod: trialPeriod, Dir: filepath.Join(root, name)}
		if opts != nil {
			opts(name, &o)
		}
		n, err := framework.StartNode(t.Context(), env, o)
		if err != nil {
			t.Fatal(err)
		}
		started[name] = n
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{contract.PoolLabel: pool}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Admin.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("labelling %s into pool %s: %v", name, pool, err)
		}
	}
	return started
}

// TestCanaryWhoseFlagShadowsTheTargetFailsTheRollout: the canary's kubelet
// runs with --max-pods=20 on its command line, which wins over any file. A
// rollout of maxPods: 50 fails on it, Failed naming the Node, the field,
// both values and the flag, reverts it, and never touches the other Node.
func TestCanaryWhoseFlagShadowsTheTargetFailsTheRollout(t *testing.T) {
	started := startOwnPool(t, "shadow", 2, func(name string, o *framework.NodeOptions) {
		if name == "shadow-a" {
			o.KubeletArgs = []string{"--max-pods=20"}
		}
	})
	cm := configMap(t, "shadowed", "maxPods: 50\n")
	createRollout(t, "shadowed", rolloutSpec{selector: pool("shadow"), configMap: cm.Name})
	r := waitRollout(t, "shadowed", "Failed and reverted", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionFailed, v1alpha1.ReasonTrialFailed) && progressing(r, v1alpha1.ReasonReverted)
	})
	msg := condition(r, v1alpha1.ConditionFailed).Message
	for _, want := range []string{"Node shadow-a", "maxPods: 50 asked, 20 running", "set by the kubelet's command line: --max-pods=20"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Failed does not say %q: %s", want, msg)
		}
	}
	if got := source(t, "shadow-a"); got != "<absent>" {
		t.Errorf("the canary was not reverted: config-source %q", got)
	}
	if got := source(t, "shadow-b"); got != "<absent>" {
		t.Errorf("shadow-b was assigned %q", got)
	}
	if restarts, err := started["shadow-b"].KubeletRestarts(); err != nil || len(restarts) != 1 {
		t.Errorf("shadow-b's kubelet was restarted: %v %v", restarts, err)
	}
}

// TestDriftAfterCompleteIsNodesDegraded: a rollout completes over a pool in
// drop-in mode; then a site drop-in that sorts after the agent's appears on
// one Node and its kubelet is restarted with it. The Node's agent reports
// drift; the rollout counts that Node Degraded (not a failure of the pool:
// nothing is reverted) and says so in a state of its own, NodesDegraded,
// which no progress deadline turns into a stuck rollout.
func TestDriftAfterCompleteIsNodesDegraded(t *testing.T) {
	dirs := map[string]string{}
	started := startOwnPool(t, "drift", 2, func(name string, o *framework.NodeOptions) {
		configDir := filepath.Join(o.Dir, "kubelet", "config.d")
		if err := os.MkdirAll(configDir, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs[name] = configDir
		o.KubeletArgs = []string{"--config-dir=" + configDir}
		o.AgentArgs = []string{"--kubelet-config-mode=drop-in", "--kubelet-config-file=" + filepath.Join(configDir, "90-nodeguard.conf")}
	})
	cm := configMap(t, "drift-57", "maxPods: 57\n")
	deadline := int32(5)
	createRollout(t, "drift", rolloutSpec{selector: pool("drift"), configMap: cm.Name, maxUnavailable: 2})
	patchRollout(t, "drift", map[string]any{"progressDeadlineSeconds": deadline})
	waitRollout(t, "drift", "Complete", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, v1alpha1.ReasonAllNodesUpdated)
	})
	waitPassedMark(t, []string{"drift-a", "drift-b"}, cm)

	site := filepath.Join(dirs["drift-b"], "99-site.conf")
	if err := os.WriteFile(site, []byte(framework.KubeletConfigHeader+"maxPods: 33\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := started["drift-b"].RestartKubeletAsAdmin(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := waitRollout(t, "drift", "NodesDegraded", func(r *v1alpha1.KubeletConfigRollout) bool {
		return progressing(r, v1alpha1.ReasonNodesDegraded)
	})
	c := condition(r, v1alpha1.ConditionProgressing)
	for _, want := range []string{"drift-b (took " + configNamespace + "/drift-57", "ConfigDrifted", "maxPods: 57 asked, 33 running", site} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Progressing does not say %q: %s", want, c.Message)
		}
	}
	if complete := condition(r, v1alpha1.ConditionComplete); complete.Status != metav1.ConditionFalse || complete.Reason != v1alpha1.ReasonNodesDegraded {
		t.Errorf("Complete = %s/%s, want False/NodesDegraded", complete.Status, complete.Reason)
	}
	waitEvent(t, "Node", "drift-b", "NodeFailedOutsideTrial")
	// Past the progress deadline the rollout stays where it is: nothing to
	// assign, nothing reverted, not failed, not stuck.
	holds(t, time.Duration(deadline+3)*time.Second, "NodesDegraded, nothing reverted", func() (bool, string) {
		r, err := getRollout(t.Context(), "drift")
		if err != nil {
			return false, err.Error()
		}
		if !progressing(r, v1alpha1.ReasonNodesDegraded) || isTrue(r, v1alpha1.ConditionFailed, "") {
			return false, describe(r)
		}
		for _, name := range []string{"drift-a", "drift-b"} {
			if got := source(t, name); got != configNamespace+"/"+cm.Name {
				return false, fmt.Sprintf("%s moved to %q", name, got)
			}
		}
		return true, ""
	})
	o, err := started["drift-b"].Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !o.ConditionIs(corev1.ConditionFalse, contract.ReasonConfigDrifted) {
		t.Errorf("drift-b reports %s", o)
	}
}
