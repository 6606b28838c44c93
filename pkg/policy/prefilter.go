package policy

import "github.com/open-policy-agent/opa/v1/ast"

// prefilter asks the rule indexes OPA builds for the queried rules whether
// any rule could match an input, before paying for an evaluation. It is the
// same lookup evaluation starts with, so a "no" is exact: the queried sets
// would come out empty and allow at its default. Most of a node's requests
// (leases, pods, events) match no rule of a policy about ConfigMaps, and
// the lookup costs a fraction of the evaluation it spares.
type prefilter struct {
	indexes []ast.RuleIndex
}

// newPrefilter indexes the rules behind refs. It returns nil, and every
// input is evaluated, when a ref with rules has no index.
func newPrefilter(c *ast.Compiler, refs ...ast.Ref) *prefilter {
	p := &prefilter{}
	for _, ref := range refs {
		if len(c.GetRulesWithPrefix(ref)) == 0 {
			continue
		}
		idx := c.RuleIndex(ref)
		if idx == nil {
			return nil
		}
		p.indexes = append(p.indexes, idx)
	}
	return p
}

// mayMatch reports whether some rule, or a default, could apply to input.
// A lookup error answers yes, leaving the decision to the evaluation.
func (p *prefilter) mayMatch(input ast.Value) bool {
	if p == nil {
		return true
	}
	resolver := inputResolver{input: input}
	for _, idx := range p.indexes {
		res, err := idx.Lookup(resolver)
		if err != nil {
			return true
		}
		candidates := len(res.Rules) > 0 || res.Default != nil
		ast.IndexResultPool.Put(res)
		if candidates {
			return true
		}
	}
	return false
}

// inputResolver answers the index's questions about input the way
// evaluation does (an absent path is undefined), and calls everything else
// unknown, which keeps the rules that depend on it.
type inputResolver struct {
	input ast.Value
}

func (r inputResolver) Resolve(ref ast.Ref) (ast.Value, error) {
	if !ref[0].Equal(ast.InputRootDocument) {
		return nil, ast.UnknownValueErr{}
	}
	v, err := r.input.Find(ref[1:])
	if err != nil {
		// An absent path is undefined, not an error.
		return nil, nil
	}
	return v, nil
}
