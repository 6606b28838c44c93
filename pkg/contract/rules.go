package contract

// Rule names one of nodeguard's admission rules in its refusals
// ("nodeguard <rule>: <message>"), its metrics and its decision log. The
// numbered rules are those of docs/reference.md ("Admission rules"); the
// webhook (pkg/admission) defines the others beside the code that applies
// them. `kubectl nodeguard` words its own checks of the feature-gates and config-content rules with the
// same names, so that a refusal reads the same from either.
type Rule string

// Refusal words a refusal under the rule as the webhook's answer does and
// `kubectl nodeguard` repeats it: "nodeguard <rule>: <message>".
func (r Rule) Refusal(message string) string {
	return "nodeguard " + string(r) + ": " + message
}

// The numbered admission rules.
const (
	RuleOwnNode           Rule = "rule 1 (own-node)"
	RuleNodeRestriction   Rule = "rule 2 (node-restriction)"
	RuleConfigSource      Rule = "rule 3 (config-source)"
	RuleMinKubeletVersion Rule = "rule 4 (min-kubelet-version)"
	RuleFeatureGates      Rule = "rule 5 (feature-gates)"
	RuleConfigContent     Rule = "rule 6 (config-content)"
)
