package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
)

// AllowedNamespacesKey is the configuration key (data.nodeguard.config) of
// the shipped config_namespaces policy: the namespaces kubelet
// configurations may live in.
const AllowedNamespacesKey = "allowed_namespaces"

// DefaultExemptNamespaces are the namespaces the shipped
// ValidatingWebhookConfiguration's namespaceSelector keeps away from the
// webhook (manifests/base/validatingwebhookconfiguration.yaml).
func DefaultExemptNamespaces() []string { return []string{"kube-system", "nodeguard"} }

var allowedNamespacesRef = ast.MustParseRef("data.nodeguard.config." + AllowedNamespacesKey)

// CheckAllowedNamespaces refuses an allowed_namespaces value that names a
// namespace the admission webhook never sees: an eligible ConfigMap there
// would be created, assigned and read without any content check, and its
// later edits never judged. value is the configuration as JSON decodes it
// (an array, or a set as OPA returns it: an array too).
func CheckAllowedNamespaces(value any, exempt []string) error {
	list, ok := value.([]any)
	if !ok {
		return fmt.Errorf("%s must be a list of namespace names, got %T", AllowedNamespacesKey, value)
	}
	var bad []string
	for i, v := range list {
		ns, ok := v.(string)
		if !ok || ns == "" {
			return fmt.Errorf("%s[%d] must be a namespace name, got %v", AllowedNamespacesKey, i, v)
		}
		if slices.Contains(exempt, ns) && !slices.Contains(bad, ns) {
			bad = append(bad, ns)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%s names %s, which the admission webhook does not judge (its namespaceSelector exempts %s): "+
		"kubelet configurations there would skip every content check and policy; keep them in a namespace of their own, such as kubelet-configs",
		AllowedNamespacesKey, strings.Join(bad, ", "), strings.Join(exempt, ", "))
}

// checkConfigNamespaces evaluates allowed_namespaces as the compiled set
// and its data define it, and refuses the set when it names an exempt
// namespace. Undefined is fine: the policy's own default applies.
func (e *Engine) checkConfigNamespaces(ctx context.Context, c *ast.Compiler, txn storage.Transaction) []Problem {
	if len(e.exemptNamespaces) == 0 {
		return nil
	}
	opts := append([]func(*rego.Rego){
		rego.Compiler(c),
		rego.Store(e.store),
		rego.Transaction(txn),
		rego.Query(allowedNamespacesRef.String()),
		rego.SetRegoVersion(ast.RegoV1),
	}, builtinOptions(e.graph)...)
	rs, err := rego.New(opts...).Eval(ctx)
	where := Problem{File: e.displayRoot + " (data.nodeguard.config, from --policy-data)", Code: codeNodeguard}
	if rules := c.GetRulesWithPrefix(allowedNamespacesRef); len(rules) > 0 && rules[0].Location != nil {
		loc := rules[0].Location
		where.File, where.Line, where.Column = loc.File, loc.Row, loc.Col
	}
	if err != nil {
		where.Message = fmt.Sprintf("evaluating %s: %v", allowedNamespacesRef, err)
		return []Problem{where}
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil
	}
	if err := CheckAllowedNamespaces(rs[0].Expressions[0].Value, e.exemptNamespaces); err != nil {
		where.Message = err.Error()
		return []Problem{where}
	}
	return nil
}
