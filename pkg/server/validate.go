package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

var admissionReviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// Validate is the /validate endpoint: it reads an admission.k8s.io/v1
// AdmissionReview of at most maxBodyBytes, decides it with a's rules and
// then, when they allow it, with the policies p (nil for none), and answers
// under the request's UID. Only a body that is not such a review with a
// request and a UID gets an HTTP error; every decision, a panic or a passed
// deadline included, is a refusal or an admission over HTTP 200.
func Validate(a *admission.Admitter, p *policy.AdmissionPolicies, maxBodyBytes int64, opts ...ReviewOption) http.Handler {
	v := &validateHandler{admitter: a, policies: p, maxBodyBytes: maxBodyBytes}
	for _, opt := range opts {
		opt(&v.reviewOptions)
	}
	return v
}

type validateHandler struct {
	admitter     *admission.Admitter
	policies     *policy.AdmissionPolicies
	maxBodyBytes int64
	reviewOptions
}

func (v *validateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, body, ok := readReview(w, r, v.maxBodyBytes)
	if !ok {
		return
	}
	defer cancel()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("endpoint", "validate"))
	review, repeated, err := decodeAdmissionReview(body)
	if err == nil {
		err = answerable(review)
	}
	if err != nil {
		badReview(ctx, w, err)
		return
	}
	req := review.Request
	start := time.Now()
	var result admission.Result
	// Observed and answered when deciding ends, a panic included: the
	// apiserver can act on a review, not on an HTTP error.
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Recovered while deciding an AdmissionReview", "uid", req.UID)
			result = admission.Result{Rule: admission.RuleInternal, Message: "internal error while deciding; the request was refused to stay safe"}
		}
		took := time.Since(start)
		v.metrics.observeAdmission(req, result, took)
		logAdmission(ctx, req, result)
		if v.decisionLog.Logs(!result.Allowed) {
			logAdmissionDecision(ctx, req, result, took)
		}
		writeReview(ctx, w, admissionResponse(review, result))
	}()
	decoded, err := admission.DecodeRequest(req)
	switch {
	case repeated != nil:
		result = admission.Result{Rule: admission.RuleMalformed, Message: fmt.Sprintf("the review repeats a key: %v", repeated)}
	case err != nil:
		result = admission.Result{Rule: admission.RuleMalformed, Message: err.Error()}
	case ctx.Err() != nil:
		result = admission.Result{Rule: admission.RuleInternal, Message: "the request's deadline passed before a decision"}
	default:
		result = v.admitter.Admit(ctx, decoded)
		if v.policies == nil || !result.Allowed {
			return
		}
		cfg, old := v.admitter.KubeletConfigsOf(decoded)
		verdict := v.policies.Judge(ctx, req, cfg, old)
		result.Warnings = append(result.Warnings, verdict.Warnings...)
		if verdict.Denied {
			result = admission.Result{Rule: contract.Rule(verdict.Rule), Message: verdict.Message, Warnings: result.Warnings, NodeState: verdict.NodeScoped}
		}
	}
}

// decodeAdmissionReview decodes an AdmissionReview as decodeStrict does;
// its objects stay raw for admission.DecodeRequest.
func decodeAdmissionReview(body []byte) (review *admissionv1.AdmissionReview, repeated error, err error) {
	review = &admissionv1.AdmissionReview{}
	if repeated, err = decodeStrict(body, review); err != nil {
		return nil, nil, fmt.Errorf("decoding AdmissionReview: %w", err)
	}
	return review, repeated, nil
}

// answerable refuses an AdmissionReview /validate cannot answer: of another
// kind, or without a request and a UID to answer under.
func answerable(review *admissionv1.AdmissionReview) error {
	if err := checkKind(review.TypeMeta, admissionReviewGVK); err != nil {
		return err
	}
	if review.Request == nil {
		return errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return errors.New("AdmissionReview request has no uid")
	}
	return nil
}

// admissionResponse is the AdmissionReview answering review with result.
func admissionResponse(review *admissionv1.AdmissionReview, result admission.Result) *admissionv1.AdmissionReview {
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: result.Allowed, Warnings: result.Warnings}
	if !result.Allowed {
		resp.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: result.Rule.Refusal(result.Message),
		}
		if result.NodeState {
			// The apiserver hands this Status to the client as it is
			// (k8s.io/apiserver's webhook/errors.ToStatusErr), where
			// contract.IsNodeStateRefusal reads the cause.
			resp.Result.Details = &metav1.StatusDetails{
				Name:  req.Name,
				Group: req.Resource.Group,
				Kind:  req.Resource.Resource,
				Causes: []metav1.StatusCause{{
					Type:    contract.CauseNodeState,
					Message: "the refusal concerns the Node's own reported state, not what is assigned to it",
				}},
			}
		}
	}
	return &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
}

func logAdmission(ctx context.Context, req *admissionv1.AdmissionRequest, result admission.Result) {
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

// logAdmissionDecision is the decision log's line (--decision-log): who
// asked for what, the outcome, the rule that decided (built-in "rule N
// (...)" or "rollout selector", or "policy <package>/<rule>"; empty when
// allowed), and how long deciding took.
func logAdmissionDecision(ctx context.Context, req *admissionv1.AdmissionRequest, result admission.Result, took time.Duration) {
	outcome := "allowed"
	if !result.Allowed {
		outcome = "refused"
	}
	klog.FromContext(ctx).Info("Decision", "review", "admission", "uid", req.UID,
		"user", req.UserInfo.Username, "groups", req.UserInfo.Groups,
		"operation", req.Operation, "resource", req.Resource.Resource, "subresource", req.SubResource,
		"namespace", req.Namespace, "name", req.Name,
		"outcome", outcome, "rule", string(result.Rule), "message", result.Message, "warnings", len(result.Warnings),
		"latency", took)
}
