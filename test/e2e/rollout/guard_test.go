package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// TestGuardedPatchOnTheApiserver: the controller's guarded Node patch
// (rollout.Change.GuardedPatch) as kube-apiserver judges it, on a real
// kubelet's Node. Over a status report since the Node was read, which
// conflicts with the resourceVersion, it applies and keeps the report;
// over a label changed since, its tests fail and the apiserver's answer is
// told a guard failure, apart from a conflict and from a Node found
// invalid.
func TestGuardedPatchOnTheApiserver(t *testing.T) {
	ctx := t.Context()
	client := env.Admin.CoreV1().Nodes()
	name := green[1]
	const key, label = "example.com/guard-test", "example.com/guard-test"
	t.Cleanup(func() {
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null},"labels":{%q:null}}}`, key, label)
		// t.Context() is done by the time cleanups run.
		if _, err := client.Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	seen, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A status report as a kubelet sends it: a heartbeat of Ready, a
	// strategic merge patch of nodes/status.
	heartbeat := time.Now().Add(time.Second).UTC().Truncate(time.Second)
	report := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","lastHeartbeatTime":%q}]}}`, heartbeat.Format(time.RFC3339))
	if _, err := client.Patch(ctx, name, types.StrategicMergePatchType, report, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the status report: %v", err)
	}

	value := "1"
	change := rollout.Change{Node: name, ResourceVersion: seen.ResourceVersion, Annotations: map[string]*string{key: &value}}
	merge, err := change.MergePatch()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Patch(ctx, name, types.MergePatchType, merge, metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("the resourceVersion's guard over the status report: %v, want a conflict", err)
	}
	guarded, ok, err := change.GuardedPatch(seen)
	if err != nil || !ok {
		t.Fatalf("GuardedPatch of a kubelet's Node = %v, %v; want a patch", ok, err)
	}
	applied, err := client.Patch(ctx, name, types.JSONPatchType, guarded, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("the guarded patch over the status report: %v\n%s", err, guarded)
	}
	if applied.Annotations[key] != value {
		t.Errorf("annotation %s = %q after the patch, want %q", key, applied.Annotations[key], value)
	}
	for _, c := range applied.Status.Conditions {
		if c.Type == "Ready" && c.LastHeartbeatTime.Time.Before(heartbeat) {
			t.Errorf("Ready's heartbeat %v after the patch, want the report's %v kept", c.LastHeartbeatTime, heartbeat)
		}
	}

	// A label changed since: what picks the rollouts that select the Node.
	body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"x"}}}`, label)
	if _, err := client.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	value = "2"
	guarded, ok, err = change.GuardedPatch(applied)
	if err != nil || !ok {
		t.Fatalf("GuardedPatch = %v, %v", ok, err)
	}
	_, err = client.Patch(ctx, name, types.JSONPatchType, guarded, metav1.PatchOptions{})
	if !rollout.IsGuardFailure(err) || apierrors.IsConflict(err) {
		t.Errorf("the guarded patch over a changed label: %v (%#v), want a guard failure", err, err)
	}

	// A Node found invalid is the Node's own answer, not a guard's.
	invalid := []byte(`{"metadata":{"annotations":{"not a valid key!":"x"}}}`)
	if _, err := client.Patch(ctx, name, types.MergePatchType, invalid, metav1.PatchOptions{}); !apierrors.IsInvalid(err) || rollout.IsGuardFailure(err) {
		t.Errorf("an invalid annotation: %v, want Invalid and no guard failure", err)
	}
}
