package cli

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// The webhook's names for the rules an assignment can break, as its
// refusals spell them (pkg/admission's Rule values; a test keeps them
// equal).
const (
	ruleFeatureGates  = "rule 5 (feature-gates)"
	ruleConfigContent = "rule 6 (config-content)"
)

// webhookRefusal words a refusal as the webhook's Status message does.
func webhookRefusal(rule, format string, args ...any) string {
	return fmt.Sprintf("nodeguard %s: %s", rule, fmt.Sprintf(format, args...))
}

// verdict is what the client-side checks say of one node's change.
type verdict struct {
	// problems are the reasons for a refusal, the webhook's first when it
	// would refuse too; none means the change may go ahead.
	problems []string
	warnings []string
}

func (v verdict) refused() bool { return len(v.problems) > 0 }

// candidate is a ConfigMap about to be assigned, decoded and validated
// once for every node it goes to.
type candidate struct {
	ref contract.ConfigMapRef
	// cm is nil when the ConfigMap does not exist.
	cm        *corev1.ConfigMap
	cfg       *kubeletconfigv1beta1.KubeletConfiguration
	decodeErr error
	invalid   field.ErrorList
}

func newCandidate(ref contract.ConfigMapRef, cm *corev1.ConfigMap) *candidate {
	c := &candidate{ref: ref, cm: cm}
	if cm == nil || !contract.IsEligible(cm.Labels) {
		return c
	}
	c.cfg, c.decodeErr = kubeletconfig.DecodeConfigMapKey(cm, contract.ConfigMapKey)
	if c.decodeErr == nil {
		c.invalid = kubeletconfig.Validate(c.cfg)
	}
	return c
}

// judge checks the assignment of the candidate to node. Where the webhook
// refuses (rule 6's strict decoding, rule 5's feature gates against the
// node's kubelet version) the problem is worded as the webhook words it.
// The client is stricter where the webhook lets an assignment through that
// the agent would then refuse to apply: a ConfigMap that does not exist, is
// not eligible, or does not validate. A node that reports no parseable
// kubelet version is judged against every kubelet version nodeguard knows,
// as it is at the webhook.
func (c *candidate) judge(node *corev1.Node) verdict {
	var v verdict
	switch {
	case c.cm == nil:
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s does not exist", c.ref))
		return v
	case !contract.IsEligible(c.cm.Labels):
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s is not an eligible kubelet configuration: it lacks the label %s=%s, so no node may read it",
			c.ref, contract.EligibleLabel, contract.EligibleLabelValue))
		return v
	case c.decodeErr != nil:
		v.problems = append(v.problems, webhookRefusal(ruleConfigContent, "cannot assign %s to node %q: %v", c.ref, node.Name, c.decodeErr))
		return v
	}
	if c.cm.Immutable == nil || !*c.cm.Immutable {
		v.warnings = append(v.warnings, mutableWarning(c.ref.String(), node.Name))
	}
	reported := node.Status.NodeInfo.KubeletVersion
	if errs, err := kubeletconfig.CheckAssignment(c.cfg, reported); err != nil {
		if errs := checkEveryKnownKubelet(c.cfg); len(errs) > 0 {
			v.problems = append(v.problems, webhookRefusal(ruleFeatureGates, "cannot assign %s to node %q: it reports no parseable kubelet version (%q), and no kubelet nodeguard knows (%s) can run it: %v",
				c.ref, node.Name, reported, knownKubelets(), kubeletconfig.Summarize(errs)))
		} else {
			v.warnings = append(v.warnings, fmt.Sprintf("node %s reports no parseable kubelet version (%q); %s was judged against every kubelet nodeguard knows (%s), not its own",
				node.Name, reported, c.ref, knownKubelets()))
		}
	} else if len(errs) > 0 {
		v.problems = append(v.problems, webhookRefusal(ruleFeatureGates, "cannot assign %s to node %q (kubelet %s): %v", c.ref, node.Name, reported, kubeletconfig.Summarize(errs)))
	}
	if len(c.invalid) > 0 {
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s holds an invalid KubeletConfiguration, which the agent would refuse to apply: %v", c.ref, kubeletconfig.Summarize(c.invalid)))
	}
	return v
}

// mutableWarning is the webhook's warning on assigning a ConfigMap that is
// not immutable (pkg/admission MutableConfigMapWarning, kept equal by
// TestChecksAgreeWithTheWebhook).
func mutableWarning(ref, node string) string {
	return fmt.Sprintf("ConfigMap %s is mutable: once node %s has it open, its edits keep reaching the node after the assignment or the label is removed (a watch is authorized when it starts); "+
		"prefer one immutable ConfigMap per revision (immutable: true, a new name for each change, as 'kubectl nodeguard create' makes them)", ref, node)
}

// checkEveryKnownKubelet is the webhook's judgement for a node whose kubelet
// version cannot be trusted (pkg/admission, versions.go; the webhook's
// package is not imported here, it would bring the policy engine into the
// plugin, and TestChecksAgreeWithTheWebhook keeps the two equal): no errors
// when some kubelet version the feature-gate data covers can run cfg.
func checkEveryKnownKubelet(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	_, oldest, newest := kubeletconfig.FeatureGateCoverage()
	first := oldest.Minor()
	if oldest.Major() != newest.Major() {
		first = newest.Minor()
	}
	var errs field.ErrorList
	for minor := first; minor <= newest.Minor(); minor++ {
		errs = kubeletconfig.CheckFeatureGates(cfg, version.MajorMinor(newest.Major(), minor))
		if len(errs) == 0 {
			return nil
		}
	}
	return errs
}

// knownKubelets names the versions checkEveryKnownKubelet judges against.
func knownKubelets() string {
	_, oldest, newest := kubeletconfig.FeatureGateCoverage()
	return fmt.Sprintf("%d.%d to %d.%d", oldest.Major(), oldest.Minor(), newest.Major(), newest.Minor())
}
