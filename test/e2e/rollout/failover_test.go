package rollout_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitLeader waits until a running replica other than notID holds the
// Lease and says it leads, and returns it.
func waitLeader(t *testing.T, notID string) *framework.RolloutController {
	t.Helper()
	var leader *framework.RolloutController
	err := framework.Eventually(t.Context(), waitTimeout, "a leader other than "+notID, func(ctx context.Context) (bool, string, error) {
		lease, err := env.Admin.CoordinationV1().Leases(framework.RolloutControllerNamespace).Get(ctx, framework.RolloutControllerLease, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, c := range controllers {
			if c.Identity != holder || holder == notID || !c.Running() {
				continue
			}
			leading, err := c.Leading()
			if err == nil && leading {
				leader = c
				return true, "", nil
			}
		}
		return false, "Lease held by " + holder, nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, controllerLogs())
	}
	return leader
}

// TestLeaderFailover: the leading replica SIGKILLed mid-rollout (a Node in
// its trial, others not yet assigned) is replaced by the other through the
// Lease, which finishes the rollout from what the Nodes and the status say;
// no Node is assigned twice: each Node's kubelet, by its unit's journal,
// started with the target configuration exactly once.
func TestLeaderFailover(t *testing.T) {
	settle(t, blue...)
	skip := map[string]int{}
	for _, name := range blue {
		skip[name] = journalLen(t, name)
	}
	leader := waitLeader(t, "")
	cm := configMap(t, "failover-73", "maxPods: 73\n")
	createRollout(t, "failover", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 1})
	waitRollout(t, "failover", "a Node in trial after the canary", func(r *v1alpha1.KubeletConfigRollout) bool {
		return r.Status.Updated >= 1 && r.Status.InTrial >= 1 && r.Status.Updated < int32(len(blue))
	})
	leader.Kill()
	t.Cleanup(func() {
		if err := leader.Start(context.Background()); err != nil {
			t.Errorf("restarting %s: %v", leader.Identity, err)
		}
	})
	next := waitLeader(t, leader.Identity)
	t.Logf("%s killed; %s leads", leader.Identity, next.Identity)
	waitRollout(t, "failover", "Complete under the new leader", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, "")
	})
	waitRuns(t, blue, cm)
	for _, name := range blue {
		if n := startsWithCurrentFile(t, name, skip[name]); n != 1 {
			restarts, _ := nodes[name].KubeletRestarts()
			t.Errorf("%s: the kubelet started %d times with the target's configuration, want once: %s", name, n, fmt.Sprint(restarts[skip[name]:]))
		}
	}
}
