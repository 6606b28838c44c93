package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// prefilter asks the rule indexes OPA builds for the queried rules whether
// any rule could match an input, before paying for an evaluation. It is the
// same lookup evaluation starts with, so a "no" is exact: the queried sets
// would come out empty and allow at its default. Most of a node's requests
// (leases, pods, events) match no rule of a policy about ConfigMaps, and
// the lookup costs a fraction of the evaluation it spares.
//
// The rules the index keeps are then checked against their label guards
// (see labelGuard) in the graph: a rule whose guard fails cannot match
// either. The graph is read a moment before the evaluation would have read
// it, as if the request had come a moment earlier.
type prefilter struct {
	indexes []ast.RuleIndex
	guards  map[*ast.Rule][]labelGuard
	graph   GraphReader
	// definedOnly are the input references the indexes only test for
	// definedness (see definednessOnly).
	definedOnly []ast.Ref
}

// newPrefilter indexes the rules behind refs and reads their guards. It
// returns nil, and every input is evaluated, when a ref with rules has no
// index.
func newPrefilter(c *ast.Compiler, g GraphReader, refs ...ast.Ref) *prefilter {
	p := &prefilter{graph: g}
	var all []*ast.Rule
	for _, ref := range refs {
		rules := c.GetRulesWithPrefix(ref)
		if len(rules) == 0 {
			continue
		}
		idx := c.RuleIndex(ref)
		if idx == nil {
			return nil
		}
		p.indexes = append(p.indexes, idx)
		all = append(all, rules...)
		for r, guards := range ruleGuards(c, rules) {
			if p.guards == nil {
				p.guards = make(map[*ast.Rule][]labelGuard)
			}
			p.guards[r] = guards
		}
	}
	p.definedOnly = definednessOnly(all)
	return p
}

// onlyDefinedness reports whether the indexes ask for ref only to learn
// whether it is defined.
func (p *prefilter) onlyDefinedness(ref ast.Ref) bool {
	if p == nil {
		return false
	}
	for _, r := range p.definedOnly {
		if r.Equal(ref) {
			return true
		}
	}
	return false
}

// mayMatch reports whether some rule, or a default, could apply to the
// input resolver answers for. A lookup error answers yes, leaving the
// decision to the evaluation. readGraph reports that the answer rests on
// the graph (a rule's label guards were checked), so that it holds only
// for now.
func (p *prefilter) mayMatch(resolver ast.ValueResolver) (may, readGraph bool) {
	if p == nil {
		return true, false
	}
	for _, idx := range p.indexes {
		res, err := idx.Lookup(resolver)
		if err != nil {
			return true, readGraph
		}
		candidates := res.Default != nil || len(res.Else) > 0
		for _, r := range res.Rules {
			if candidates {
				break
			}
			readGraph = readGraph || len(p.guards[r]) > 0
			candidates = p.guardsHold(r, resolver)
		}
		ast.IndexResultPool.Put(res)
		if candidates {
			return true, readGraph
		}
	}
	return false, readGraph
}

// guardsHold reports whether every label guard of r may hold: false only
// when the input names a node (a string) that the graph does not know, or
// knows without the label value.
func (p *prefilter) guardsHold(r *ast.Rule, resolver ast.ValueResolver) bool {
	for _, g := range p.guards[r] {
		v, err := resolver.Resolve(g.nodeName)
		if err != nil {
			return true
		}
		if v == nil {
			// An absent name leaves nodeguard.node's argument undefined.
			return false
		}
		name, ok := v.(ast.String)
		if !ok {
			// nodeguard.node fails on a non-string; let evaluation say so.
			return true
		}
		if p.graph == nil {
			return false
		}
		info, ok := p.graph.Node(string(name))
		if !ok || info == nil {
			return false
		}
		if value, ok := info.Labels[g.key]; !ok || value != g.value {
			return false
		}
	}
	return true
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
