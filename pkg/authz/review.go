package authz

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/server"
)

const (
	sarAPIVersion = "authorization.k8s.io/v1"
	sarKind       = "SubjectAccessReview"
)

// ReasonMalformed denies a review that repeats a key: the apiserver never
// sends one, and no reading of it can be trusted.
const ReasonMalformed = "malformed SubjectAccessReview: it repeats a key"

// response is the SubjectAccessReview answering out.
func response(out outcome) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: sarAPIVersion, Kind: sarKind},
		Status: authorizationv1.SubjectAccessReviewStatus{
			Allowed:         out.Decision == Allow,
			Denied:          out.Decision == Deny,
			Reason:          out.Reason,
			EvaluationError: out.evalErr,
		},
	}
}

// ReviewOption adds to what ReviewFunc does.
type ReviewOption func(*reviewConfig)

type reviewConfig struct {
	policies    *Policies
	decisionLog server.DecisionLog
}

// WithPolicies judges reviews by the Rego policies too, after the built-in
// rules (see Policies for how they combine); nil leaves the built-in rules
// alone.
func WithPolicies(p *Policies) ReviewOption { return func(c *reviewConfig) { c.policies = p } }

// WithDecisionLog logs one structured line per decision that l selects;
// a Deny counts as a denial, no opinion does not.
func WithDecisionLog(l server.DecisionLog) ReviewOption {
	return func(c *reviewConfig) { c.decisionLog = l }
}

// ReviewFunc adapts an Authorizer to the HTTP transport: it decodes a
// SubjectAccessReview, decides it and returns the answer. Only a body that
// is not an authorization.k8s.io/v1 SubjectAccessReview is an error; a
// panic while deciding becomes "no opinion" with an evaluation error, since
// the apiserver turns anything but a well-formed review into a 500 for the
// node.
func ReviewFunc(a *Authorizer, metrics *Metrics, opts ...ReviewOption) func(ctx context.Context, body []byte) (any, error) {
	var cfg reviewConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	return func(ctx context.Context, body []byte) (any, error) {
		sar, repeated, err := decodeReview(body)
		if err != nil {
			return nil, fmt.Errorf("decoding SubjectAccessReview: %w", err)
		}
		if sar.APIVersion != sarAPIVersion || sar.Kind != sarKind {
			return nil, fmt.Errorf("expected %s, got apiVersion %q kind %q",
				"authorization.k8s.io/v1 SubjectAccessReview", sar.APIVersion, sar.Kind)
		}
		start := time.Now()
		var out outcome
		if repeated == nil {
			out = decideSafely(ctx, a, cfg.policies, &sar.Spec)
		} else {
			out = outcome{Result: Result{Deny, ReasonMalformed}, evalErr: repeated.Error()}
		}
		took := time.Since(start)
		metrics.observe(out.Decision)
		if v := klog.FromContext(ctx).V(4); v.Enabled() {
			v.Info("Authorization decision", "user", sar.Spec.User, "attributes", sar.Spec.ResourceAttributes,
				"decision", out.Decision.String(), "reason", out.Reason)
		}
		if cfg.decisionLog.Logs(out.Decision == Deny) {
			logDecisionLine(ctx, &sar.Spec, out, took)
		}
		return response(out), nil
	}
}

// decideSafely decides with the built-in rules, then with the policies; a
// panic in either becomes no opinion with an evaluation error.
func decideSafely(ctx context.Context, a *Authorizer, policies *Policies, spec *authorizationv1.SubjectAccessReviewSpec) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Recovered while deciding a SubjectAccessReview", "user", spec.User)
			out = outcome{Result: Result{NoOpinion, ReasonInternalError}, evalErr: "internal error in nodeguard authorizer"}
		}
	}()
	if err := ctx.Err(); err != nil {
		return outcome{Result: Result{NoOpinion, ReasonTimedOut}, evalErr: "request deadline passed before a decision"}
	}
	builtin := a.Authorize(spec)
	if policies == nil {
		return outcome{Result: builtin}
	}
	return policies.decide(ctx, spec, builtin)
}

// logDecisionLine is the decision log's line (--decision-log): who asked
// for what, the decision, what decided it (the built-in rules or a policy)
// with its reason, and how long deciding took.
func logDecisionLine(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec, out outcome, took time.Duration) {
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
