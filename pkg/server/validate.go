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

// Validate is the /validate review: it decodes an admission.k8s.io/v1
// AdmissionReview, decides it with a's built-in rules and then, when they
// allow it, with the policies p (nil for none), and answers under the
// request's UID. Only a body that is not such a review with a request and
// a UID is an error; every decision, a panic or a passed deadline
// included, is a refusal or an admission.
func Validate(a *admission.Admitter, p *policy.AdmissionPolicies, opts ...ReviewOption) ReviewFunc {
	var o reviewOptions
	for _, opt := range opts {
		opt(&o)
	}
	return newValidateReview(a, p, o).answer
}

func newValidateReview(a *admission.Admitter, p *policy.AdmissionPolicies, o reviewOptions) *review[*admissionv1.AdmissionReview, admission.Result] {
	rv := &review[*admissionv1.AdmissionReview, admission.Result]{
		kind:   "an AdmissionReview",
		decode: decodeValidAdmissionReview,
		malformed: func(_ *admissionv1.AdmissionReview, repeated error) admission.Result {
			return admission.Result{Rule: admission.RuleMalformed, Message: fmt.Sprintf("the review repeats a key: %v", repeated)}
		},
		failed: func(_ *admissionv1.AdmissionReview, why failure) admission.Result {
			if why == deadlinePassed {
				return admission.Result{Rule: admission.RuleInternal, Message: "the request's deadline passed before a decision"}
			}
			return admission.Result{Rule: admission.RuleInternal, Message: "internal error while deciding; the request was refused to stay safe"}
		},
		builtin: func(ctx context.Context, r *admissionv1.AdmissionReview) admission.Result {
			return a.Admit(ctx, r.Request)
		},
		observe: func(ctx context.Context, r *admissionv1.AdmissionReview, result admission.Result, took time.Duration) {
			o.metrics.observeAdmission(r.Request, result, took)
			logAdmission(ctx, r.Request, result)
		},
		denied:      func(result admission.Result) bool { return !result.Allowed },
		logLine:     logAdmissionDecision,
		encode:      admissionResponse,
		who:         func(r *admissionv1.AdmissionReview) []any { return []any{"uid", r.Request.UID} },
		decisionLog: o.decisionLog,
	}
	if p != nil {
		rv.policies = func(ctx context.Context, r *admissionv1.AdmissionReview, builtin admission.Result) admission.Result {
			if !builtin.Allowed {
				return builtin
			}
			cfg, old := a.KubeletConfigsOf(r.Request)
			v := p.Judge(ctx, r.Request, cfg, old)
			warnings := append(builtin.Warnings, v.Warnings...)
			if !v.Denied {
				builtin.Warnings = warnings
				return builtin
			}
			return admission.Result{Rule: contract.Rule(v.Rule), Message: v.Message, Warnings: warnings, NodeState: v.NodeScoped}
		}
	}
	return rv
}

// decodeValidAdmissionReview decodes an AdmissionReview that /validate can
// answer: of its kind, with a request and a UID to answer under.
func decodeValidAdmissionReview(body []byte) (*admissionv1.AdmissionReview, error, error) {
	review, repeated, err := decodeAdmissionReview(body)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding AdmissionReview: %w", err)
	}
	if err := checkKind(review.TypeMeta, admissionReviewGVK); err != nil {
		return nil, nil, err
	}
	if review.Request == nil {
		return nil, nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, nil, errors.New("AdmissionReview request has no uid")
	}
	return review, repeated, nil
}

// decodeAdmissionReview decodes an AdmissionReview as decodeStrict does. A
// repeated key anywhere in it, the objects it carries included, is
// repeated: the review is still answered, under its UID, but never decided.
func decodeAdmissionReview(body []byte) (review *admissionv1.AdmissionReview, repeated error, err error) {
	review = &admissionv1.AdmissionReview{}
	strict, err := decodeStrict(body, review)
	if err != nil {
		return nil, nil, err
	}
	if req := review.Request; req != nil {
		// The objects are raw JSON to the review's type; they are held to
		// the same rule, at any depth.
		for _, embedded := range []struct {
			name string
			raw  []byte
		}{{"request.object", req.Object.Raw}, {"request.oldObject", req.OldObject.Raw}, {"request.options", req.Options.Raw}} {
			if len(embedded.raw) == 0 {
				continue
			}
			var v any
			inner, err := decodeStrict(embedded.raw, &v)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", embedded.name, err)
			}
			for _, e := range inner {
				strict = append(strict, fmt.Errorf("%s: %w", embedded.name, e))
			}
		}
	}
	return review, errors.Join(strict...), nil
}

// admissionResponse is the AdmissionReview answering review with result.
func admissionResponse(review *admissionv1.AdmissionReview, result admission.Result) any {
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
func logAdmissionDecision(ctx context.Context, review *admissionv1.AdmissionReview, result admission.Result, took time.Duration) {
	req := review.Request
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
