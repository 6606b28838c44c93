package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/server"
)

var reviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// ReviewOption adds to what ReviewFunc does.
type ReviewOption func(*reviewConfig)

type reviewConfig struct {
	policies    *Policies
	decisionLog server.DecisionLog
}

// WithPolicies judges the requests the built-in rules allow by the Rego
// policies too; nil leaves the built-in rules alone.
func WithPolicies(p *Policies) ReviewOption { return func(c *reviewConfig) { c.policies = p } }

// WithDecisionLog logs one structured line per decision that l selects.
func WithDecisionLog(l server.DecisionLog) ReviewOption {
	return func(c *reviewConfig) { c.decisionLog = l }
}

// ReviewFunc adapts an Admitter to the HTTP transport. Only a body that is
// not an admission.k8s.io/v1 AdmissionReview with a request is an error;
// every decision, including a panic or a passed deadline, is an answer that
// echoes the request UID.
func ReviewFunc(a *Admitter, metrics *Metrics, opts ...ReviewOption) func(ctx context.Context, body []byte) (any, error) {
	var cfg reviewConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	return func(ctx context.Context, body []byte) (any, error) {
		review, repeated, err := decodeReview(body)
		if err != nil {
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
		var result Result
		if repeated == nil {
			result = admitSafely(ctx, a, cfg.policies, req)
		} else {
			// The apiserver never repeats a key.
			result = refuse(RuleMalformed, "the review repeats a key: %v", repeated)
		}
		took := time.Since(start)
		metrics.observe(req, result, took)
		logDecision(ctx, req, result)
		if cfg.decisionLog.Logs(!result.Allowed) {
			logDecisionLine(ctx, req, result, took)
		}
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
	return resp
}

// admitSafely decides with the built-in rules, then, when they allow, with
// the policies; a panic in either refuses the request.
func admitSafely(ctx context.Context, a *Admitter, policies *Policies, req *admissionv1.AdmissionRequest) (result Result) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Recovered while deciding an AdmissionReview", "uid", req.UID)
			result = refuse(RuleInternal, "internal error while deciding; the request was refused to stay safe")
		}
	}()
	if err := ctx.Err(); err != nil {
		return refuse(RuleInternal, "the request's deadline passed before a decision")
	}
	result = a.Admit(ctx, req)
	if !result.Allowed || policies == nil {
		return result
	}
	return policies.admit(ctx, a, req, result)
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

// logDecisionLine is the decision log's line (--decision-log): who asked
// for what, the outcome, the rule that decided (built-in "rule N (...)" or
// "rollout selector", or "policy <package>/<rule>"; empty when allowed), and
// how long deciding took.
func logDecisionLine(ctx context.Context, req *admissionv1.AdmissionRequest, result Result, took time.Duration) {
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
