package authz

import (
	"context"
	"fmt"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2"
)

var sarTypeMeta = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")

// ReviewFunc adapts an Authorizer to the HTTP transport: it decodes a
// SubjectAccessReview, decides it and returns the answer. Only a body that
// is not an authorization.k8s.io/v1 SubjectAccessReview is an error; a
// panic while deciding becomes "no opinion" with an evaluation error, since
// the apiserver turns anything but a well-formed review into a 500 for the
// node.
func ReviewFunc(a *Authorizer, metrics *Metrics) func(ctx context.Context, body []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) {
		var sar authorizationv1.SubjectAccessReview
		if err := utiljson.Unmarshal(body, &sar); err != nil {
			return nil, fmt.Errorf("decoding SubjectAccessReview: %w", err)
		}
		if gvk := sar.GroupVersionKind(); gvk != sarTypeMeta {
			return nil, fmt.Errorf("expected %s, got apiVersion %q kind %q",
				"authorization.k8s.io/v1 SubjectAccessReview", sar.APIVersion, sar.Kind)
		}
		result, evalErr := decideSafely(ctx, a, &sar.Spec)
		metrics.observe(result.Decision)
		resp := &authorizationv1.SubjectAccessReview{}
		resp.APIVersion, resp.Kind = sar.APIVersion, sar.Kind
		resp.Status = authorizationv1.SubjectAccessReviewStatus{
			Allowed:         result.Decision == Allow,
			Denied:          result.Decision == Deny,
			Reason:          result.Reason,
			EvaluationError: evalErr,
		}
		if v := klog.FromContext(ctx).V(4); v.Enabled() {
			v.Info("Authorization decision", "user", sar.Spec.User, "attributes", sar.Spec.ResourceAttributes,
				"decision", result.Decision.String(), "reason", result.Reason)
		}
		return resp, nil
	}
}

func decideSafely(ctx context.Context, a *Authorizer, spec *authorizationv1.SubjectAccessReviewSpec) (result Result, evalErr string) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Recovered while deciding a SubjectAccessReview", "user", spec.User)
			result, evalErr = Result{NoOpinion, ReasonInternalError}, "internal error in nodeguard authorizer"
		}
	}()
	if err := ctx.Err(); err != nil {
		return Result{NoOpinion, ReasonTimedOut}, "request deadline passed before a decision"
	}
	return a.Authorize(spec), ""
}
