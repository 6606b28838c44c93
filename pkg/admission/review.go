package admission

import (
	"context"
	"fmt"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

var reviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// ReviewFunc adapts an Admitter to the HTTP transport. Only a body that is
// not an admission.k8s.io/v1 AdmissionReview with a request is an error;
// every decision, including a panic or a passed deadline, is an answer that
// echoes the request UID.
func ReviewFunc(a *Admitter, metrics *Metrics) func(ctx context.Context, body []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) {
		var review admissionv1.AdmissionReview
		if err := utiljson.Unmarshal(body, &review); err != nil {
			return nil, fmt.Errorf("decoding AdmissionReview: %w", err)
		}
		if gvk := review.GroupVersionKind(); gvk != reviewGVK {
			return nil, fmt.Errorf("expected admission.k8s.io/v1 AdmissionReview, got apiVersion %q kind %q", review.APIVersion, review.Kind)
		}
		if review.Request == nil {
			return nil, fmt.Errorf("AdmissionReview has no request")
		}
		if review.Request.UID == "" {
			return nil, fmt.Errorf("AdmissionReview request has no uid")
		}
		req := review.Request
		start := time.Now()
		result := admitSafely(ctx, a, req)
		metrics.observe(req, result, time.Since(start))
		logDecision(ctx, req, result)
		return &admissionv1.AdmissionReview{
			TypeMeta: review.TypeMeta,
			Response: response(req, result),
		}, nil
	}
}

func response(req *admissionv1.AdmissionRequest, result Result) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: result.Allowed, Warnings: result.Warnings}
	if !result.Allowed {
		resp.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: fmt.Sprintf("nodeguard %s: %s", result.Rule, result.Message),
		}
	}
	return resp
}

func admitSafely(ctx context.Context, a *Admitter, req *admissionv1.AdmissionRequest) (result Result) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Recovered while deciding an AdmissionReview", "uid", req.UID)
			result = refuse(RuleInternal, "internal error while deciding; the request was refused to stay safe")
		}
	}()
	if err := ctx.Err(); err != nil {
		return refuse(RuleInternal, "the request's deadline passed before a decision")
	}
	return a.Admit(ctx, req)
}

func logDecision(ctx context.Context, req *admissionv1.AdmissionRequest, result Result) {
	logger := klog.FromContext(ctx)
	if !result.Allowed {
		logger.V(2).Info("Admission refused", "uid", req.UID, "user", req.UserInfo.Username, "operation", req.Operation,
			"resource", req.Resource.Resource, "subresource", req.SubResource, "namespace", req.Namespace, "name", req.Name,
			"rule", result.Rule, "message", result.Message)
		return
	}
	if v := logger.V(4); v.Enabled() {
		v.Info("Admission allowed", "uid", req.UID, "user", req.UserInfo.Username, "operation", req.Operation,
			"resource", req.Resource.Resource, "subresource", req.SubResource, "namespace", req.Namespace, "name", req.Name,
			"warnings", result.Warnings)
	}
}
