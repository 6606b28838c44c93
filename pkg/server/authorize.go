package server

import (
	"context"

	"fmt"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

var subjectAccessReviewGVK = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")

// ReasonMalformedSubjectAccessReview denies a review that repeats a key:
// the apiserver never sends one, and no reading of it can be trusted.
const ReasonMalformedSubjectAccessReview = "malformed SubjectAccessReview: it repeats a key"

// authzOutcome is an authorization decision and where it came from.
type authzOutcome struct {
	authz.Result
	// byPolicy is true when a policy (or its failure) made the decision.
	byPolicy bool
	// evalErr goes into the review's status.evaluationError.
	evalErr string
}

// Authorize is the /authorize endpoint: it reads an
// authorization.k8s.io/v1 SubjectAccessReview of at most maxBodyBytes,
// decides it with a's rules and then, unless they deny it, with the
// policies p (nil for none), and answers. Only a body that is not such a
// review gets an HTTP error; a panic or a passed deadline becomes "no
// opinion" with an evaluation error, since the apiserver turns anything
// but a well-formed review into a 500 for the node.
func Authorize(a *authz.Authorizer, p *policy.AuthzPolicies, maxBodyBytes int64, opts ...ReviewOption) http.Handler {
	h := &authorizeHandler{authorizer: a, policies: p, maxBodyBytes: maxBodyBytes}
	for _, opt := range opts {
		opt(&h.reviewOptions)
	}
	return h
}

type authorizeHandler struct {
	authorizer   *authz.Authorizer
	policies     *policy.AuthzPolicies
	maxBodyBytes int64
	reviewOptions
}

func (h *authorizeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, body, ok := readReview(w, r, h.maxBodyBytes)
	if !ok {
		return
	}
	defer cancel()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("endpoint", "authorize"))
	sar, repeated, err := decodeSubjectAccessReview(body)
	if err == nil {
		err = checkKind(sar.TypeMeta, subjectAccessReviewGVK)
	}
	if err != nil {
		badReview(ctx, w, err)
		return
	}
	spec := &sar.Spec
	start := time.Now()
	var out authzOutcome
	// Observed and answered when deciding ends, a panic included: the
	// apiserver can act on a review, not on an HTTP error.
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Recovered while deciding a SubjectAccessReview", "user", spec.User)
			out = authzOutcome{Result: authz.Result{Decision: authz.NoOpinion, Reason: authz.ReasonInternalError}, evalErr: "internal error in nodeguard authorizer"}
		}
		h.metrics.observeAuthorization(out.Decision)
		if v := klog.FromContext(ctx).V(4); v.Enabled() {
			v.Info("Authorization decision", "user", spec.User, "attributes", spec.ResourceAttributes,
				"decision", out.Decision.String(), "reason", out.Reason)
		}
		if h.decisionLog.Logs(out.Decision == authz.Deny) {
			logAuthorizationDecision(ctx, spec, out, time.Since(start))
		}
		writeReview(ctx, w, authorizationResponse(out))
	}()
	switch {
	case repeated != nil:
		out = authzOutcome{Result: authz.Result{Decision: authz.Deny, Reason: ReasonMalformedSubjectAccessReview}, evalErr: repeated.Error()}
	case ctx.Err() != nil:
		out = authzOutcome{Result: authz.Result{Decision: authz.NoOpinion, Reason: authz.ReasonTimedOut}, evalErr: "request deadline passed before a decision"}
	default:
		out.Result = h.authorizer.Authorize(spec)
		if h.policies == nil || out.Decision == authz.Deny {
			return
		}
		v := h.policies.Judge(ctx, spec)
		switch {
		case v.Denied:
			out = authzOutcome{Result: authz.Result{Decision: authz.Deny, Reason: v.Reason}, byPolicy: true, evalErr: v.EvaluationError}
		case v.Allowed && out.Decision == authz.NoOpinion && out.Reason == authz.ReasonNoPath:
			// The one place a policy may grant: a named node's read of a
			// named ConfigMap with no path in a synced, fresh graph.
			out = authzOutcome{Result: authz.Result{Decision: authz.Allow, Reason: v.Reason}, byPolicy: true}
		default:
			out.evalErr = v.EvaluationError
		}
	}
}

// decodeSubjectAccessReview decodes a SubjectAccessReview as decodeStrict
// does; a repeated key anywhere in it is repeated, answered with a Deny.
func decodeSubjectAccessReview(body []byte) (sar *authorizationv1.SubjectAccessReview, repeated error, err error) {
	sar = &authorizationv1.SubjectAccessReview{}
	if repeated, err = decodeStrict(body, sar); err != nil {
		return nil, nil, fmt.Errorf("decoding SubjectAccessReview: %w", err)
	}
	return sar, repeated, nil
}

// authorizationResponse is the SubjectAccessReview answering out.
func authorizationResponse(out authzOutcome) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: subjectAccessReviewGVK.GroupVersion().String(), Kind: subjectAccessReviewGVK.Kind},
		Status: authorizationv1.SubjectAccessReviewStatus{
			Allowed:         out.Decision == authz.Allow,
			Denied:          out.Decision == authz.Deny,
			Reason:          out.Reason,
			EvaluationError: out.evalErr,
		},
	}
}

// logAuthorizationDecision is the decision log's line (--decision-log): who
// asked for what, the decision, what decided it (the built-in rules or a
// policy) with its reason, and how long deciding took.
func logAuthorizationDecision(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec, out authzOutcome, took time.Duration) {
	decidedBy := "built-in"
	if out.byPolicy {
		decidedBy = "policy"
	}
	kv := []any{"review", "authorization", "user", spec.User, "groups", spec.Groups}
	if ra := spec.ResourceAttributes; ra != nil {
		kv = append(kv, "verb", ra.Verb, "group", ra.Group, "resource", ra.Resource, "subresource", ra.Subresource,
			"namespace", ra.Namespace, "name", ra.Name)
	} else if nra := spec.NonResourceAttributes; nra != nil {
		kv = append(kv, "verb", nra.Verb, "path", nra.Path)
	}
	kv = append(kv, "outcome", out.Decision.String(), "decidedBy", decidedBy, "reason", out.Reason)
	if out.evalErr != "" {
		kv = append(kv, "evaluationError", out.evalErr)
	}
	kv = append(kv, "latency", took)
	klog.FromContext(ctx).Info("Decision", kv...)
}
