package framework

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// RolloutsResource is the KubeletConfigRollout resource, for a dynamic
// client.
var RolloutsResource = v1alpha1.SchemeGroupVersion.WithResource("kubeletconfigrollouts")

// CreateRollout creates r as the dynamic client's user.
func CreateRollout(ctx context.Context, dyn dynamic.Interface, r *v1alpha1.KubeletConfigRollout) error {
	r = r.DeepCopy()
	r.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubeletConfigRollout"}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return fmt.Errorf("encoding rollout %s: %w", r.Name, err)
	}
	if _, err := dyn.Resource(RolloutsResource).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating rollout %s: %w", r.Name, err)
	}
	return nil
}

// GetRollout reads a rollout.
func GetRollout(ctx context.Context, dyn dynamic.Interface, name string) (*v1alpha1.KubeletConfigRollout, error) {
	u, err := dyn.Resource(RolloutsResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var r v1alpha1.KubeletConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("decoding rollout %s: %w", name, err)
	}
	return &r, nil
}

// DescribeRollout puts a rollout's counts and conditions in one line, for
// a test's failure messages.
func DescribeRollout(r *v1alpha1.KubeletConfigRollout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "selected %d updated %d inTrial %d failed %d", r.Status.Selected, r.Status.Updated, r.Status.InTrial, r.Status.Failed)
	for _, c := range r.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
