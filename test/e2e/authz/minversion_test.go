package authz_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// oldNodeWithSecret registers, as an administrator, a Node whose kubelet is
// older than the minimum, and a pod bound to it that mounts a Secret: the
// Node authorizer lets that node read the Secret.
func oldNodeWithSecret(t *testing.T, e *framework.Env) (node, ns string) {
	t.Helper()
	ctx := t.Context()
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	ns, node = "minv-"+suffix, "minv-old-"+suffix
	if _, err := e.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := e.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	created.Status.NodeInfo.KubeletVersion = "v1.29.9"
	if _, err := e.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}}}
	if _, err := e.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return node, ns
}

// authorizeReviews is how many SubjectAccessReviews the webhook answered.
func authorizeReviews(t *testing.T, e *framework.Env) float64 {
	t.Helper()
	v, err := e.WebhookMetricSum("nodeguard_http_requests_total{", `endpoint="/authorize"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMinimumVersionOnEveryRequest: with the opt-in authorization
// configuration, a kubelet below the minimum is denied what the Node
// authorizer would give it (its pod's Secret) and keeps its own Node; with
// the shipped one, that read never reaches nodeguard, which judges only
// nodes' ConfigMap requests, and the Node authorizer decides it.
func TestMinimumVersionOnEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        *framework.Env
		wantDenied bool
	}{{"opt-in: every node request", everyRequest, true}, {"shipped: ConfigMaps only", env, false}} {
		t.Run(tc.name, func(t *testing.T) {
			node, ns := oldNodeWithSecret(t, tc.env)
			c, err := tc.env.NodeClient(node)
			if err != nil {
				t.Fatal(err)
			}
			before := authorizeReviews(t, tc.env)
			var last error
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				_, last = c.CoreV1().Secrets(ns).Get(t.Context(), "s", metav1.GetOptions{})
				// The Node authorizer's graph learns of the pod after it is
				// created: until then Forbidden either way.
				if (tc.wantDenied && deniedByNodeguard(last)) || (!tc.wantDenied && last == nil) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			switch {
			case tc.wantDenied && !deniedByNodeguard(last):
				t.Fatalf("the old kubelet read its pod's Secret: %v, want Forbidden by nodeguard", last)
			case !tc.wantDenied && last != nil:
				t.Fatalf("the old kubelet's pod's Secret: %v, want the Node authorizer to allow it", last)
			}
			if _, err := c.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{}); err != nil {
				t.Fatalf("the old kubelet reading its own Node: %v", err)
			}
			reached := authorizeReviews(t, tc.env) - before
			if tc.wantDenied && reached == 0 {
				t.Error("the webhook was never asked")
			}
			if !tc.wantDenied && reached != 0 {
				t.Errorf("%v requests of the node reached the webhook; only ConfigMap requests should", reached)
			}
		})
	}
}

// deniedByNodeguard: Forbidden, with nodeguard's reason for a kubelet below
// the minimum (the apiserver passes each authorizer's reason on).
func deniedByNodeguard(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "older than the minimum")
}
