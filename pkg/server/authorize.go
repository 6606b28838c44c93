package server

import (
	"context"
	"errors"
	"fmt"
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

// Authorize is the /authorize review: it decodes an
// authorization.k8s.io/v1 SubjectAccessReview, decides it with a's built-in
// rules and then, unless they deny it, with the policies p (nil for none),
// and answers. Only a body that is not such a review is an error; a panic
// or a passed deadline becomes "no opinion" with an evaluation error,
// since the apiserver turns anything but a well-formed review into a 500
// for the node.
func Authorize(a *authz.Authorizer, p *policy.AuthzPolicies, opts ...ReviewOption) ReviewFunc {
	var o reviewOptions
	for _, opt := range opts {
		opt(&o)
	}
	return newAuthorizeReview(a, p, o).answer
}

func newAuthorizeReview(a *authz.Authorizer, p *policy.AuthzPolicies, o reviewOptions) *review[*authorizationv1.SubjectAccessReview, authzOutcome] {
	rv := &review[*authorizationv1.SubjectAccessReview, authzOutcome]{
		kind:   "a SubjectAccessReview",
		decode: decodeValidSubjectAccessReview,
		malformed: func(_ *authorizationv1.SubjectAccessReview, repeated error) authzOutcome {
			return authzOutcome{Result: authz.Result{Decision: authz.Deny, Reason: ReasonMalformedSubjectAccessReview}, evalErr: repeated.Error()}
		},
		failed: func(_ *authorizationv1.SubjectAccessReview, why failure) authzOutcome {
			if why == deadlinePassed {
				return authzOutcome{Result: authz.Result{Decision: authz.NoOpinion, Reason: authz.ReasonTimedOut}, evalErr: "request deadline passed before a decision"}
			}
			return authzOutcome{Result: authz.Result{Decision: authz.NoOpinion, Reason: authz.ReasonInternalError}, evalErr: "internal error in nodeguard authorizer"}
		},
		builtin: func(_ context.Context, sar *authorizationv1.SubjectAccessReview) authzOutcome {
			return authzOutcome{Result: a.Authorize(&sar.Spec)}
		},
		observe: func(ctx context.Context, sar *authorizationv1.SubjectAccessReview, out authzOutcome, _ time.Duration) {
			o.metrics.observeAuthorization(out.Decision)
			if v := klog.FromContext(ctx).V(4); v.Enabled() {
				v.Info("Authorization decision", "user", sar.Spec.User, "attributes", sar.Spec.ResourceAttributes,
					"decision", out.Decision.String(), "reason", out.Reason)
			}
		},
		denied:      func(out authzOutcome) bool { return out.Decision == authz.Deny },
		logLine:     logAuthorizationDecision,
		encode:      authorizationResponse,
		who:         func(sar *authorizationv1.SubjectAccessReview) []any { return []any{"user", sar.Spec.User} },
		decisionLog: o.decisionLog,
	}
	if p != nil {
		rv.policies = func(ctx context.Context, sar *authorizationv1.SubjectAccessReview, builtin authzOutcome) authzOutcome {
			if builtin.Decision == authz.Deny {
				return builtin
			}
			v := p.Judge(ctx, &sar.Spec)
			switch {
			case v.Denied:
				return authzOutcome{Result: authz.Result{Decision: authz.Deny, Reason: v.Reason}, byPolicy: true, evalErr: v.EvaluationError}
			case v.Allowed && builtin.Decision == authz.NoOpinion && builtin.Reason == authz.ReasonNoPath:
				// The one place a policy may grant: a named node's read of a
				// named ConfigMap with no path in a synced, fresh graph.
				return authzOutcome{Result: authz.Result{Decision: authz.Allow, Reason: v.Reason}, byPolicy: true}
			}
			builtin.evalErr = v.EvaluationError
			return builtin
		}
	}
	return rv
}

// decodeValidSubjectAccessReview decodes a SubjectAccessReview that
// /authorize can answer: of its kind.
func decodeValidSubjectAccessReview(body []byte) (*authorizationv1.SubjectAccessReview, error, error) {
	sar, repeated, err := decodeSubjectAccessReview(body)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding SubjectAccessReview: %w", err)
	}
	if err := checkKind(sar.TypeMeta, subjectAccessReviewGVK); err != nil {
		return nil, nil, err
	}
	return sar, repeated, nil
}

// decodeSubjectAccessReview decodes a SubjectAccessReview as decodeStrict
// does; a repeated key anywhere in it is repeated, answered with a Deny.
func decodeSubjectAccessReview(body []byte) (sar *authorizationv1.SubjectAccessReview, repeated error, err error) {
	sar = &authorizationv1.SubjectAccessReview{}
	strict, err := decodeStrict(body, sar)
	if err != nil {
		return nil, nil, err
	}
	return sar, errors.Join(strict...), nil
}

// authorizationResponse is the SubjectAccessReview answering out.
func authorizationResponse(_ *authorizationv1.SubjectAccessReview, out authzOutcome) any {
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
func logAuthorizationDecision(ctx context.Context, sar *authorizationv1.SubjectAccessReview, out authzOutcome, took time.Duration) {
	spec := &sar.Spec
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
