package policy

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// RuleEvaluationFailed names, in an answer, policies that could not be
// evaluated (an error or a timeout).
const RuleEvaluationFailed = "policy evaluation failed"

// ReasonAuthzAllow is the reason of an Allow that a policy's allow made out
// of the built-in rules' "no path".
const ReasonAuthzAllow = "nodeguard policy " + PackageAuthz + "/allow: a policy allows this ConfigMap read, for which the graph has no path"

// AdmissionEvaluator evaluates the admission policies; *Engine is one.
type AdmissionEvaluator interface {
	EvalAdmission(ctx context.Context, in *AdmissionInput) (AdmissionResult, error)
}

// AuthzEvaluator evaluates the authorization policies; *Engine is one.
type AuthzEvaluator interface {
	EvalAuthz(ctx context.Context, in *AuthzInput) (AuthzResult, error)
}

// AdmissionPolicies are the Rego policies the /validate review judges a
// request by once the built-in rules have allowed it. A policy denial
// refuses the request, naming the policy's package and rule; policy
// warnings join the built-in rules' warnings.
type AdmissionPolicies struct {
	Engine AdmissionEvaluator
	// Graph gives the requesting node's kubelet version and labels; nil
	// leaves them empty.
	Graph GraphReader
	// FailurePolicy says what a failed evaluation means: FailClosed
	// refuses the request (the zero value, and the webhook's default);
	// NoOpinion admits it as the built-in rules decided, with a warning
	// naming the error.
	FailurePolicy FailurePolicy
}

// AdmissionVerdict is what the admission policies say of one request.
type AdmissionVerdict struct {
	// Denied refuses the request under Rule ("policy <package>/<rule>",
	// or RuleEvaluationFailed) with Message.
	Denied  bool
	Rule    string
	Message string
	// Warnings are added to the built-in rules' warnings.
	Warnings []string
	// NodeScoped marks a denial of a Node write that concerns the Node's
	// own state: every denial says "scope": "node".
	NodeScoped bool
}

// Judge evaluates the admission policies for req; cfg and old are the
// kubelet configurations of a ConfigMap write (nil otherwise, or when they
// do not decode).
func (p *AdmissionPolicies) Judge(ctx context.Context, req *admissionv1.AdmissionRequest, cfg, old *kubeletconfigv1beta1.KubeletConfiguration) AdmissionVerdict {
	in := &AdmissionInput{Request: req, KubeletConfig: cfg, OldKubeletConfig: old}
	in.Node, in.KubeletVersion, in.NodeLabels = NodeOf(req.UserInfo.Username, req.UserInfo.Groups, p.Graph)
	res, err := p.Engine.EvalAdmission(ctx, in)
	if err != nil {
		// Counted by the engine (nodeguard_policy_evaluations_total);
		// logged here with the request it failed for.
		klog.FromContext(ctx).Error(err, "Admission policies could not be evaluated", "uid", req.UID,
			"user", req.UserInfo.Username, "operation", req.Operation, "resource", req.Resource.Resource,
			"namespace", req.Namespace, "name", req.Name, "failurePolicy", p.FailurePolicy.String())
		if p.FailurePolicy == NoOpinion {
			return AdmissionVerdict{Warnings: []string{
				fmt.Sprintf("nodeguard %s, and was ignored (admission policies do not fail closed): %v", RuleEvaluationFailed, err)}}
		}
		return AdmissionVerdict{Denied: true, Rule: RuleEvaluationFailed,
			Message: fmt.Sprintf("%v; the request is refused because admission policies fail closed", err)}
	}
	var v AdmissionVerdict
	for _, w := range res.Warn {
		v.Warnings = append(v.Warnings, "nodeguard "+policyName(w)+": "+w.Message)
	}
	if res.Denied() {
		v.Denied, v.Rule, v.Message = true, policyName(res.Deny[0]), joinDenials(res.Deny)
		v.NodeScoped = nodeScoped(req, res.Deny)
	}
	return v
}

// nodeScoped reports whether a refusal of a Node write concerns the Node's
// own state: every denial says "scope": "node". One that does not is about
// what is assigned, and decides for the refusal as a whole.
func nodeScoped(req *admissionv1.AdmissionRequest, deny []Violation) bool {
	if req.Resource.Group != "" || req.Resource.Resource != "nodes" {
		return false
	}
	for _, v := range deny {
		if !v.NodeScoped {
			return false
		}
	}
	return len(deny) > 0
}

// AuthzPolicies are the Rego policies the /authorize review judges a
// request from a node by, unless the built-in rules denied it. They combine
// conservatively:
//
//   - a policy deny turns Allow or no opinion into Deny, with the policy's
//     package, rule and message as the reason;
//   - a policy allow turns no opinion into Allow only where the built-in
//     rules found a named node's read (get, or list/watch by name) of a named
//     ConfigMap with no path in a synced graph (the review applies that
//     scope). Everywhere else it is ignored, so that policies cannot widen
//     a node's rights beyond ConfigMap reads, which the in-tree Node
//     authorizer and RBAC would otherwise decide;
//   - users that are not nodes are never judged by policies, as
//     docs/reference.md answers them without looking further.
type AuthzPolicies struct {
	Engine AuthzEvaluator
	// Graph gives the requesting node's kubelet version and labels; nil
	// leaves them empty.
	Graph GraphReader
	// FailurePolicy says what a failed evaluation means: NoOpinion (the
	// webhook's default) leaves the built-in decision alone and reports the
	// error in the review's evaluationError; FailClosed denies. The zero
	// value is FailClosed.
	FailurePolicy FailurePolicy
}

// AuthzVerdict is what the authorization policies say of one request.
type AuthzVerdict struct {
	// Denied denies the request with Reason.
	Denied bool
	// Allowed: a policy allows the request and none denies it; Reason is
	// then ReasonAuthzAllow.
	Allowed bool
	Reason  string
	// EvaluationError, when evaluation failed, goes into the review's
	// status.evaluationError.
	EvaluationError string
}

// Judge evaluates the authorization policies for spec. A user that is not
// a node gets the zero verdict without an evaluation.
func (p *AuthzPolicies) Judge(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) AuthzVerdict {
	if _, isNode := contract.NodeIdentity(spec.User, spec.Groups); !isNode {
		return AuthzVerdict{}
	}
	in := &AuthzInput{Spec: spec}
	in.Node, in.KubeletVersion, in.NodeLabels = NodeOf(spec.User, spec.Groups, p.Graph)
	res, err := p.Engine.EvalAuthz(ctx, in)
	if err != nil {
		// Counted by the engine (nodeguard_policy_evaluations_total);
		// logged here with the request it failed for.
		klog.FromContext(ctx).Error(err, "Authorization policies could not be evaluated", "user", spec.User,
			"attributes", spec.ResourceAttributes, "failurePolicy", p.FailurePolicy.String())
		evalErr := "nodeguard " + RuleEvaluationFailed + ": " + err.Error()
		if p.FailurePolicy == NoOpinion {
			return AuthzVerdict{EvaluationError: evalErr}
		}
		return AuthzVerdict{Denied: true, Reason: evalErr + "; denied because authorization policies fail closed", EvaluationError: evalErr}
	}
	if res.Denied() {
		return AuthzVerdict{Denied: true, Reason: "nodeguard " + policyName(res.Deny[0]) + ": " + joinDenials(res.Deny)}
	}
	if res.Allow {
		return AuthzVerdict{Allowed: true, Reason: ReasonAuthzAllow}
	}
	return AuthzVerdict{}
}

// policyName names the policy that produced a violation, as answers and
// metrics show it: "policy <package>/<rule>", or "policy <package>" when
// the policy named no rule.
func policyName(v Violation) string {
	if v.Rule == "" {
		return "policy " + v.Package
	}
	return "policy " + v.Package + "/" + v.Rule
}

// joinDenials joins every denial's message into one, for an answer that
// names the first denial's policy before it: each later message names its
// own policy when it differs from the one before.
func joinDenials(deny []Violation) string {
	var b strings.Builder
	b.WriteString(deny[0].Message)
	previous := policyName(deny[0])
	for _, v := range deny[1:] {
		b.WriteString("; ")
		if name := policyName(v); name != previous {
			b.WriteString(name + ": ")
			previous = name
		}
		b.WriteString(v.Message)
	}
	return b.String()
}
