package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	nodeguardfake "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/fake"
)

// rolloutPatches lists the patches of rollouts the fake clientset got.
func rolloutPatches(rollouts *nodeguardfake.Clientset) []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range rollouts.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, p)
		}
	}
	return out
}

func pausedOf(t *testing.T, rollouts *nodeguardfake.Clientset, name string) bool {
	t.Helper()
	r, err := rollouts.NodeguardV1alpha1().KubeletConfigRollouts().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Spec.Paused
}

func TestRolloutPauseResume(t *testing.T) {
	kube := fake.NewClientset()
	rollouts := newRollouts(testRollout("pool-blue", rollingOut))

	r := runFakeClients(t, kube, rollouts, "rollout", "pause", "pool-blue")
	if r.code != ExitOK || r.out != "kubeletconfigrollout.nodeguard.dev/pool-blue: paused\n" || !pausedOf(t, rollouts, "pool-blue") {
		t.Fatalf("pause: exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
	p := rolloutPatches(rollouts)
	if len(p) != 1 || p[0].GetPatchType() != types.MergePatchType || string(p[0].GetPatch()) != `{"spec":{"paused":true}}` {
		t.Fatalf("patches %v", p)
	}
	if opts, ok := p[0].(k8stesting.PatchActionImpl); !ok || opts.PatchOptions.FieldManager != fieldManager {
		t.Errorf("patch options %+v", p[0])
	}

	// Again: nothing written, and it says so.
	r = runFakeClients(t, kube, rollouts, "rollout", "pause", "pool-blue")
	if r.code != ExitOK || !strings.Contains(r.out, "already paused (spec.paused is true); nothing written") || len(rolloutPatches(rollouts)) != 1 {
		t.Fatalf("pause again: exit %d, out %q, %d patches", r.code, r.out, len(rolloutPatches(rollouts)))
	}

	r = runFakeClients(t, kube, rollouts, "rollout", "resume", "pool-blue")
	if r.code != ExitOK || r.out != "kubeletconfigrollout.nodeguard.dev/pool-blue: resumed\n" || pausedOf(t, rollouts, "pool-blue") {
		t.Fatalf("resume: exit %d, out %q", r.code, r.out)
	}
	r = runFakeClients(t, kube, rollouts, "rollout", "resume", "pool-blue")
	if r.code != ExitOK || !strings.Contains(r.out, "already resumed (spec.paused is false)") || len(rolloutPatches(rollouts)) != 2 {
		t.Fatalf("resume again: exit %d, out %q", r.code, r.out)
	}
}

func TestRolloutResumeOfAFailedRollout(t *testing.T) {
	rollouts := newRollouts(testRollout("pool-blue", failedRollout, pausedSpec))
	r := runFakeClients(t, fake.NewClientset(), rollouts, "rollout", "resume", "pool-blue")
	if r.code != ExitOK || !strings.Contains(r.out, "note: the rollout has failed (Node node-b: TrialFailed: kubelet unhealthy) and stays failed") {
		t.Errorf("exit %d, out %q", r.code, r.out)
	}
}

func TestRolloutPauseErrors(t *testing.T) {
	r := runFakeClients(t, fake.NewClientset(), newRollouts(), "rollout", "pause", "nope")
	if r.code != ExitError || !strings.Contains(r.errOut, `KubeletConfigRollout "nope" not found`) {
		t.Errorf("missing: exit %d, err %q", r.code, r.errOut)
	}
	r = runFakeClients(t, fake.NewClientset(), newRollouts(), "rollout", "resume")
	if r.code != ExitError || !strings.Contains(r.errOut, "give the name of one KubeletConfigRollout") {
		t.Errorf("no name: exit %d, err %q", r.code, r.errOut)
	}
}
