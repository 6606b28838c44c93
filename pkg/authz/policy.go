package authz

import (
	"context"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// Reasons for decisions the policies changed.
const (
	// ReasonPolicyAllow is the reason when a policy's allow turned the
	// built-in rules' "no path" into an Allow.
	ReasonPolicyAllow = "nodeguard policy " + policy.PackageAuthz + "/allow: a policy allows this ConfigMap read, for which the graph has no path"
	// reasonPolicyEvaluation starts the reason and the evaluation error of
	// a review whose policies could not be evaluated.
	reasonPolicyEvaluation = "nodeguard policy evaluation failed"
)

// PolicyEvaluator evaluates the authorization policies; *policy.Engine is
// one.
type PolicyEvaluator interface {
	EvalAuthz(ctx context.Context, in *policy.AuthzInput) (policy.AuthzResult, error)
}

// Policies are the Rego policies judged after the built-in rules, for
// requests from nodes that the built-in rules did not deny. They combine
// conservatively:
//
//   - a policy deny turns Allow or no opinion into Deny, with the policy's
//     package, rule and message as the reason;
//   - a policy allow turns no opinion into Allow only where the built-in
//     rules found a named node's read (get, or list/watch by name) of a named
//     ConfigMap with no path in a synced graph. Everywhere else (other
//     resources, writes, unnamed lists, non-resource paths, a graph not
//     synced yet, a user in system:nodes that names no node) it is ignored,
//     so that policies cannot widen a node's rights beyond ConfigMap reads,
//     which the in-tree Node authorizer and RBAC would otherwise decide;
//   - users that are not nodes are never judged by policies, as docs/reference.md
//     answers them without looking further.
type Policies struct {
	Engine PolicyEvaluator
	// Graph gives the requesting node's kubelet version and labels; nil
	// leaves them empty.
	Graph policy.GraphReader
	// FailurePolicy says what a failed evaluation means: policy.NoOpinion
	// (the webhook's default) leaves the built-in decision alone and reports
	// the error in the review's evaluationError; policy.FailClosed denies.
	// The zero value is policy.FailClosed.
	FailurePolicy policy.FailurePolicy
}

// outcome is a decision and where it came from.
type outcome struct {
	Result
	// byPolicy is true when a policy (or its failure) made the decision.
	byPolicy bool
	// evalErr goes into the review's status.evaluationError.
	evalErr string
}

// decide judges a review whose built-in decision is builtin.
func (p *Policies) decide(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec, builtin Result) outcome {
	if builtin.Decision == Deny {
		return outcome{Result: builtin}
	}
	if _, isNode := contract.NodeIdentity(spec.User, spec.Groups); !isNode {
		return outcome{Result: builtin}
	}
	in := &policy.AuthzInput{Spec: spec}
	in.Node, in.KubeletVersion, in.NodeLabels = policy.NodeOf(spec.User, spec.Groups, p.Graph)
	res, err := p.Engine.EvalAuthz(ctx, in)
	if err != nil {
		// Counted by the engine (nodeguard_policy_evaluations_total);
		// logged here with the request it failed for.
		klog.FromContext(ctx).Error(err, "Authorization policies could not be evaluated", "user", spec.User,
			"attributes", spec.ResourceAttributes, "failurePolicy", p.FailurePolicy.String())
		evalErr := reasonPolicyEvaluation + ": " + err.Error()
		if p.FailurePolicy == policy.NoOpinion {
			return outcome{Result: builtin, evalErr: evalErr}
		}
		return outcome{Result: Result{Deny, evalErr + "; denied because authorization policies fail closed"}, byPolicy: true, evalErr: evalErr}
	}
	if res.Denied() {
		return outcome{Result: Result{Deny, denialReason(res.Deny)}, byPolicy: true}
	}
	if res.Allow && builtin.Decision == NoOpinion && builtin.Reason == ReasonNoPath {
		return outcome{Result: Result{Allow, ReasonPolicyAllow}, byPolicy: true}
	}
	return outcome{Result: builtin}
}

// policyName names the policy that produced a violation: "policy
// <package>/<rule>", or "policy <package>" when the policy named no rule.
func policyName(v policy.Violation) string {
	if v.Rule == "" {
		return "policy " + v.Package
	}
	return "policy " + v.Package + "/" + v.Rule
}

// denialReason joins every denial into one reason, each message after its
// policy's name (given once for consecutive messages of one policy).
func denialReason(deny []policy.Violation) string {
	var b strings.Builder
	previous := ""
	for i, v := range deny {
		name := policyName(v)
		switch {
		case i == 0:
			b.WriteString("nodeguard " + name + ": ")
		case name != previous:
			b.WriteString("; " + name + ": ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(v.Message)
		previous = name
	}
	return b.String()
}
