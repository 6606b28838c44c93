package admission

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// RulePolicyEvaluation refuses a request whose admission policies could not
// be evaluated (an error or a timeout) when they fail closed.
const RulePolicyEvaluation contract.Rule = "policy evaluation failed"

// PolicyEvaluator evaluates the admission policies; *policy.Engine is one.
type PolicyEvaluator interface {
	EvalAdmission(ctx context.Context, in *policy.AdmissionInput) (policy.AdmissionResult, error)
}

// Policies are the Rego policies judged after the built-in rules, for
// requests the built-in rules allow. A policy denial refuses the request,
// naming the policy's package and rule; policy warnings join the built-in
// rules' warnings.
type Policies struct {
	Engine PolicyEvaluator
	// Graph gives the requesting node's kubelet version and labels; nil
	// leaves them empty.
	Graph policy.GraphReader
	// FailurePolicy says what a failed evaluation means: policy.FailClosed
	// refuses the request (the zero value, and the webhook's default);
	// policy.NoOpinion admits it as the built-in rules decided, with a
	// warning naming the error.
	FailurePolicy policy.FailurePolicy
}

// admit judges a request the built-in rules allowed, whose answer so far is
// builtin.
func (p *Policies) admit(ctx context.Context, a *Admitter, req *admissionv1.AdmissionRequest, builtin Result) Result {
	in := &policy.AdmissionInput{Request: req}
	in.Node, in.KubeletVersion, in.NodeLabels = policy.NodeOf(req.UserInfo.Username, req.UserInfo.Groups, p.Graph)
	in.KubeletConfig, in.OldKubeletConfig = a.kubeletConfigsOf(req)
	res, err := p.Engine.EvalAdmission(ctx, in)
	if err != nil {
		// Counted by the engine (nodeguard_policy_evaluations_total);
		// logged here with the request it failed for.
		klog.FromContext(ctx).Error(err, "Admission policies could not be evaluated", "uid", req.UID,
			"user", req.UserInfo.Username, "operation", req.Operation, "resource", req.Resource.Resource,
			"namespace", req.Namespace, "name", req.Name, "failurePolicy", p.FailurePolicy.String())
		if p.FailurePolicy == policy.NoOpinion {
			builtin.Warnings = append(builtin.Warnings,
				fmt.Sprintf("nodeguard %s, and was ignored (admission policies do not fail closed): %v", RulePolicyEvaluation, err))
			return builtin
		}
		refused := refuse(RulePolicyEvaluation, "%v; the request is refused because admission policies fail closed", err)
		refused.Warnings = builtin.Warnings
		return refused
	}
	warnings := builtin.Warnings
	for _, v := range res.Warn {
		warnings = append(warnings, "nodeguard "+policyName(v)+": "+v.Message)
	}
	if !res.Denied() {
		builtin.Warnings = warnings
		return builtin
	}
	return Result{Rule: contract.Rule(policyName(res.Deny[0])), Message: denialMessage(res.Deny), Warnings: warnings,
		NodeState: nodeScoped(req, res.Deny)}
}

// nodeScoped reports whether a policy refusal of a Node write concerns the
// Node's own state: every denial says "scope": "node". One that does not
// is about what is assigned, and decides for the refusal as a whole.
func nodeScoped(req *admissionv1.AdmissionRequest, deny []policy.Violation) bool {
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

// policyName names the policy that produced a violation, as answers and
// metrics show it: "policy <package>/<rule>", or "policy <package>" when
// the policy named no rule.
func policyName(v policy.Violation) string {
	if v.Rule == "" {
		return "policy " + v.Package
	}
	return "policy " + v.Package + "/" + v.Rule
}

// denialMessage joins every denial into one message; the first one's policy
// is the Rule, and each later one names its own policy when it differs.
func denialMessage(deny []policy.Violation) string {
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

// kubeletConfigsOf decodes the configurations of an eligible ConfigMap
// being created or updated, for input.nodeguard.kubeletConfig and
// .oldKubeletConfig. Anything that does not decode is left nil (null to
// policies): the built-in rules have already refused invalid content, except
// from exempt users.
func (a *Admitter) kubeletConfigsOf(req *admissionv1.AdmissionRequest) (cfg, old *kubeletconfigv1beta1.KubeletConfiguration) {
	if req.Resource.Group != "" || req.Resource.Resource != "configmaps" || req.SubResource != "" {
		return nil, nil
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil
	}
	if cm, err := decodeConfigMap(req.Object, "object"); err == nil {
		cfg = a.eligibleConfig(cm)
	}
	if req.Operation == admissionv1.Update {
		old, _ = a.storedConfig(req.OldObject)
	}
	return cfg, old
}
