package kubeletconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Candidate is a ConfigMap about to be assigned, as it decoded. It is
// decoded once and judged for every node it goes to.
type Candidate struct {
	// ConfigMap names it, for messages.
	ConfigMap contract.ConfigMapRef
	// Config is the decoded configuration; nil when Err is set.
	Config *kubeletconfigv1beta1.KubeletConfiguration
	// Err is why there is no Config: the key is missing, or its content
	// does not decode. It names the ConfigMap and key, as
	// DecodeConfigMapKey's errors (or ConfigMapError) do.
	Err error
	// Mutable is true when the ConfigMap is not immutable.
	Mutable bool
}

// Judgement is what the feature-gates and config-content rules say of assigning a Candidate to a node.
type Judgement struct {
	// Refused is true when the assignment breaks Rule; Message says why.
	Refused bool
	Rule    contract.Rule
	Message string
	// NodeState marks a refusal that concerns the node's own reported
	// kubelet version rather than the configuration: a rollout skips that
	// node instead of failing its pool for it.
	NodeState bool
	// Warnings are what the assigner should know besides: the webhook
	// sends them only with an assignment it allows, `kubectl nodeguard`
	// prints them with a refusal too.
	Warnings []string
	// KubeletVersion is the node's reported version, parsed; nil when it
	// does not parse, and the configuration was judged against every
	// kubelet nodeguard knows instead.
	KubeletVersion *version.Version
}

// Refusal words a refusal as the webhook's answer does, "nodeguard <rule>:
// <message>"; "" when the assignment is not refused.
func (j Judgement) Refusal() string {
	if !j.Refused {
		return ""
	}
	return j.Rule.Refusal(j.Message)
}

// JudgeAssignment applies the config-content rule (the configuration decodes) and the feature-gates rule
// (the node's kubelet can run it) to assigning c to the node nodeName,
// which reports reportedVersion (status.nodeInfo.kubeletVersion). The
// admission webhook and `kubectl nodeguard` both judge an assignment with
// it, so that the plugin refuses what the webhook would, with the same
// words.
//
// The node's own report decides, even a lowered one: a refusal on its
// version concerns that node alone, and says so (NodeState). A node that
// reports no parseable version has no say: the configuration must then be
// one some kubelet nodeguard knows can run, which no report can change.
// Whether a parseable report may be trusted for configurations a node
// shares with others is the webhook's to decide; this judges one
// assignment only.
func JudgeAssignment(c Candidate, nodeName, reportedVersion string) Judgement {
	var j Judgement
	if c.Err != nil {
		j.refuse(contract.RuleConfigContent, "cannot assign %s to node %q: %v", c.ConfigMap, nodeName, c.Err)
		return j
	}
	if c.Mutable {
		j.Warnings = append(j.Warnings, MutableConfigMapWarning(c.ConfigMap.String(), nodeName))
	}
	parsed, err := version.ParseGeneric(reportedVersion)
	if err != nil {
		if errs := CheckEveryKnownKubelet(c.Config); len(errs) > 0 {
			j.refuse(contract.RuleFeatureGates, "cannot assign %s to node %q: it reports no parseable kubelet version (%q), and no kubelet nodeguard knows (%s) can run it: %v",
				c.ConfigMap, nodeName, reportedVersion, KnownKubelets(), Summarize(errs))
			return j
		}
		j.Warnings = append(j.Warnings, fmt.Sprintf("node %s reports no parseable kubelet version (%q); %s was judged against every kubelet nodeguard knows (%s), not its own",
			nodeName, reportedVersion, c.ConfigMap, KnownKubelets()))
		return j
	}
	j.KubeletVersion = parsed
	if errs := CheckFeatureGates(c.Config, parsed); len(errs) > 0 {
		j.refuse(contract.RuleFeatureGates, "cannot assign %s to node %q (kubelet %s): %v", c.ConfigMap, nodeName, reportedVersion, Summarize(errs))
		j.NodeState = true
	}
	return j
}

func (j *Judgement) refuse(rule contract.Rule, format string, args ...any) {
	j.Refused, j.Rule, j.Message = true, rule, fmt.Sprintf(format, args...)
}

// MutableConfigMapWarning is the warning on assigning a ConfigMap that is
// not immutable. Revoking a node's access does not reach a watch it already
// has open (authorization is decided when a watch starts), so edits of a
// mutable ConfigMap keep arriving after the assignment or the label is
// gone; a configuration that never changes has nothing more to deliver.
func MutableConfigMapWarning(ref, node string) string {
	return fmt.Sprintf("ConfigMap %s is mutable: once node %s has it open, its edits keep reaching the node after the assignment or the label is removed (a watch is authorized when it starts); "+
		"prefer one immutable ConfigMap per revision (immutable: true, a new name for each change, as 'kubectl nodeguard create' makes them)", ref, node)
}

// CheckEveryKnownKubelet judges a configuration for a node whose version
// cannot be trusted: no errors when some kubelet version the feature-gate
// data covers can run it; otherwise the errors at the newest. A gate no
// kubelet nodeguard knows is refused this way, whatever the node says.
func CheckEveryKnownKubelet(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	_, oldest, newest := FeatureGateCoverage()
	first := oldest.Minor()
	if oldest.Major() != newest.Major() {
		first = newest.Minor()
	}
	var errs field.ErrorList
	for minor := first; minor <= newest.Minor(); minor++ {
		errs = CheckFeatureGates(cfg, version.MajorMinor(newest.Major(), minor))
		if len(errs) == 0 {
			return nil
		}
	}
	return errs
}

// KnownKubelets names the versions CheckEveryKnownKubelet judges against,
// for messages.
func KnownKubelets() string {
	_, oldest, newest := FeatureGateCoverage()
	return fmt.Sprintf("%d.%d to %d.%d", oldest.Major(), oldest.Minor(), newest.Major(), newest.Minor())
}
