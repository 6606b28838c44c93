package authz_test

import (
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// graphAllows asks the apiserver, as the admin, whether node may get the
// ConfigMap. Each question carries a different extra value, so that no
// answer the apiserver cached can stand in for the webhook's: the answer
// is the graph's as of now.
func (s *scenario) graphAllows(node, name string, attempt int) (bool, error) {
	sar, err := s.admin.AuthorizationV1().SubjectAccessReviews().Create(s.ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   contract.NodeUserPrefix + node,
			Groups: []string{"system:nodes", "system:authenticated"},
			Extra:  map[string]authorizationv1.ExtraValue{"nodeguard.dev/e2e-probe": {fmt.Sprint(attempt)}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: s.ns, Verb: "get", Resource: "configmaps", Name: name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// TestReadRightAfterAssignment: a node refused a ConfigMap just before the
// graph learnt of its assignment is not refused again once the graph has it.
// The refusal here comes from a read before the assignment, which leaves in
// the apiserver's cache exactly what a read racing the graph would leave; an
// agent's retry then asks the same question. With refusals cached
// (cacheUnauthorizedRequests, unauthorizedTTL) the retry would be refused
// for the whole TTL although nodeguard would now allow it.
func TestReadRightAfterAssignment(t *testing.T) {
	s := newScenario(t)
	s.configMap("next", true)
	node := s.node("n1", "v1.37.2", "")
	c := s.client(node)

	if _, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "next", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get before the assignment: err = %v, want Forbidden", err)
	}
	refused := time.Now()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, s.ns+"/next")
	if _, err := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	attempt := 0
	s.eventually("the graph allows "+node+" to read next", eventDeadline, func() error {
		attempt++
		allowed, err := s.graphAllows(node, "next", attempt)
		if err == nil && !allowed {
			err = fmt.Errorf("not allowed yet")
		}
		return err
	})
	if _, err := c.CoreV1().ConfigMaps(s.ns).Get(s.ctx, "next", metav1.GetOptions{}); err != nil {
		t.Fatalf("get %v after a refusal, once the graph allows it: %v (a cached refusal served again?)", time.Since(refused).Round(time.Millisecond), err)
	}
}
