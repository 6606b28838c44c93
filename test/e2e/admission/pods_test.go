package admission_test

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

// mirrorPodOf is a mirror pod bound to node, owned by its Node as a
// kubelet's mirror pods are, with extra volumes.
func (h *harness) mirrorPodOf(node, name string, volumes ...corev1.Volume) *corev1.Pod {
	h.t.Helper()
	n, err := h.admin.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: h.pfx + name,
			Annotations:     map[string]string{"kubernetes.io/config.mirror": "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID, Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Volumes: volumes,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause"}}},
	}
}

func ptr[T any](v T) *T { return &v }

// TestNodePodRules: a node creates only mirror pods bound to itself with no
// references, and deletes only its own pods; a refused pod gives it no read
// of the ConfigMap it named. With NodeRestriction the in-tree plugin
// refuses; without it (the standalone manifests) nodeguard does.
func TestNodePodRules(t *testing.T) {
	for _, e := range []struct {
		name string
		env  *framework.Env
		rule string
	}{{"with NodeRestriction", env, ""}, {"standalone", bare, "node pods"}} {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.env)
			a, b := h.mustRegister("pods-a"), h.mustRegister("pods-b")
			secret := h.mustConfigMap("not-for-a", goodConfig, true)
			secretName := secret[strings.Index(secret, "/")+1:]
			pods := h.nodeClient(a).CoreV1().Pods("default")

			referencing := h.mirrorPodOf(a, "reads-config", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}}}})
			referencing.Namespace = configNamespace
			_, err := h.nodeClient(a).CoreV1().Pods(configNamespace).Create(h.ctx, referencing, metav1.CreateOptions{})
			refused(t, "a mirror pod that references a ConfigMap", err, e.rule)
			if _, err := h.nodeClient(a).CoreV1().ConfigMaps(configNamespace).Get(h.ctx, secretName, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("after the refused pod, %s reads %s: %v", a, secret, err)
			}

			_, err = pods.Create(h.ctx, h.mirrorPodOf(b, "for-b"), metav1.CreateOptions{})
			refused(t, "a mirror pod bound to another node", err, e.rule)

			plain := h.mirrorPodOf(a, "not-mirror")
			delete(plain.Annotations, "kubernetes.io/config.mirror")
			_, err = pods.Create(h.ctx, plain, metav1.CreateOptions{})
			refused(t, "a pod that is not a mirror pod", err, e.rule)

			own, err := pods.Create(h.ctx, h.mirrorPodOf(a, "own"), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("%s creating its own mirror pod: %v", a, err)
			}
			t.Cleanup(func() {
				_ = h.admin.CoreV1().Pods("default").Delete(context.Background(), own.Name, metav1.DeleteOptions{})
			})

			other := h.mirrorPodOf(b, "of-b")
			other, err = h.admin.CoreV1().Pods("default").Create(h.ctx, other, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = h.admin.CoreV1().Pods("default").Delete(context.Background(), other.Name, metav1.DeleteOptions{})
			})
			// In-tree NodeRestriction judges a node's delete from the
			// apiserver's pod informer, and answers NotFound until that has
			// seen the pod: ask again until the answer is about the pod.
			var deleteErr error
			if err := framework.Eventually(h.ctx, 30*time.Second, "NodeRestriction to see "+other.Name, func(ctx context.Context) (bool, string, error) {
				deleteErr = pods.Delete(ctx, other.Name, metav1.DeleteOptions{})
				return !apierrors.IsNotFound(deleteErr), fmt.Sprint(deleteErr), nil
			}); err != nil {
				t.Fatal(err)
			}
			refused(t, "deleting another node's pod", deleteErr, e.rule)
			if _, getErr := h.admin.CoreV1().Pods("default").Get(h.ctx, other.Name, metav1.GetOptions{}); getErr != nil {
				t.Errorf("%s after a refused delete: %v", other.Name, getErr)
			}
			if err := pods.Delete(h.ctx, own.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("%s deleting its own mirror pod: %v", a, err)
			}
		})
	}
}
