package admission_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestRolloutSelector is the rollout selector rule through the shipped
// rollouts.nodeguard.dev webhook: an administrator's rollout that a node
// could join by labelling itself is refused, naming the node-writable keys
// and the label to use instead; one that selects on nodeguard.dev/pool is
// admitted, and changing its selector is judged again while pausing it is
// not. No rollout controller runs here: the rollouts only sit.
func TestRolloutSelector(t *testing.T) {
	h := newHarness(t, env)
	client, err := dynamic.NewForConfig(env.CP.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	rollouts := client.Resource(v1alpha1.SchemeGroupVersion.WithResource("kubeletconfigrollouts"))
	create := func(name string, selector metav1.LabelSelector) error {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.KubeletConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubeletConfigRollout"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.KubeletConfigRolloutSpec{NodeSelector: selector,
				ConfigMapRef: contract.ConfigMapRef{Namespace: configNamespace, Name: "pool-blue"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		delete(obj, "status")
		_, err = rollouts.Create(h.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = rollouts.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		return err
	}

	err = create(h.pfx+"writable", metav1.LabelSelector{MatchLabels: map[string]string{"pool": "blue", "kubernetes.io/os": "linux"}})
	refused(t, "a rollout on node-writable labels", err, `admission webhook "rollouts.nodeguard.dev"`, "nodeguard rollout selector",
		`"kubernetes.io/os", "pool"`, contract.PoolLabel)
	err = create(h.pfx+"negated", metav1.LabelSelector{
		MatchLabels:      map[string]string{"pool": "blue"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: contract.PoolLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gpu"}}},
	})
	refused(t, "a rollout whose protected key is only negated", err, "NotIn or DoesNotExist")

	name := h.pfx + "pool"
	allowed(t, "a rollout on nodeguard.dev/pool", create(name, metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: "blue"}}))
	_, err = rollouts.Patch(h.ctx, name, types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{})
	allowed(t, "pausing it", err)
	_, err = rollouts.Patch(h.ctx, name, types.MergePatchType, []byte(`{"spec":{"nodeSelector":{"matchLabels":{"nodeguard.dev/pool":null,"pool":"blue"}}}}`), metav1.PatchOptions{})
	refused(t, "changing its selector to a node-writable label", err, "nodeguard rollout selector", `"pool"`)
	_, err = rollouts.Patch(h.ctx, name, types.MergePatchType, []byte(`{"spec":{"nodeSelector":{"matchLabels":{"nodeguard.dev/pool":"green"}}}}`), metav1.PatchOptions{})
	allowed(t, "moving it to another pool", err)
}
